"""The job's log read while it is being written, so that it is scanned during the run and not
all over again at the end.

A `LogFollower` reads as the saved file would be read once the job has ended: `read(n)` and
`readinto(b)` return n bytes (len(b)); fewer only at the end of the finished file. A scan of it
therefore sees the same bytes in the same chunks as `troubleshoot diagnose --log` on the saved
log, and gives the same result; it only waits, where the file would have ended, until the job
writes more or exits.

The writer (the wrapper's output pump) writes the log unbuffered and says how much it appended;
it wakes the reader only once the bytes the reader waits for are there, so a reader that is
behind costs the writer nothing and a job that prints nothing wakes nobody.
"""

from __future__ import annotations

import io
import threading
from typing import Callable


class LogFollower:
    def __init__(self, path: str):
        self._f = open(path, "rb", buffering=0)
        self._cond = threading.Condition()
        self._appended = 0  # bytes the writer has put in the file
        self._want = 0  # the reader waits until the file holds this many bytes
        self._pos = 0  # bytes read
        self._ended = False

    # ------------------------------------------------------------ the writer's side

    def appended(self, n: int) -> None:
        """The writer's n more bytes are in the file; called from its thread, after the write."""
        self._appended += n
        # Unlocked for the common case (nobody waits, or not for these bytes yet): a reader that
        # sets `_want` after this test sees the new `_appended` in its own, under the lock.
        if self._appended >= self._want > self._appended - n:
            with self._cond:
                self._cond.notify_all()

    def end(self) -> None:
        """Nothing more will be written, and everything written is in the file."""
        with self._cond:
            self._ended = True
            self._cond.notify_all()

    # ------------------------------------------------------------ the reader's side

    def readinto(self, buf) -> int:
        with memoryview(buf) as outer, outer.cast("B") as view:
            got = 0
            while got < len(view):
                ended = self._ended  # read before the file: once set, the file is complete
                n = self._f.readinto(view[got:]) or 0
                got += n
                self._pos += n
                if n:
                    continue
                if ended:
                    break
                with self._cond:
                    self._want = self._pos + len(view) - got
                    self._cond.wait_for(lambda: self._ended or self._appended >= self._want)
            return got

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            parts = []
            while True:
                block = self.read(1 << 20)
                if not block:
                    return b"".join(parts)
                parts.append(block)
        buf = bytearray(n)
        got = self.readinto(buf)
        del buf[got:]
        return bytes(buf)

    def close(self) -> None:
        self._f.close()


class BackgroundScan:
    """The rules loaded, and the job's log scanned as it is written, in a thread that starts
    once the job has: the wrapper's own start-up and the scan overlap the job. At the end only
    what the job wrote last is left to scan. A log that is not a regular file (a FIFO, a
    device) is not read back: its bytes went to whoever reads it, and reading it after the job
    would wait for a writer that never comes (a FIFO) or never end (/dev/zero, /dev/full)."""

    def __init__(self, log_path: str, load_rules: Callable[[], object]):
        import os
        import stat

        self._path = log_path
        self._source = None
        self._load = load_rules
        # Each scan has its own hyperscan scratch space (engine.hsdb.scratch), so the live
        # diagnoses may scan new lines while this scan runs.
        self.follower = LogFollower(log_path) if stat.S_ISREG(os.stat(log_path).st_mode) else None
        self.ready = threading.Event()  # set once the rules are loaded (or failed to)
        self.ruleset = None
        self._scanned = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._work, name="troubleshoot-scan", daemon=True)

    @property
    def source(self):
        """The log as a pipeline source; made in the thread (sources' import is not something
        the job should wait for)."""
        if self._source is None:
            from troubleshoot.sources import LogSource

            self._source = LogSource(self._path, self._path)
        return self._source

    def start(self) -> "BackgroundScan":
        self._thread.start()
        return self

    def appended(self, n: int) -> None:
        if self.follower is not None:
            self.follower.appended(n)

    def _work(self) -> None:
        try:
            from troubleshoot import pipeline

            self.source  # made now, in this thread (see the property)
            self.ruleset = self._load()
            self.ready.set()
            # Every rule once on no input: what the diagnosis at the end parses and imports on
            # first use (fact paths, its conditions) is then ready.
            from troubleshoot.engine.diagnose import diagnose

            diagnose(self.ruleset.rules, None, None)
            if self.follower is not None:
                self._scanned = pipeline.read_sources([self.source], self.ruleset, opener=lambda _: self.follower)
        except BaseException as exc:  # raised again in the caller's thread, by result()
            self._error = exc
        finally:
            self.ready.set()
            if self.follower is not None:
                self.follower.close()

    def stop(self) -> None:
        """The job has ended (or never started) and the log is flushed."""
        if self.follower is not None:
            self.follower.end()
            if not self._thread.is_alive() and self._thread.ident is None:  # never started
                self.follower.close()

    def result(self):
        """(ruleset, pipeline.Scanned) once the job has ended; the caller closes the Scanned."""
        from troubleshoot import pipeline

        self.stop()
        self._thread.join()
        if self._error is not None:
            raise self._error
        if self._scanned is None:
            self._scanned = pipeline.read_sources([self.source], self.ruleset, opener=lambda _: io.BytesIO())
        return self.ruleset, self._scanned
