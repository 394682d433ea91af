"""`troubleshoot run -- CMD...`: run a job unchanged, watch it, diagnose it when it fails.

Our own messages go to stderr only, after the job's; stdout carries the job's bytes alone. A
closed or vanished stdout/stderr (`>&-`, `| head`) loses our messages, never the job's exit code.
"""

from __future__ import annotations

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
    from troubleshoot.run.follow import BackgroundScan
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
    r.add_argument("cmd", nargs="+", metavar="CMD", help="the job, after --")


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

    closed = wrapper.std_fds()  # first: no file opened below may land on a closed fd 1 or 2
    cmd, grace = _checked_command(args)
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
    _conclude(args, result, live.scan, live.watcher, ctx)
    return result.returncode


def _conclude(args: Namespace, result: RunResult, scan: BackgroundScan, watcher: Watcher | None,
              ctx: CommandContext) -> None:
    """After the job: the diagnosis of its log and the machine, told or written as asked."""
    from troubleshoot import pipeline

    run_facts = watcher.facts(final=True) if watcher else None
    failed = result.returncode != 0
    facts: dict = dict(ctx.machine().facts or {}) if failed else {}
    if run_facts:
        facts["run"] = run_facts
    # The same diagnosis as `diagnose --log LOG` with these facts, of the scan made while the
    # job ran.
    ruleset, scanned = scan.result()
    with scanned:
        res = pipeline.diagnose_scanned(scanned, ctx.sources([scan.source], facts or None, "machine facts"), ruleset)
    live_ids = {r.id for r in pipeline.live_rules(ruleset).rules}
    # A job that succeeded still gets what its output or the watcher showed (a recovered OOM,
    # data loading dominating steps, memory climbing); machine-only findings need a failure.
    diagnoses = res.diagnoses if failed else [d for d in res.diagnoses if d.count or d.rule.id in live_ids]
    _tell_end(args, result, watcher)
    if args.format == "json":
        _write_report(args, result, diagnoses, run_facts)
    else:
        _tell_diagnoses(args, result, diagnoses, failed, ctx)
    if args.tui and failed and sys.stdin.isatty() and sys.stdout.isatty():
        from troubleshoot import snapshot
        from troubleshoot.tui.app import run_tui

        snap_path = result.log_path.with_suffix(result.log_path.suffix + ".snapshot.json")
        snapshot.save(facts, snap_path)
        run_tui(ctx.with_options(logs=(str(result.log_path),), snapshot=str(snap_path), follow=None))


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


def _write_report(args: Namespace, result: RunResult, diagnoses: list, run_facts: dict | None) -> None:
    from troubleshoot.report import jsonfmt

    log_path = result.log_path
    report = Path(args.report) if args.report else log_path.with_suffix(log_path.suffix + ".json")
    meta = {"source": str(log_path), "exit_code": result.returncode, "signal": result.signal,
            "seconds": round(result.seconds, 2), "run": run_facts,
            "leftovers": [{"pid": p.pid, "command": p.command, "killed": result.killed} for p in result.leftovers]}
    try:
        _write_private(report, jsonfmt.render(diagnoses, meta).encode(), new=not args.report)
    except OSError as exc:
        _say(f"cannot write the report {report}: {exc.strerror or exc}")
    else:
        _say(f"diagnosis written to {report}")


def _write_private(path: Path, data: bytes, new: bool) -> None:
    """Never through a symlink, readable by the user alone (it quotes the job's output). The
    report beside a log must be `new`: its name follows the log's, which was free, so a file
    already there was put there by someone else."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_EXCL if new else os.O_TRUNC)
    with os.fdopen(os.open(path, flags, 0o600), "wb") as f:
        f.write(data)


def _tell_diagnoses(args: Namespace, result: RunResult, diagnoses: list, failed: bool, ctx: CommandContext) -> None:
    log_path = result.log_path
    if diagnoses and (failed or not args.quiet):
        from troubleshoot.report import text

        if not failed:
            _say("the job succeeded, but:")
        _err(text.render(diagnoses, colour=ctx.colour(sys.stderr), limit=3, source=str(log_path),
                         hint_args=ctx.hint_args(), rich=ctx.rich(sys.stderr)))  # its preview line repeats --rules/-p
        if sys.stdin.isatty() and sys.stderr.isatty() and not args.tui:
            _say(f"open it in the TUI: {ctx.command_line('tui', '--log', str(log_path))}  (or run with --tui)")
    elif failed:
        _say("no known problem matched the job's output; `troubleshoot diagnose --log "
             f"{log_path}` shows the machine's facts too")
