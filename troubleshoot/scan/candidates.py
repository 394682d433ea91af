"""What every candidate finder does: propose the lines of a chunk that may match, and which
patterns may match each, for the verifier to decide.

The finders (literal.py, re2.py, hyperscan.py) differ only in speed: each proposes at least
every line a pattern matches, in line order, each line once.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from troubleshoot.scan.result import ScanPattern

Span = tuple[int, int, "Sequence[int] | None"]  # line start, line end, pattern indexes (None: try all)


class Candidates:
    """Finds candidate line spans in a chunk; subclasses differ only in speed.

    Patterns that only need to be seen once (with_log, without_log) are retired after their
    first hit, so a context pattern that matches every other line stops costing anything.
    """

    name = "abstract"
    zero_copy = False  # True: spans() takes the read buffer and an end, without a copy
    raw_ansi = False  # True: spans() takes the chunk with its escape sequences still in
    deferred: frozenset[int] = frozenset()  # patterns left for a second pass (hyperscan only)

    def __init__(self, patterns: Sequence[ScanPattern]):
        self.patterns = patterns
        self.verifiers: dict = {}  # pattern index -> its verifier (verify.Verifiers, set by the scan)
        self.active = list(range(len(patterns)))
        self.retired: set[int] = set()
        self.dirty = False
        self._build()

    def reset(self) -> None:
        """Every pattern looked for again: the finder made ready for the next log of a command."""
        if self.retired:
            self.retired = set()
            self.active = list(range(len(self.patterns)))
            self._restore()

    def _restore(self) -> None:
        """Back to every pattern after `reset` (rebuilt unless a subclass kept the full form)."""
        self._build()

    def retire(self, index: int) -> None:
        self.retired.add(index)
        if index in self.active:
            self.active.remove(index)
            self.dirty = True

    def _build(self) -> None:
        raise NotImplementedError

    def pool(self, threads: int):
        """Worker threads that can run this finder's first pass (None: it runs in one thread)."""
        return None

    def stripped(self, escapes: int, size: int) -> None:
        """Hears how many escape sequences were stripped from the last chunk of `size` bytes."""

    def spans(self, chunk: bytes, end: int) -> Iterable[Span]:
        """Yield (line_start, line_end, pattern indices or None for 'try all') for the lines of
        chunk[:end] (all of it unless the finder is `zero_copy`), in line order, each line once."""
        raise NotImplementedError


def line_span(chunk: bytes, pos: int) -> tuple[int, int]:
    """(start, end) of the line that holds chunk[pos], without its newline."""
    start = chunk.rfind(b"\n", 0, pos) + 1
    end = chunk.find(b"\n", pos)
    return start, (len(chunk) if end < 0 else end)


def line_starts(chunk: bytes):
    """Where each line of the chunk starts."""
    start, n = 0, len(chunk)
    while start < n:
        yield start
        start = chunk.find(b"\n", start)
        start = n if start < 0 else start + 1
