"""What a POSIX shell says, and the status it returns, for a command it cannot run."""

from __future__ import annotations

import errno
import os
import shutil

from troubleshoot.errors import TroubleshootError


class ExecError(TroubleshootError):
    """The command could not be started; `exit_code` is the shell's: 127 not found, 126 not executable."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


def exec_error(argv0: str, exc: OSError) -> ExecError:
    """What a POSIX shell says and returns for a command it cannot run."""
    path = argv0 if "/" in argv0 else shutil.which(argv0)
    if isinstance(exc, FileNotFoundError):
        if path and os.path.lexists(path):
            return ExecError(f"{argv0}: bad interpreter: the program on its #! line does not exist", 126)
        return ExecError(f"{argv0}: {'no such file' if '/' in argv0 else 'command not found'}", 127)
    if path and os.path.isdir(path):
        return ExecError(f"{argv0}: is a directory", 126)
    if isinstance(exc, PermissionError):
        return ExecError(f"{argv0}: permission denied (not executable: chmod +x it, or run it with its "
                         f"interpreter)", 126)
    if exc.errno == errno.ENOEXEC:
        # Decision (docs/plugins.md, `troubleshoot run`): no guessing with /bin/sh, unlike a shell.
        return ExecError(f"{argv0}: not a valid executable (no #! line, and not a program for this machine); "
                         f"add a #! line or run it as `sh {argv0}`", 126)
    return ExecError(f"{argv0}: cannot execute: {exc.strerror or exc}", 126)
