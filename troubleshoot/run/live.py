"""A job while it runs under `troubleshoot run`: its log opened and scanned as it is written, the
watcher sampling it, and the problems both show said as they appear (each once), before the
full diagnosis at the end."""

from __future__ import annotations

from typing import TYPE_CHECKING

from troubleshoot.errors import TroubleshootError
from troubleshoot.run.verdict import Verdict, job_facts

if TYPE_CHECKING:
    from pathlib import Path
    from typing import BinaryIO, Callable, Sequence

    from troubleshoot.context import CommandContext
    from troubleshoot.model import Diagnosis
    from troubleshoot.run.follow import BackgroundScan
    from troubleshoot.run.watch import Watcher

# The live diagnoses are looked at once every this many of the watcher's samples.
LIVE_EVERY = 5


class LiveRun:
    """The job's log, the scan that reads it back and the watcher, from the job's start to its
    end. `say` tells one line of ours; `interval`: seconds between the watcher's samples (None:
    no watcher); `quiet`: no live warnings."""

    def __init__(self, log_to: str | None, argv: Sequence[str], ctx: CommandContext, say: Callable[[str], None],
                 interval: float | None, quiet: bool):
        self.log, self.log_path, self.scan = _open_log(log_to, argv, ctx)
        self.say, self.interval, self.quiet = say, interval, quiet
        self.watcher: Watcher | None = None
        # Each warning said, by rule id: written by the watcher's thread (`live`), read once it has
        # stopped (`finish`), to name what the final diagnosis no longer holds.
        self.said: dict[str, Diagnosis] = {}
        self.verdict: Verdict | None = None  # once the scan's rules are loaded
        self.tail = None  # the log's new lines (sources.LogTail), where the log is a regular file
        self.logging = True  # False once the log could not be written: the scan waits for no more

    def on_start(self, pid: int) -> None:
        self.scan.start()
        if self.interval is not None:
            from troubleshoot.run.watch import Watcher  # the job has started: its import delays nothing

            self.watcher = Watcher(pid, self.interval, on_sample=self.live).start()

    def on_output(self, data: bytes) -> None:
        if self.logging:
            self.scan.appended(len(data))
        if self.watcher:
            self.watcher.feed(data)

    def on_log_error(self, exc: OSError) -> None:
        self.logging = False
        self.say(f"cannot write the log {self.log_path}: {exc.strerror or exc}; logging stopped, the job goes on "
                 f"and the diagnosis covers what was logged")

    def live(self, w: Watcher) -> None:
        """After a sample: what the samples and the log's new lines show, each problem said once,
        judged as the final diagnosis judges a job that has not failed (run.verdict)."""
        if self.quiet or len(w.samples) % LIVE_EVERY:
            return
        from troubleshoot.report.text import one_line

        verdict = self.judge()
        if verdict is None:
            return
        if self.tail is None and self.scan.follower is not None:  # a FIFO or a device is not read: see BackgroundScan
            from troubleshoot.sources import LogTail

            self.tail = LogTail(self.log_path)
        for d in verdict.so_far(self.tail, job_facts(w.facts(), None)):
            if d.rule.id not in self.said:
                self.said[d.rule.id] = d
                self.say(one_line(d, still_running=True))

    def judge(self) -> Verdict | None:
        """The one judgement of this job, live and at the end; None when the rules did not load."""
        if self.verdict is None:
            self.scan.ready.wait()
            if self.scan.ruleset is None:
                return None
            self.verdict = Verdict(self.scan.ruleset)
        return self.verdict

    def finish(self) -> None:
        """The job has ended (or never started): stop the watcher, close the log, and let the
        scan read the log's end."""
        if self.watcher:
            self.watcher.stop()
        try:
            self.log.close()
        except OSError as exc:  # a network file system may report a failed write only now
            if self.logging:
                self.on_log_error(exc)
        self.scan.stop()
        if self.scan.started:
            self.scan.ready.wait()  # the thread has loaded the plugins (and keeps scanning the log's end)


def _open_log(log_to: str | None, argv: Sequence[str], ctx: CommandContext) -> tuple[BinaryIO, Path, BackgroundScan]:
    """(the log opened for writing, its path, the scan that reads it as the job writes it)."""
    from troubleshoot.run import logfile
    from troubleshoot.run.follow import BackgroundScan

    log, log_path = logfile.open_log(log_to, argv)
    try:
        scan = BackgroundScan(str(log_path), ctx)
    except OSError as exc:
        log.close()
        raise TroubleshootError(f"cannot read back the log {log_path}: {exc.strerror or exc}") from None
    return log, log_path, scan
