"""`troubleshoot run -- CMD...`: run a job unchanged, watch it, diagnose it when it fails.

Our own messages go to stderr only, after the job's; stdout carries the job's bytes alone. A
closed or vanished stdout/stderr (`>&-`, `| head`) loses our messages, never the job's exit code.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from troubleshoot.errors import TroubleshootError
from troubleshoot.textsafe import terminal_safe
from troubleshoot.console import PROG

if TYPE_CHECKING:
    from argparse import Namespace
    from typing import Iterator

    from troubleshoot.context import CommandContext
    from troubleshoot.run.live import LiveRun
    from troubleshoot.run.record import JobCommand
    from troubleshoot.run.watch import Watcher
    from troubleshoot.run.wrapper import RunResult



def add_parser(sub, add_rules_arg) -> None:
    r = sub.add_parser("run", help="run a training job, watch it, and diagnose it if it fails",
                       description="Run CMD unchanged (same output, same exit code), keep its log, watch the "
                                   "machine while it runs, and diagnose the failure when it exits non-zero.")
    r.add_argument("--log-to", metavar="PATH", help="write the job's output here (default: the state directory); "
                   "a folder (DIR/): one file per rank in it, named by node and rank. Always a new file, "
                   "readable by you alone: a name already taken (an earlier run's log) is kept and the next "
                   "free one is used (train-2.log); the last line says which. A FIFO or device is written "
                   "as it is")
    r.add_argument("--format", choices=("text", "json"), default="text", help="json: write the diagnosis to --report")
    r.add_argument("--report", metavar="PATH", help="where --format json writes the diagnosis (default: LOG.json)")
    r.add_argument("--no-probe", action="store_true", help="do not probe the machine when the job fails")
    r.add_argument("--no-watch", action="store_true", help="do not sample the job while it runs")
    r.add_argument("--interval", type=float, default=1.0, metavar="S", help="seconds between samples (default 1)")
    r.add_argument("--quiet", action="store_true", help="no live warnings; only the final diagnosis")
    r.add_argument("--tui", action="store_true", help="when the job fails, open the TUI on its log and snapshot")
    r.add_argument("--grace", type=float, default=None, metavar="S",
                   help="seconds a process left in the job's group (or the job, after SIGTERM) gets between "
                        "SIGTERM and SIGKILL (default 10)")
    add_rules_arg(r)
    # REMAINDER: the first word that is none of run's options starts the job, and every word from
    # there on is the job's, options included (`run python -V`, `run --quiet python train.py --quiet`).
    r.add_argument("cmd", nargs=argparse.REMAINDER, metavar="CMD",
                   help="the job and its arguments: from the first word that is not an option of run, every "
                        "word is the job's, options included; put `--` before the job when its first word "
                        "starts with '-'")
    r.usage = "%(prog)s [run options] [--] CMD [ARG ...]"
    # The subparser is built by argparse from the command line's parser class, which takes no
    # hook for words left over: its class gets _JobParser's check below its own.
    r.__class__ = _job_parser(type(r))


class _JobParser(argparse.ArgumentParser):
    """Placed right above argparse's own parser, under the command line's parser class: it sees
    the options that parser left over before any class above says `unrecognized arguments`,
    which cannot tell that they may have been meant for the job."""

    def parse_known_args(self, args=None, namespace=None):
        ns, extras = super().parse_known_args(args, namespace)
        if extras:
            # Before the job's first word (REMAINDER takes every word from there on): a mistyped
            # option of run, or one of the job's own.
            self.error(f"{extras[0]} is not an option of run{self._close_to(extras[0])}; if it is the job's, "
                       f"put the job after `--`: {PROG} run [run options] -- CMD [ARG ...]")
        return ns, extras

    def _close_to(self, word: str) -> str:
        import difflib  # only for a mistyped word: no start pays for it

        known = sorted({s for a in self._actions for s in a.option_strings if s.startswith("--")})
        close = difflib.get_close_matches(word.partition("=")[0], known, n=1, cutoff=0.6)
        return f" (did you mean {close[0]}?)" if close else ""


def _job_parser(base: type) -> type:
    """`base` with _JobParser between it and argparse's parser (in the method order)."""
    if issubclass(base, _JobParser):
        return base
    if base is argparse.ArgumentParser:
        return _JobParser
    return type("RunParser", (base, _JobParser), {})


def _err(text: str) -> None:
    """To stderr, or nowhere once its reader is gone: the job's exit code must still come out."""
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, ValueError):
        sys.stderr = open(os.devnull, "w")  # and nothing left buffered to fail again at exit


