"""RE2 as a candidate finder (one combined program over the whole chunk, then a set of the
patterns on each line it finds) and as the verifier's matcher (linear time, whatever the pattern).

RE2 reads valid UTF-8 only: a chunk with invalid bytes is searched as its repaired copy
(utf8view), so that it proposes the lines the verifier, which decodes with U+FFFD, matches.
"""

from __future__ import annotations

from typing import Callable

from troubleshoot.scan import engines
from troubleshoot.scan.candidates import Candidates, line_span
from troubleshoot.scan.result import ScanPattern

_CR_TO_LF = bytes.maketrans(b"\r", b"\n")

Found = "tuple[int, int, dict] | None"  # (start, end, captures) of a match in a segment


class Re2Candidates(Candidates):
    """One RE2 alternation over the whole chunk, then an RE2 set on each hit line."""

    name = "re2"

    def _build(self) -> None:
        lib = engines.re2_module()
        # never_nl: a match never spans lines, like a line-by-line scan.
        opts = engines.re2_options(never_nl=True, never_capture=True, max_mem=256 << 20)
        sources = [self.patterns[i].inline_source for i in self.active]
        # \r only matters to anchors: without any, the chunk need not be copied to split it.
        self.anchored = any("^" in s or "$" in s for s in sources)
        # (?m): ^ and $ anchor at each line (and each \r segment), as they do per segment in `re`.
        combined = "|".join(f"(?:{s})" for s in sources)
        self.combined = lib.compile(f"(?m){combined}".encode(), opts) if sources else None
        self.set = lib.Set.SearchSet(opts)
        for s in sources:
            self.set.Add(f"(?m){s}".encode())
        if sources:
            self.set.Compile()
        self.dirty = False
        if len(self.active) == len(self.patterns):
            self._full = (self.anchored, self.combined, self.set)

    def _restore(self) -> None:
        # The programs of every pattern, kept from the first build: compiling them again for
        # each log of a folder cost more than scanning it.
        self.anchored, self.combined, self.set = self._full
        self.dirty = False

    def spans(self, chunk: bytes, end: int):
        from troubleshoot.scan import utf8view  # the RE2 engine only: a database's scan never loads it

        copy = utf8view.repaired(chunk)  # RE2 reads valid UTF-8 only, the verifier any bytes
        return self._spans(chunk) if copy is None else utf8view.mapped_back(self._spans(copy), copy, chunk)

    def _spans(self, chunk: bytes):
        if self.dirty:  # patterns retired since the last chunk (or by a caller that read ahead)
            self._build()
        scan = chunk.translate(_CR_TO_LF) if self.anchored and b"\r" in chunk else chunk
        pos = 0
        while self.combined is not None and pos < len(scan):
            m = self.combined.search(scan, pos)
            if m is None or (m.start() == len(scan) and scan.endswith(b"\n")):
                return  # (an empty match after the last newline is no line of this chunk)
            start, end = line_span(chunk, m.start())
            pos = end + 1
            active = self.active
            # In pattern order, as the other engines give them: the first pattern of a group that
            # matches supplies the evidence span.
            yield start, end, sorted(active[k] for k in self.set.Match(scan[start:end]))
            if self.dirty:
                self._build()


def verifier(p: ScanPattern) -> Callable[[str], Found] | None:
    """The pattern's RE2 matcher for the verifier; None without RE2 or where RE2 refuses it."""
    if not engines.re2_available():
        return None
    try:
        return matcher(engines.re2_compile(p.inline_source))
    except Exception:
        return None


def matcher(rx) -> Callable[[str], Found]:
    """find(segment) -> (start, end, captures) or None, by RE2's matcher called directly on the
    UTF-8 bytes of the segment: the Python wrapper's search() maps every offset back to
    characters and builds a match object, which cost more than the match itself on a short line."""
    low = getattr(rx, "_regexp", None)
    anchor = getattr(getattr(engines.re2_module(), "_Anchor", None), "UNANCHORED", None)
    if low is None or anchor is None or not hasattr(low, "Match"):
        return _searcher(rx)  # another re2 wrapper: its public API reads like `re`'s
    match = low.Match
    names = sorted(rx.groupindex.items(), key=lambda kv: kv[1])

    def find(seg: str):
        data = seg.encode("utf-8", "surrogatepass")
        spans = match(anchor, data, 0, len(data))
        start, end = spans[0]
        if start < 0:
            return None
        captures = {}
        for name, k in names:
            a, b = spans[k]
            captures[name] = None if a < 0 else data[a:b].decode("utf-8", "replace")
        if len(data) != len(seg):  # not ASCII: byte offsets to character offsets
            start = len(data[:start].decode("utf-8", "replace"))
            end = start + len(data[spans[0][0] : spans[0][1]].decode("utf-8", "replace"))
        return start, end, captures
    return find


def _searcher(rx) -> Callable[[str], Found]:
    search = rx.search

    def find(seg: str):
        m = search(seg)
        return None if m is None else (m.start(), m.end(), m.groupdict())
    return find
