"""The scan of a large log file cut into ranges of whole lines, each scanned by a forked process
beside this one, whose matches this process applies in log order.

Threads share one GIL: reading, counting newlines, gathering coloured lines and verifying
candidate lines hold it, so with threads only hyperscan's own pass runs in parallel. A forked
child has its own interpreter lock and a copy of everything the scanner built (the patterns, the
compiled database, the verifiers), so it runs the whole per-line work of its range at once with
the parent's. It sends back what depends on its lines alone (the matches of each matching line,
its line count); the parent applies them in log order, so every result that depends on earlier
lines (retired patterns, hit caps, first and last lines, series) comes out as one process would
have made it. A child only ever reads the file by offset (pread: the file position it shares
with the parent is never moved) and never writes to a terminal.

The process machinery (children.py: pickle, select, signal) loads only when a scan forks: 5 ms
of every start on a small log or a paste.
"""

from __future__ import annotations

import functools
import os
from typing import Callable, Sequence

from troubleshoot.scan import reader, tally, verify
from troubleshoot.scan.candidates import Candidates
from troubleshoot.scan.result import GroupHits, ScanCancelled, ScanPattern, ScanResult

# Below this many bytes a scan does not fork: a child and its report cost a few milliseconds.
FORK_MIN_BYTES = 8 << 20
# A child stops (and the parent scans the rest of its range) once its report reaches this size:
# the parent holds the reports of the ranges after its own until it gets to them (pickled; each
# batch is unpickled only to be applied).
REPORT_BYTES = 8 << 20


def forkable() -> bool:
    """Whether this process can fork its scanners safely (children.forkable)."""
    from troubleshoot.scan import children

    return children.forkable()


def cuts(fd: int, start: int, parts: int, least: int) -> list[int] | None:
    """[start, ..., size]: the file from `start` cut into `parts` ranges of whole lines (each cut
    just after a newline); None when a range would be under `least` bytes or a cut finds no
    newline within a chunk's length."""
    size = os.fstat(fd).st_size
    if size - start < parts * least:
        return None
    out = [start]
    for k in range(1, parts):
        at = start + (size - start) * k // parts
        nl = os.pread(fd, reader.CHUNK_SIZE, at).find(b"\n")
        if nl < 0 or not out[-1] < at + nl + 1 < size:
            return None
        out.append(at + nl + 1)
    out.append(size)
    return out


def scan(span: reader.FileSpan, patterns: Sequence[ScanPattern], finder: Candidates, parts: int, chunk_size: int,
         cancel, progress: Callable[[int], None] | None) -> ScanResult | None:
    """The file cut into `parts` ranges: the first scanned here, each other by a forked child,
    whose matches are then applied here in log order; the rest of the file (a last line without
    its newline, lines written meanwhile) and any range a child left are scanned here. None,
    with nothing read, when the file is too small to cut or a fork fails."""
    from troubleshoot.scan import children as procs

    bounds = cuts(span.fd, span.at, parts, chunk_size)
    if bounds is None:
        return None
    counters = procs.Counters(len(bounds) - 2, progress, bounds[-1] - bounds[0])
    here = _Here(span.fd, patterns, finder, chunk_size, cancel, counters)
    children: list[procs.Child] = []
    try:
        for k in range(1, len(bounds) - 1):
            work = functools.partial(child_scan, fd=span.fd, start=bounds[k], stop=bounds[k + 1], patterns=patterns,
                                     finder=finder, chunk_size=chunk_size, progress=counters.child(k - 1))
            try:
                procs.start(work, children)
            except OSError:  # no more processes or memory for one: the scan runs here (threads)
                return None

        def between() -> None:
            for c in children:
                c.drain()

        line, _ = here.read(bounds[0], bounds[1], 1, between)
        at = bounds[1]
        for k, child in enumerate(children, 1):
            line, at = here.apply(child, bounds[k], line)
            if k < len(children) and at < bounds[k + 1]:  # the child failed or stopped short
                line, _ = here.read(at, bounds[k + 1], line)
                at = bounds[k + 1]
        line, read = here.read(at, None, line)
        end = at + read
        counters.report(end - span.at)
    finally:
        for c in children:
            c.kill()
    span.seek(end)
    return ScanResult(total_lines=line - 1, total_bytes=end - span.at, hits=here.found, backend=finder.name)


