"""The verifier: each candidate line a finder proposes is decoded, cleaned and matched with the
pattern's own regex, which decides the match and extracts captures.

Every chunk's candidate lines are verified in line order, each once, and what a line's matches
are depends on that line alone (the patterns retired by the lines before only narrow what is
looked for), so a forked scanner can work a line out and its parent apply it. A pattern is
verified by RE2 (linear time) where RE2 is installed, else by Python's `re` in bounded windows
(rewindow); a pattern `re` may take exponential time on is left to RE2 whatever the engine.
"""

from __future__ import annotations

from typing import Callable, Sequence

from troubleshoot.scan import ansi, re2
from troubleshoot.scan.candidates import Candidates
from troubleshoot.scan.result import ScanCancelled, ScanPattern

MAX_EVIDENCE_CHARS = 400

Find = Callable[[str], tuple[int, int, dict] | None]  # segment -> (start, end, captures) or None


class Verifiers(dict):
    """Per-pattern verifiers, compiled on first use: a scan that never sees a candidate
    line for a pattern never compiles it."""

    def __init__(self, patterns: Sequence[ScanPattern], backend: str | None):
        super().__init__()
        self.patterns = patterns
        self.backend = backend

    def __missing__(self, i: int) -> Find:
        v = self[i] = verifier(self.patterns[i], self.backend)
        return v


def verifier(p: ScanPattern, backend: str | None) -> Find:
    """The function that decides a candidate segment: (start, end, captures) or None. RE2
    (linear time, whatever the pattern) when installed, else the pattern's own `re` in bounded
    windows (rewindow). A pattern `re` may take exponential time on is left to RE2 whichever
    engine was asked for; without RE2 it never matches (the loader refuses it there)."""
    found = re2.verifier(p) if backend != "re" else None
    if found is not None:
        return found
    from troubleshoot.scan import backtrack  # a pattern RE2 cannot verify, or no RE2 asked for

    if backtrack.superlinear(p.compiled) is not None:
        return re2.verifier(p) or _never
    from troubleshoot.scan import rewindow  # without RE2 only

    return rewindow.finder(p.compiled)


def _never(seg: str) -> None:
    return None


def scan_chunks(chunks, finder: Candidates, check, line: int, cancel=None, pool=None,
                between: Callable[[], object] | None = None, last_line: bool = True) -> int:
    """Verify every chunk of `chunks` (reader.Chunks); return the number of the line after the
    last one. `check(raw, line, idxs)` is handed each candidate line; `pool` runs hyperscan's
    pass beside this thread; `between()` is called after each chunk and stops the scan by
    returning true; `last_line` false leaves an unfinished last line (no newline after it) unread."""
    while True:
        if cancel is not None and cancel.is_set():
            raise ScanCancelled()
        got = chunks.next()
        if got is None or (got[2] and not last_line):
            return line
        chunk, end = ansi.prepared(got[0], got[1], finder)
        prefilter = finder.start(chunk, end, pool) if pool is not None else None
        line = verify_chunk(chunk, end, line, finder, check, prefilter) + got[2]
        if between is not None and between():
            return line


def verify_chunk(chunk, end: int, line_base: int, finder: Candidates, check, prefilter=None) -> int:
    """Hand each candidate line of chunk[:end] (whole lines) to `check(raw, line, idxs)`; return
    the line number after them. Newlines are counted once: up to each candidate, then the rest."""
    counted_to = 0
    line = line_base
    count = chunk.count
    spans = finder.spans(chunk, end) if prefilter is None else finder.spans(chunk, end, prefilter)
    for start, stop, idxs in spans:  # in line order, each line once (every finder's promise)
        line += count(b"\n", counted_to, start)
        counted_to = start
        check(chunk[start:stop], line, idxs)
    return line + count(b"\n", counted_to, end)


def verify_line(raw: bytes, idxs: Sequence[int] | None, patterns: Sequence[ScanPattern],
                finder: Candidates) -> list[tuple]:
    """What each candidate pattern finds on one line, in pattern order: (pattern index, evidence
    text, start, end, captures), for the first segment it matches whose `where` holds. Depends on
    the line alone, so a forked scanner can work it out and the parent apply it."""
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    segments = ansi.clean_line(raw)
    verifiers = finder.verifiers
    out = []
    for i in (list(finder.active) if idxs is None else idxs):
        where = patterns[i].where
        find = verifiers[i]
        for seg in segments:
            found = find(seg)
            if found is None:
                continue
            start, end, captures = found
            if where is not None and not where(captures):
                continue
            out.append((i, *evidence(seg, start, end), captures))
            break
    return out


def evidence(seg: str, start: int, end: int) -> tuple[str, int, int]:
    """The evidence kept of a matching segment: (text, start, end), at most MAX_EVIDENCE_CHARS."""
    if len(seg) <= MAX_EVIDENCE_CHARS and not seg[-1:].isspace() and seg[:1] != "\n":
        return seg, start, end  # most segments: nothing to cut or strip
    text = seg.strip("\n")
    if len(text) > MAX_EVIDENCE_CHARS:
        lo = max(0, min(start - 100, len(text) - MAX_EVIDENCE_CHARS))
        text = text[lo : lo + MAX_EVIDENCE_CHARS]
        start, end = start - lo, min(end - lo, MAX_EVIDENCE_CHARS)
    return text.rstrip(), start, end
