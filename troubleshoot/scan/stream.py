"""One scan of a log stream: the candidate finder chosen, the stream scanned by forked ranges or
in this process, and the context patterns left for a second pass looked for.

The fastest finder proposes lines (hyperscan, else RE2, else the literal finder) and the
verifier decides them, so every engine gives the same result; a forked scan, a threaded one and
a one-thread one give the same result too.
"""

from __future__ import annotations

import io
import os
from typing import BinaryIO, Callable, Sequence

from troubleshoot.scan import engines, reader, threaded, verify
from troubleshoot.scan.candidates import Candidates
from troubleshoot.scan.hyperscan import HyperscanCandidates, SubsetCandidates
from troubleshoot.scan.re2 import Re2Candidates
from troubleshoot.scan.result import ScanPattern, ScanResult

# Compiling the hyperscan database costs ~0.5 s for the shipped rules; below this size (and
# without a cached database) RE2, which builds in ~20 ms, finishes first.
HYPERSCAN_MIN_BYTES = 16 << 20
# The smallest read buffer: a log smaller than a chunk is read in one read into a buffer its size.
SMALL_CHUNK = 64 << 10


def make_candidates(patterns: Sequence[ScanPattern], backend: str | None = None,
                    size: int | None = None, defer: tuple[tuple[int, ...], ...] = (), stable: int = 0) -> Candidates:
    """The fastest candidate finder for these patterns: `backend` forces one ("hyperscan",
    "re2", "re"); by default hyperscan when its database is cached or the input is large
    enough to repay compiling it, else RE2, else the literal prefilter. `defer`, `stable`: see
    hsdb.database."""
    re2_here = engines.re2_available()
    if backend == "re" or (not re2_here and backend != "hyperscan" and not engines.hyperscan_available()):
        return _literal(patterns)
    if backend in (None, "hyperscan") and engines.hyperscan_available() and patterns:
        from troubleshoot.scan import hsdb

        want = backend == "hyperscan" or size is None or size >= HYPERSCAN_MIN_BYTES
        sources = [p.inline_source for p in patterns]
        single = frozenset(i for i, p in enumerate(patterns) if p.role != "log")
        found = hsdb.database(sources, compile_if_missing=want, single=single, defer=defer, stable=stable)
        if found is not None:
            rest = None
            if found.rejected:
                # Patterns hyperscan cannot take (an empty match, a construct it lacks) are
                # found by the next engine and merged in.
                rest = SubsetCandidates(patterns, sorted(found.rejected))
            return HyperscanCandidates(patterns, found, rest, single, sources)
    if not re2_here:
        return _literal(patterns)
    try:
        return Re2Candidates(patterns)
    except Exception:
        # A pattern RE2 rejects (lint reports it) must not stop the scan.
        return _literal(patterns)


def _literal(patterns: Sequence[ScanPattern]) -> Candidates:
    from troubleshoot.scan.literal import LiteralCandidates  # no hyperscan, no RE2: a fallback

    return LiteralCandidates(patterns)


class Scanner:
    """One pattern set made ready once for every log of a command: the candidate finder (its
    hyperscan database looked up, or its RE2 program compiled) and the verifiers are built on
    the first scan and reused, their per-scan state reset, so a folder of a thousand rank logs
    pays for them once, not a thousand times.

    `size`: the bytes of all the logs to come (None: unknown, a pipe among them), which decides
    whether compiling a hyperscan database repays itself. `backend`, `defer`: as for
    `scan_stream`. `stable`: how many of the first patterns are the same from one run to the
    next whatever else is added (the shipped rules'): see hsdb.database."""

    def __init__(self, patterns: Sequence[ScanPattern], backend: str | None = None, size: int | None = None,
                 defer: bool = True, stable: int = 0):
        self.patterns = patterns
        self.stable = stable
        self.backend = backend or os.environ.get("TROUBLESHOOT_SCAN_ENGINE") or None
        self.size = size
        self.defer = defer
        self._finders: dict[bool, Candidates] = {}  # by whether context patterns wait for a second pass
        self._verifiers = verify.Verifiers(patterns, self.backend)

    def _finder(self, deferring: bool, size: int | None) -> Candidates:
        finder = self._finders.get(deferring)
        if finder is None:
            defer = _deferrable(self.patterns) if deferring else ()
            finder = make_candidates(self.patterns, self.backend, size if self.size is None else self.size, defer,
                                     self.stable)
            finder.verifiers = self._verifiers
            self._finders[deferring] = finder
        else:
            finder.reset()
        return finder

    def scan(self, stream: BinaryIO, chunk_size: int = reader.CHUNK_SIZE, cancel=None,
             progress: Callable[[int], None] | None = None, threads: int | None = None) -> ScanResult:
        """Scan a binary stream once: see `scan_stream`."""
        size = reader.stream_size(stream)
        span = reader.file_span(stream)
        finder = self._finder(self.defer and span is not None, size)
        if size is not None and size < chunk_size:
            # One read takes it all: a small log gets a buffer its size, not a MiB to zero.
            chunk_size = max(size + 1, SMALL_CHUNK)
        if threads is None:
            threads = threaded.scan_threads(size)
        found = None
        if threads and span is not None:  # helpers at all: a large input
            from troubleshoot.scan import forked

            if (size or 0) >= forked.FORK_MIN_BYTES and forked.forkable():
                found = forked.scan(span, self.patterns, finder, threads + 1, chunk_size, cancel, progress)
        if found is None:
            found = threaded.scan(stream, self.patterns, finder, threads, chunk_size, cancel, progress)
        if finder.deferred:
            _second_pass(found, span, self.patterns, finder.deferred, chunk_size, cancel)
        return found


