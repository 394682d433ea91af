"""Whether a rule's log pattern is usable: it compiles in the engine that will run it, stays in
RE2's subset, and cannot take Python's `re` exponential time.

Patterns already found usable are kept across runs: compiling every pattern of every rule to
check it was a sixth of a cold start, for patterns that rarely change. The cache entry is keyed
by what decides the answer (the interpreter, RE2 and its version, whether RE2 runs).
"""

from __future__ import annotations

import re
import sys

from troubleshoot import usercache
from troubleshoot.model import compile_ascii
from troubleshoot.scan import re2_available, re2_compatible
from troubleshoot.scan.backtrack import superlinear

# The format is part of every entry's stamp: bump it whenever check_pattern's verdicts change.
CACHE = usercache.Cache("patterns", format=3)


class _CheckedPatterns:
    """The patterns known to pass check_pattern, read from the cache once per process."""

    def __init__(self):
        self.known: set[str] | None = None
        self.runs: bool | None = None  # whether RE2 was there when `known` was read (it can go away)
        self.added = False

    def _key(self) -> tuple:
        re2 = sys.modules.get("re2")
        return (sys.version, str(getattr(re2, "__version__", re2 is not None)), re2_available())

    def load(self) -> set[str]:
        if self.runs != re2_available():
            self.known, self.runs = None, re2_available()
        if self.known is None:
            import marshal

            key = self._key()
            blob = CACHE.get(key, key)
            try:
                found = marshal.loads(blob) if blob else None
            except (ValueError, EOFError, TypeError):
                found = None
            self.known = set(found) if isinstance(found, frozenset) and all(isinstance(x, str) for x in found) else set()
        return self.known

    def add(self, source: str) -> None:
        self.load().add(source)
        self.added = True

    def save(self) -> None:
        if not self.added:
            return
        import marshal

        self.added = False
        key = self._key()
        CACHE.put(key, key, marshal.dumps(frozenset(self.known or ())))


# One per process: a rule set built again (another set of packs, a reload) checks no pattern twice.
_CHECKED = _CheckedPatterns()


def check_pattern(source: str) -> str | None:
    """None if the pattern is usable, else why. RE2 (fast, and the engine that runs it) checks
    it when installed; Python's `re` otherwise. `rules lint` checks both."""
    if source in _CHECKED.load():
        return None
    complaint = _check_pattern(source)
    if complaint is None:
        _CHECKED.add(source)
    return complaint


def save_checked() -> None:
    """Keep the patterns found usable since the last save for the next runs (once per build of
    a rule set, not once per pattern)."""
    _CHECKED.save()


def _check_pattern(source: str) -> str | None:
    complaint = _readable(re2_compatible(source))
    if complaint or not re2_available():
        try:
            regex = compile_ascii(source)
        except re.error as exc:
            return f"regex does not compile: {exc}"
        # Where Python's re runs the pattern (no RE2), a shape it takes exponential time on would
        # hang the scan; a backreference, which RE2 refuses, is named for what it costs.
        why = superlinear(regex)
        if why:
            return f"regex has {why}"
    if complaint:
        return f"regex is outside the RE2 subset (no backreferences or lookaround): {complaint}"
    return None


def _readable(complaint: str | None) -> str | None:
    """RE2's complaint as text: its error carries bytes, whose str() is a repr (b'...')."""
    if complaint and complaint[:2] in ("b'", 'b"'):
        import ast

        try:
            return ast.literal_eval(complaint).decode("utf-8", "replace")
        except (ValueError, SyntaxError, AttributeError):
            return complaint
    return complaint
