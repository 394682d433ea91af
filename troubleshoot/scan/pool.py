"""Worker threads that run hyperscan's pass over parts of a chunk beside the scanner's thread.

hyperscan's `Database.scan` releases the GIL while it scans (it takes it back only to report a
match), so the raw pass over a chunk of a log is split between the scanner's thread and these
workers, one part each, all scanning at once; the scanner's thread then verifies the chunk.
Each thread has its own scratch space (one scratch per concurrent scan, as hyperscan requires).
Jobs only read the bytes they are given and return match reports; everything that depends on
earlier results (retired patterns, hit caps, line numbers) stays with the caller, in chunk
order, so a scan with threads finds exactly what one without them finds. Loaded only when a
scan starts workers.
"""

from __future__ import annotations

import queue
import threading
from typing import Callable

# scan(db, data, offset, scratch, dead) -> packed match reports (hyperscan.reports)
DatabaseScan = Callable[..., list[int]]


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

    def run(self, db, scratch, scan_db: DatabaseScan) -> None:
        try:
            self._reports = scan_db(db, self.data, self.offset, scratch, self.dead)
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
    """`threads` workers scanning with one database, each with its own `scratch_of(db)`, by
    `scan_db` (hyperscan.reports). Use as a context manager: leaving the block (normally, on
    ScanCancelled or on any error) stops and joins every thread."""

    def __init__(self, db, threads: int, scratch_of, scan_db: DatabaseScan):
        self.db = db
        self.size = threads
        self._scan_db = scan_db
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
            job.run(self.db, scratch, self._scan_db)

    def close(self) -> None:
        """Jobs already queued still run (each is one part of one chunk); then every thread ends."""
        for _ in self._threads:
            self._tasks.put(None)
        for t in self._threads:
            t.join()
        self._threads = []

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