def scan_stream(stream: BinaryIO, patterns: Sequence[ScanPattern], backend: str | None = None,
                chunk_size: int = reader.CHUNK_SIZE, cancel=None,
                progress: Callable[[int], None] | None = None, threads: int | None = None,
                defer: bool = True) -> ScanResult:
    """Scan a binary stream once; return per (group, role) bounded hit records. (Many logs with
    the same patterns: one `Scanner`, whose `scan` this is.)

    `cancel` (anything with `is_set()`, e.g. a threading.Event) is checked before each chunk:
    when set, ScanCancelled is raised. `progress` is called with the bytes read so far.
    $TROUBLESHOOT_SCAN_ENGINE forces an engine as `backend` does (the benchmark compares them).
    `threads`: helpers beside this thread (None: one per further core, up to
    threaded.MAX_THREADS in all, none on one core or for a small input; see threaded.py).
    A regular file of forked.FORK_MIN_BYTES or more is cut into one range per helper, each
    scanned by a forked process, where this process can fork safely (children.forkable: Linux,
    one thread, $TROUBLESHOOT_SCAN_FORK not 0); otherwise the helpers are threads that share
    hyperscan's pass over each chunk. Every helper has ended when this returns. `defer` (a file
    only): the context patterns hyperscan is slow at are looked for in a second pass, and only
    for rules whose own patterns matched: the hits of a rule that cannot fire may lack its
    context lines (`rules why`, which shows them, passes False)."""
    return Scanner(patterns, backend, defer=defer).scan(stream, chunk_size, cancel, progress, threads)


def scan_text(text: str, patterns: Sequence[ScanPattern], backend: str | None = None) -> ScanResult:
    return scan_stream(io.BytesIO(text.encode("utf-8", errors="surrogateescape")), patterns, backend)


def _deferrable(patterns: Sequence[ScanPattern]) -> tuple[tuple[int, ...], ...]:
    """The context patterns of each (group, role) whose group has patterns of its own: wanted
    only when those matched, so they can wait for a second pass (hsdb.database(defer=...))."""
    with_log = {p.group for p in patterns if p.role == "log"}
    units: dict[tuple[str, str], list[int]] = {}
    for i, p in enumerate(patterns):
        if p.role != "log" and p.group in with_log:
            units.setdefault((p.group, p.role), []).append(i)
    return tuple(tuple(u) for u in units.values())


def _second_pass(found: ScanResult, span: reader.FileSpan, patterns: Sequence[ScanPattern],
                 deferred: frozenset[int], chunk_size: int, cancel) -> None:
    """The deferred context patterns whose group's own patterns matched, looked for over the
    same bytes of the file: their hits are those a single pass would have made (a deferred unit
    is a whole (group, role), which nothing else fills)."""
    wanted = sorted(i for i in deferred if (patterns[i].group, "log") in found.hits)
    if not wanted:
        return
    again = scan_stream(reader.FileRange(span.fd, span.at, span.at + found.total_bytes), [patterns[i] for i in wanted],
                        chunk_size=chunk_size, cancel=cancel, threads=0)
    found.hits.update(again.hits)