def _say(msg: str) -> None:
    """One line of the wrapper's own: it may name the job's command, a path or a process."""
    _err(f"{PROG}: {terminal_safe(msg)}\n")


def _report_leftovers(result) -> None:
    if result.leftovers:
        how = ("SIGTERM, then SIGKILL (still there after the grace period)" if result.killed else "SIGTERM")
        _say(f"still running in the job's process group when it exited, stopped with {how}:")
        for p in result.leftovers:
            _err(f"  pid {p.pid}: {terminal_safe(p.command, keep_newlines=False)}\n")
    elif result.killed:
        _say("the job did not exit within the grace period after SIGTERM: its process group got SIGKILL")
    if result.holders:
        _say("still holding the job's output, outside its process group (setsid or a daemon; not signalled):")
        for p in result.holders:
            _err(f"  pid {p.pid}: {terminal_safe(p.command, keep_newlines=False)}\n")


def _checked_command(args: Namespace) -> tuple[list[str], float]:
    """The job's argv and the grace period, or a one-line error."""
    cmd = args.cmd[1:] if args.cmd and args.cmd[0] == "--" else args.cmd
    if not cmd:
        raise TroubleshootError("run needs a command: troubleshoot run -- python train.py ...")
    if args.interval <= 0:
        raise TroubleshootError("--interval must be positive")
    from troubleshoot.run.wrapper import GRACE

    grace = GRACE if args.grace is None else args.grace
    if not 0 <= grace <= 3600:
        raise TroubleshootError("--grace must be between 0 and 3600 seconds")
    return cmd, grace


@contextlib.contextmanager
def _warnings_held(ctx: CommandContext) -> Iterator[None]:
    """Our own warnings (a plugin that failed to load, a hook that raised) wait until the job has
    ended: until then its output has the terminal."""
    told, held = ctx.warn, []
    ctx.warn = held.append
    try:
        yield
    finally:
        ctx.warn = told
        for w in held:
            told(w)


def cmd_run(args: Namespace, ctx: CommandContext) -> int:
    """Run the job, watched, and diagnose it once it has ended."""
    # Only what starting the job needs comes before it: rules, the scanner and the engine load
    # in a thread once it runs (on a 2-core machine the wrapper's start-up then costs the job
    # nothing), and that thread scans the log as the job writes it.
    from troubleshoot.run import wrapper
    from troubleshoot.run.execfail import ExecError
    from troubleshoot.run.live import LiveRun
    from troubleshoot.run.record import JobCommand

    closed = wrapper.std_fds()  # first: no file opened below may land on a closed fd 1 or 2
    cmd, grace = _checked_command(args)
    job = JobCommand.started(cmd)
    with _warnings_held(ctx):
        if ctx.options.plugins:
            ctx.plugins  # a -p plugin that cannot load stops the command before the job starts
        live = LiveRun(args.log_to or None, cmd, ctx, _say, None if args.no_watch else args.interval, args.quiet)
        try:
            result = wrapper.run(cmd, live.log, live.log_path, on_output=live.on_output, on_start=live.on_start,
                                 grace=grace, closed=closed, on_log_error=live.on_log_error)
        except ExecError as exc:
            _say(f"error: {exc}")
            return exc.exit_code
        finally:
            live.finish()
    _conclude(args, result, live, job, ctx)
    return result.returncode


def _conclude(args: Namespace, result: RunResult, live: LiveRun, job: JobCommand, ctx: CommandContext) -> None:
    """After the job: the diagnosis of its log and the machine, told or written as asked."""
    from troubleshoot.run.verdict import job_facts

    run_facts = live.watcher.facts(final=True) if live.watcher else None
    failed = result.returncode != 0
    machine = ctx.machine().facts if failed else None
    # The same diagnosis as `diagnose --log LOG` with these facts, of the scan made while the
    # job ran, chosen as the live warnings were (run.verdict).
    _, scanned = live.scan.result()
    verdict = live.judge()
    with scanned:
        diagnoses = verdict.final(scanned, live.scan.source, job_facts(run_facts, machine), failed)
    _tell_end(args, result, live.watcher)
    _tell_retracted(verdict.retracted(list(live.said.values()), diagnoses))  # a copy: see LiveRun.said
    if args.format == "json":
        _write_report(args, result, diagnoses, run_facts, job)
    handover = None
    if (args.tui and failed) or (args.format == "text" and _has_fixes(args, diagnoses, failed)):
        # The facts a fix of this job plans with, its command included: a job that succeeded is
        # probed only now, when there is something to fix.
        handover = _save_snapshot(result, job, run_facts, ctx.machine().facts)
    if args.format == "text":
        _tell_diagnoses(args, result, diagnoses, failed, ctx, handover)
    if args.tui and failed and sys.stdin.isatty() and sys.stdout.isatty():
        from troubleshoot.tui.app import run_tui

        run_tui(ctx.with_options(logs=(str(result.log_path),), snapshot=str(handover) if handover else None,
                                 follow=None))