class _Here:
    """This process's part of a forked scan: the ranges it reads itself, and the children's
    matches applied in log order, all counted into `found`."""

    # Not a dataclass: making one costs 0.7 ms at import, and every diagnosis imports this module.
    def __init__(self, fd: int, patterns: Sequence[ScanPattern], finder: Candidates, chunk_size: int, cancel,
                 counters):
        self.fd, self.patterns, self.finder, self.chunk_size = fd, patterns, finder, chunk_size
        self.cancel, self.counters = cancel, counters  # cancel: anything with is_set(); children.Counters
        self.found: dict[tuple[str, str], GroupHits] = {}
        self.check = tally.checker(patterns, self.found, finder)

    def read(self, start: int, stop: int | None, line: int, between=None) -> tuple[int, int]:
        """File bytes `start` to `stop` (None: the end) scanned here, their first line numbered
        `line`: the next line's number and the bytes read."""
        chunks = reader.Chunks(reader.FileRange(self.fd, start, stop), self.chunk_size, self.counters.own())
        return verify.scan_chunks(chunks, self.finder, self.check, line, self.cancel, None, between), chunks.total

    def apply(self, child, start: int, line: int) -> tuple[int, int]:
        """The matches of the child that scanned from `start`, once it has ended, their lines
        numbered from `line`: the next line's number and the offset where the child stopped
        (`start` when it failed: its range is this process's to scan)."""
        from troubleshoot.scan import children as procs

        cancel, counters = self.cancel, self.counters

        def waiting() -> bool:
            counters.report()
            return cancel is not None and cancel.is_set()

        got = child.messages(waiting)
        if cancel is not None and cancel.is_set():
            raise ScanCancelled()
        try:
            end_of = procs.load(got[-1]) if got else None
        except Exception:  # pickle's errors vary; a damaged report is a child that failed
            end_of = None
        if not isinstance(end_of, tuple):
            return line, start
        _, lines, done = end_of
        for batch in got[:-1]:
            replay(procs.load(batch), line, self.patterns, self.found, self.finder)
        return line + lines, start + done


def child_scan(send, fd: int, start: int, stop: int, patterns: Sequence[ScanPattern], finder: Candidates,
               chunk_size: int, progress) -> None:  # pragma: no cover - runs in a forked child
    """A child's range: each matching line's matches sent in batches (one per chunk), then
    ("end", lines, bytes done). It retires what it has seen as a one-process scan of its range
    would (`tally.retire_seen`); the parent retires at least as much by the time it gets to these
    lines, so what the child sends is all the parent can need. An unfinished last line (a
    file without its final newline) is left to the parent."""
    counts: dict = {}
    batch: list = []

    def check(raw: bytes, line: int, idxs) -> None:
        matches = verify.verify_line(raw, idxs, patterns, finder)
        if matches:
            batch.append((line, matches))
            tally.retire_seen(matches, patterns, counts, finder)

    sent = 0

    def flush() -> bool:  # a batch per chunk; true once the report is as large as it may grow
        nonlocal sent
        if batch:
            sent += send(batch)
            batch.clear()
        return sent >= REPORT_BYTES

    chunks = reader.Chunks(reader.FileRange(fd, start, stop), chunk_size, progress)
    line = verify.scan_chunks(chunks, finder, check, 0, between=flush, last_line=False)
    send(("end", line, chunks.done))


def replay(batch: list, base: int, patterns: Sequence[ScanPattern], found: dict, finder: Candidates) -> None:
    """A child's matches applied here: a pattern retired by the time its line comes (by an earlier
    range) is skipped, as a one-process scan would not have looked for it."""
    retired = finder.retired
    for line, matches in batch:
        if retired:
            matches = [m for m in matches if m[0] not in retired]
            if not matches:
                continue
        tally.apply(base + line, matches, patterns, found, finder)
