"""Threads that run hyperscan scans beside the scanner's own thread.

hyperscan's `Database.scan` releases the GIL while it scans (it takes it back only to report a
match), so the raw pass over a chunk of a log is split between the scanner's thread and these
workers, one part each, all scanning at once; the scanner's thread then verifies the chunk.
Each thread has its own scratch space (one scratch per concurrent scan, as hyperscan requires).
Jobs only read the bytes they are given and return match reports; everything that depends on
earlier results (retired patterns, hit caps, line numbers) stays with the caller, in chunk
order, so a scan with threads finds exactly what one without them finds.
"""

from __future__ import annotations

import os
import queue
import threading

# Threads (or forked scanners) in one scan, the scanner's own included. A cap, so that on a
# many-core node the processes, their buffers and the parent's serial replay stay few (measured
# on two cores only).
MAX_THREADS = 4


def scan_threads(size: int | None, min_bytes: int) -> int:
    """Helpers worth starting for an input of `size` bytes (None: unknown, a pipe): one per core
    besides the scanner's own, MAX_THREADS in all at most; none on a single core or for an
    input under `min_bytes`. A helper is a forked scanner of one range of a file where the
    scanner can fork (scanproc), else a worker thread of this pool.
    $TROUBLESHOOT_SCAN_THREADS, when set, is the number (0: the scan stays in one thread)."""
    env = os.environ.get("TROUBLESHOOT_SCAN_THREADS", "").strip()
    if env.isdigit():
        return min(int(env), MAX_THREADS - 1)
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 1
    if cores < 2 or (size is not None and size < min_bytes):
        return 0
    return min(cores, MAX_THREADS) - 1


def reports(db, data, offset: int = 0, scratch=None, dead: "set[int] | frozenset[int]" = frozenset()) -> list[int]:
    """Match reports of `db` in `data`, each encoded as (end + offset) << 20 | expression id (one
    int: cheap to collect and to sort; ids stay below 2**20). Reports of the expressions in
    `dead` (nothing is looking for them any more) are dropped as they come."""
    out: list[int] = []
    add = out.append

    if dead:
        def on_match(index, _from, to, _flags, _context):
            if index not in dead:
                add((to + offset) << 20 | index)
    else:
        def on_match(index, _from, to, _flags, _context):
            add((to + offset) << 20 | index)

    if scratch is None:
        db.scan(data, match_event_handler=on_match)
    else:
        db.scan(data, match_event_handler=on_match, scratch=scratch)
    return out


class Job:
    """One scan handed to a worker; `result()` waits for its reports."""

    __slots__ = ("data", "offset", "dead", "_reports", "_error", "_done")

    def __init__(self, data, offset: int, dead=frozenset()):
        self.data = data  # a memoryview of the caller's buffer: released once the result is read
        self.offset = offset
        self.dead = dead  # read while the caller waits for the pass: it changes only between passes
        self._reports: list[int] = []
        self._error: BaseException | None = None
        self._done = threading.Lock()
        self._done.acquire()  # released by the worker when the scan is over

    def run(self, db, scratch) -> None:
        try:
            self._reports = reports(db, self.data, self.offset, scratch, self.dead)
        except BaseException as exc:  # handed to the caller's thread by result()
            self._error = exc
        finally:
            self._done.release()

    def result(self) -> list[int]:
        with self._done:
            pass
        if isinstance(self.data, memoryview):
            self.data.release()  # the buffer may be resized once no view of it is left
        if self._error is not None:
            raise self._error
        return self._reports


class Pool:
    """`threads` workers scanning with one database. Use as a context manager: leaving the block
    (normally, on ScanCancelled or on any error) stops and joins every thread."""

    def __init__(self, db, threads: int, scratch_of):
        self.db = db
        self.size = threads
        self._tasks: queue.SimpleQueue = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        try:
            for _ in range(threads):
                t = threading.Thread(target=self._work, args=(scratch_of(db),), name="troubleshoot-scan", daemon=True)
                t.start()
                self._threads.append(t)
        except BaseException:
            self.close()
            raise

    def submit(self, data, offset: int = 0, dead=frozenset()) -> Job:
        job = Job(data, offset, dead)
        self._tasks.put(job)
        return job

    def _work(self, scratch) -> None:
        while True:
            job = self._tasks.get()
            if job is None:
                return
            job.run(self.db, scratch)

    def close(self) -> None:
        """Jobs already queued still run (each is one part of one chunk); then every thread ends."""
        for _ in self._threads:
            self._tasks.put(None)
        for t in self._threads:
            t.join()
        self._threads = []

    def __enter__(self) -> "Pool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
