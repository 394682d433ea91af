"""Errors that reach the user as one line, never as a traceback."""

from __future__ import annotations


class TroubleshootError(Exception):
    """A problem the user can act on; the CLI prints it as `troubleshoot: error: ...`."""


class Problem(TroubleshootError):
    """A problem located in a file: printed as `file:line: message`."""

    def __init__(self, path: str, line: int | None, message: str, level: str = "error"):
        self.path = str(path)
        self.line = line
        self.message = message
        self.level = level
        super().__init__(str(self))

    def __reduce__(self):
        # An exception pickles as its class and args (here the message alone), which this
        # __init__ does not take: the rule set's cache keeps problems as they were made.
        return (Problem, (self.path, self.line, self.message, self.level))

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        prefix = "" if self.level == "error" else f"{self.level}: "
        return f"{where}: {prefix}{self.message}"