def _tell_retracted(retracted: list) -> None:
    """A warning said while the job ran that the whole run does not bear out (memory that climbed
    at the start, then levelled off) is taken back, not left standing beside a diagnosis that
    no longer names it."""
    if retracted:
        from troubleshoot.report.text import one_line

        for d in retracted:
            _say(f"said while the job ran, not so over the whole run: {one_line(d)}")


def _has_fixes(args: Namespace, diagnoses: list, failed: bool) -> bool:
    """Whether the text told has a fix to preview (see _tell_diagnoses for what is told)."""
    return any(d.fixes for d in diagnoses[:SHOWN]) and (failed or not args.quiet)


def _save_snapshot(result: RunResult, job: JobCommand, run_facts: dict | None, machine: dict | None) -> Path | None:
    """LOG.snapshot.json (run.record): what `fix --snapshot` and the TUI plan this job's fixes
    with. None when there is no file beside the log or it cannot be written (said)."""
    from troubleshoot.run import record

    path = record.snapshot_path(result.log_path)
    if path is None:
        return None
    try:
        record.save_snapshot(path, record.snapshot_facts(machine, run_facts, job))
    except OSError as exc:
        _say(f"cannot write the snapshot {path}: {exc.strerror or exc}")
        return None
    return path


def _tell_end(args: Namespace, result: RunResult, watcher: Watcher | None) -> None:
    how = f"killed by signal {result.signal}" if result.signal else f"exit {result.returncode}"
    if result.interrupted:
        how += ", interrupted"
    _say(f"job ended ({how}) after {result.seconds:.1f}s; log: {result.log_path}")
    _report_leftovers(result)
    if watcher and not args.quiet:
        summary = watcher.summary()
        if summary:
            _err("\n".join("  " + ln for ln in summary.splitlines()) + "\n")


def _write_report(args: Namespace, result: RunResult, diagnoses: list, run_facts: dict | None,
                  job: JobCommand) -> None:
    from troubleshoot.report import jsonfmt
    from troubleshoot.run.record import write_private

    log_path = result.log_path
    report = Path(args.report) if args.report else log_path.with_suffix(log_path.suffix + ".json")
    meta = {"source": str(log_path), "exit_code": result.returncode, "signal": result.signal,
            "seconds": round(result.seconds, 2), "job": job.facts(), "run": run_facts,
            "leftovers": [{"pid": p.pid, "command": p.command, "killed": result.killed} for p in result.leftovers]}
    try:
        # Quotes the job's output: never through a symlink, readable by the user alone; beside
        # the log (its name follows the log's, which was free) a new file.
        write_private(report, jsonfmt.render(diagnoses, meta).encode(), new=not args.report)
    except OSError as exc:
        _say(f"cannot write the report {report}: {exc.strerror or exc}")
    else:
        _say(f"diagnosis written to {report}")


SHOWN = 3  # diagnoses told in full after the job


def _tell_diagnoses(args: Namespace, result: RunResult, diagnoses: list, failed: bool, ctx: CommandContext,
                    snapshot: Path | None) -> None:
    log_path = result.log_path
    facts_args = ("--snapshot", str(snapshot)) if snapshot else ()
    if diagnoses and (failed or not args.quiet):
        from troubleshoot.report import text

        if not failed:
            _say("the job succeeded, but:")
        # Its preview lines repeat --rules/-p, and name the snapshot that holds the job's command.
        _err(text.render(diagnoses, colour=ctx.colour(sys.stderr), limit=SHOWN, source=str(log_path),
                         hint_args=ctx.hint_args(), rich=ctx.rich(sys.stderr), facts_args=facts_args))
        if sys.stdin.isatty() and sys.stderr.isatty() and not args.tui:
            _say(f"open it in the TUI: {ctx.command_line('tui', '--log', str(log_path), *facts_args)}  "
                 f"(or run with --tui)")
    elif failed:
        _say("no known problem matched the job's output; `troubleshoot diagnose --log "
             f"{log_path}` shows the machine's facts too")
