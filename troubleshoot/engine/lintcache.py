"""What `rules lint` found about each pattern, kept across runs.

The checks of one pattern (does Python's `re` compile it, can it take superlinear time, does
it or its prefilter form match ordinary training-log lines) depend on the pattern alone and on
the code that checks it, and the shipped rules hold some 1,500 patterns (one per printed form of
each message catalog): checking them all again on every lint costs a second or more. The
verdicts are kept per pattern, stamped with the checking code's files.
"""

from __future__ import annotations

import sys
from pathlib import Path

from troubleshoot import usercache

CACHE = usercache.Cache("lint", format=1)


class PatternVerdicts:
    """Each pattern's findings as (code, detail) pairs: `compile`, `superlinear`, `empty`,
    `ordinary`, `prefilter`. Read once, written back once if anything was added."""

    def __init__(self, check, code_files: list[Path]):
        self._check, self._files = check, code_files
        self._known: dict[str, tuple] | None = None
        self._added = False

    def _stamp(self) -> tuple:
        return (sys.version, tuple(usercache.file_stamps(self._files)))

    def get(self, source: str) -> tuple:
        if self._known is None:
            self._known = self._load()
        found = self._known.get(source)
        if found is None:
            found = self._known[source] = tuple(self._check(source))
            self._added = True
        return found

    def _load(self) -> dict:
        import marshal

        stamp = self._stamp()
        blob = CACHE.get("verdicts", stamp)
        try:
            data = marshal.loads(blob) if blob else {}
        except (ValueError, EOFError, TypeError):
            data = {}
        return data if isinstance(data, dict) else {}

    def save(self) -> None:
        if not self._added or self._known is None:
            return
        import marshal

        self._added = False
        CACHE.put("verdicts", self._stamp(), marshal.dumps(self._known))
