"""`lazy(pattern, flags)`: a module's regular expression compiled where it is first used.

Python compiles each `re.compile` at import, 50-400 µs a pattern; the modules a small diagnosis
imports held forty of them, a third for inputs it never sees (merged rank logs, globs, commands
to quote). A `LazyPattern` is used as the compiled pattern is
(`.search`, `.sub`, `.pattern`, `.groupindex`...): the first use compiles it, and each attribute
is then kept on the object itself, so later uses cost what they cost on the compiled pattern.
It is not an `re.Pattern`: a module function that needs one (`re.sub(rx, ...)`) gets
`rx.compiled`.
"""

from __future__ import annotations

import re


class LazyPattern:
    def __init__(self, pattern: str | bytes, flags: int = 0):
        self._args = (pattern, flags)

    @property
    def compiled(self) -> re.Pattern:
        found = self.__dict__.get("_compiled")
        if found is None:
            found = self.__dict__["_compiled"] = re.compile(*self._args)
        return found

    def __getattr__(self, name: str):
        # Called only for what the object does not hold yet: each attribute once.
        if name.startswith("__"):
            raise AttributeError(name)
        value = getattr(self.compiled, name)
        self.__dict__[name] = value
        return value

    def __repr__(self) -> str:
        return f"lazy({self._args[0]!r})"


def lazy(pattern: str | bytes, flags: int = 0) -> LazyPattern:
    """`re.compile(pattern, flags)`, done at the first use."""
    return LazyPattern(pattern, flags)
