"""The pure-Python candidate finder: each pattern's required literal found with bytes.find.

It runs where neither hyperscan nor RE2 is installed, and for the patterns hyperscan rejects
where RE2 is not. A pattern without a required literal is tried on every line.
"""

from __future__ import annotations

import re

from troubleshoot.scan.required import required_literals
from troubleshoot.scan.candidates import Candidates, line_span, line_starts


class LiteralCandidates(Candidates):
    """Pure-Python fallback: each pattern's required literal found with bytes.find."""

    name = "re"

    def _build(self) -> None:
        self.by_literal: dict[bytes, list[int]] = {}
        self.by_folded: dict[bytes, list[int]] = {}
        self.always: list[int] = []
        for i in self.active:
            p = self.patterns[i]
            lits = required_literals(p.compiled)
            if not lits:
                self.always.append(i)
                continue
            table = self.by_folded if p.compiled.flags & re.IGNORECASE else self.by_literal
            for lit in lits:
                key = lit.lower() if table is self.by_folded else lit
                table.setdefault(key.encode(), []).append(i)
        self.dirty = False

    def spans(self, chunk: bytes, end: int):
        if self.dirty:
            self._build()
        found: dict[int, set[int]] = {}
        for table, text in ((self.by_literal, chunk), (self.by_folded, chunk.lower() if self.by_folded else b"")):
            for lit, idxs in table.items():
                pos = text.find(lit)
                while pos >= 0:
                    start, end = line_span(chunk, pos)
                    found.setdefault(start, set()).update(idxs)
                    pos = text.find(lit, end + 1) if end + 1 < len(text) else -1
        # Patterns without a literal are tried on every line; the others still only where theirs is.
        starts = line_starts(chunk) if self.always else sorted(found)
        retired, always = self.retired, self.always
        for start in starts:
            idxs = found.get(start)
            wanted = idxs.union(always) if idxs else always
            live = sorted(i for i in wanted if i not in retired)  # retired by the lines before
            if live:
                _, end = line_span(chunk, start)
                yield start, end, live
