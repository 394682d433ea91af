"""The scan in this process, with hyperscan's pass over each chunk shared by worker threads
(pool.py) where the input is large enough and there is more than one core.

This is how a pipe, the TUI and `troubleshoot run` are scanned, where forking is not safe
(forked.py), and how a small log is. The result is the one-thread result: the workers only
find match reports, and everything that depends on earlier lines stays with this thread.
"""

from __future__ import annotations

import os
from typing import Callable, Sequence

from troubleshoot.scan import reader, tally, verify
from troubleshoot.scan.candidates import Candidates
from troubleshoot.scan.result import GroupHits, ScanPattern, ScanResult

# Threads (or forked scanners) in one scan, the scanner's own included. A cap, so that on a
# many-core node the processes, their buffers and the parent's serial replay stay few (measured
# on two cores only).
MAX_THREADS = 4
# Below this many bytes a scan stays in one thread: starting workers would cost more than it saves.
PARALLEL_MIN_BYTES = 4 << 20


def scan_threads(size: int | None, min_bytes: int | None = None) -> int:
    """Helpers worth starting for an input of `size` bytes (None: unknown, a pipe): one per core
    besides the scanner's own, MAX_THREADS in all at most; none on a single core or for an
    input under `min_bytes` (PARALLEL_MIN_BYTES). A helper is a forked scanner of one range of
    a file where the scanner can fork (forked.py), else a worker thread (pool.py).
    $TROUBLESHOOT_SCAN_THREADS, when set, is the number (0: the scan stays in one thread)."""
    env = os.environ.get("TROUBLESHOOT_SCAN_THREADS", "").strip()
    if env.isdigit():
        return min(int(env), MAX_THREADS - 1)
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 1
    if min_bytes is None:
        min_bytes = PARALLEL_MIN_BYTES
    if cores < 2 or (size is not None and size < min_bytes):
        return 0
    return min(cores, MAX_THREADS) - 1


def scan(stream, patterns: Sequence[ScanPattern], finder: Candidates, threads: int, chunk_size: int, cancel,
         progress: Callable[[int], None] | None) -> ScanResult:
    """The whole stream scanned here, hyperscan's pass shared with `threads` workers (none: one
    thread). Every worker has ended when this returns or raises."""
    found: dict[tuple[str, str], GroupHits] = {}
    pool = finder.pool(threads) if threads else None
    try:
        chunks = reader.Chunks(stream, chunk_size, progress)
        line = verify.scan_chunks(chunks, finder, tally.checker(patterns, found, finder), 1, cancel, pool)
    finally:
        if pool is not None:
            pool.close()
    return ScanResult(total_lines=line - 1, total_bytes=chunks.total, hits=found, backend=finder.name)
