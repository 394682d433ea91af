"""The job's log scanned while it is being written, so that it is scanned during the run and not
all over again at the end.

The log is read through `sources.LogTail`, streamed: it reads as the saved file would be read
once the job has ended, so the scan sees the same bytes in the same chunks as
`troubleshoot diagnose --log` on the saved log and gives the same result; it only waits, where
the file would have ended, until the job writes more or exits.
"""

from __future__ import annotations

import io
import threading
from typing import TYPE_CHECKING

from troubleshoot.sources import LogSource, LogTail

if TYPE_CHECKING:
    from troubleshoot.context import CommandContext


class BackgroundScan:
    """The rules loaded, and the job's log scanned as it is written, in a thread that starts
    once the job has: the wrapper's own start-up and the scan overlap the job. At the end only
    what the job wrote last is left to scan. A log that is not a regular file (a FIFO, a
    device) is not read back: its bytes went to whoever reads it, and reading it after the job
    would wait for a writer that never comes (a FIFO) or never end (/dev/zero, /dev/full)."""

    def __init__(self, log_path: str, ctx: CommandContext):
        import os
        import stat

        self.source = LogSource(log_path, log_path)  # as the pipeline reads it
        self._ctx = ctx
        # Each scan has its own hyperscan scratch space (engine.hsdb.scratch), so the live
        # diagnoses may scan new lines while this scan runs.
        self.follower = LogTail(log_path, stream=True) if stat.S_ISREG(os.stat(log_path).st_mode) else None
        self.ready = threading.Event()  # set once the rules are loaded (or failed to)
        self.ruleset = None
        self._scanned = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._work, name="troubleshoot-scan", daemon=True)

    def start(self) -> "BackgroundScan":
        self._thread.start()
        return self

    @property
    def started(self) -> bool:
        return self._thread.ident is not None

    def appended(self, n: int) -> None:
        if self.follower is not None:
            self.follower.appended(n)

    def _work(self) -> None:
        try:
            from troubleshoot import pipeline

            self.ruleset = self._ctx.ruleset()
            self.ready.set()
            # Every rule once on no input: what the diagnosis at the end parses and imports on
            # first use (fact paths, its conditions) is then ready.
            from troubleshoot.sources import Sources

            pipeline.diagnose_sources(Sources(), self.ruleset)
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
            if not self.started:
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
