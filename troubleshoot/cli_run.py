"""`troubleshoot run -- CMD...`: run a job unchanged, watch it, diagnose it when it fails.

Our own messages go to stderr only, after the job's; stdout carries the job's bytes alone. A
closed or vanished stdout/stderr (`>&-`, `| head`) loses our messages, never the job's exit code.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from troubleshoot.errors import TroubleshootError

if TYPE_CHECKING:
    from troubleshoot.run.watch import Watcher

PROG = "troubleshoot"


def add_parser(sub, add_rules_arg) -> None:
    r = sub.add_parser("run", help="run a training job, watch it, and diagnose it if it fails",
                       description="Run CMD unchanged (same output, same exit code), keep its log, watch the "
                                   "machine while it runs, and diagnose the failure when it exits non-zero.")
    r.add_argument("--log-to", metavar="PATH", help="write the job's output here (default: the state directory); "
                   "a folder (DIR/): one file per rank in it, named by node and rank")
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
    _err(f"{PROG}: {msg}\n")


def _report_leftovers(result) -> None:
    if result.leftovers:
        how = ("SIGTERM, then SIGKILL (still there after the grace period)" if result.killed else "SIGTERM")
        _say(f"still running in the job's process group when it exited, stopped with {how}:")
        for p in result.leftovers:
            _err(f"  pid {p.pid}: {p.command}\n")
    elif result.killed:
        _say("the job did not exit within the grace period after SIGTERM: its process group got SIGKILL")
    if result.holders:
        _say("still holding the job's output, outside its process group (setsid or a daemon; not signalled):")
        for p in result.holders:
            _err(f"  pid {p.pid}: {p.command}\n")


def _live_rules(ruleset) -> list:
    """Rules on the watcher's `run.*` facts alone: they can fire while the job runs."""
    from troubleshoot.engine.ruleset import fact_paths

    return [r for r in ruleset.rules if r.facts and all(p.startswith("run.") for p in fact_paths(r))]


def cmd_run(args, plugins=None) -> int:
    """`plugins`: None loads the installed ones while the job runs (their problems are told after it)."""
    # Only what starting the job needs comes before it: rules, the scanner and the engine load
    # in a thread once it runs (on a 2-core machine the wrapper's start-up then costs the job
    # nothing), and that thread scans the log as the job writes it.
    from troubleshoot.run import wrapper
    from troubleshoot.run.follow import BackgroundScan

    closed = wrapper.std_fds()  # first: no file opened below may land on a closed fd 1 or 2
    cmd = args.cmd[1:] if args.cmd and args.cmd[0] == "--" else args.cmd
    if not cmd:
        raise TroubleshootError("run needs a command: troubleshoot run -- python train.py ...")
    if args.interval <= 0:
        raise TroubleshootError("--interval must be positive")
    grace = wrapper.GRACE if args.grace is None else args.grace
    if not 0 <= grace <= 3600:
        raise TroubleshootError("--grace must be between 0 and 3600 seconds")
    if args.log_to and (args.log_to.endswith("/") or Path(args.log_to).is_dir()):
        log_path = wrapper.default_log_path(cmd, Path(args.log_to))  # a folder: one file per rank in it
    else:
        log_path = Path(args.log_to) if args.log_to else wrapper.default_log_path(cmd)
    deferred = plugins is None

    def load_rules():  # in the scan's thread
        nonlocal plugins
        from troubleshoot import pipeline

        if plugins is None:
            from troubleshoot.plugins import load_plugins

            plugins = load_plugins()
        return pipeline.load_rules(args.rules, plugins)

    try:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(log_path, "wb", buffering=0)  # what the pump wrote is in the file for the scan
        scan = BackgroundScan(str(log_path), load_rules)
    except OSError as exc:
        raise TroubleshootError(f"cannot write the log {log_path}: {exc.strerror or exc}") from None

    said: set[str] = set()
    lock = threading.Lock()
    watcher: Watcher | None = None
    tail: list = []  # (LogTail, the live rules), once the rules are loaded

    def live(w: Watcher) -> None:
        if args.quiet or len(w.samples) % 5:
            return
        from troubleshoot import pipeline
        from troubleshoot.engine.diagnose import diagnose

        scan.ready.wait()
        if scan.ruleset is None:
            return
        if not tail:
            tail.extend((pipeline.LogTail(log_path), _live_rules(scan.ruleset)))
        found = diagnose(tail[1], None, {"run": w.facts()})
        found += tail[0].new_diagnoses(scan.ruleset)  # the log's new lines
        for d in found:
            with lock:
                if d.rule.id not in said:
                    said.add(d.rule.id)
                    _say(f"[{d.severity}] {d.title} (symptom {d.symptom}; still running, full diagnosis at the end)")

    def on_start(pid: int) -> None:
        nonlocal watcher
        scan.start()
        if not args.no_watch:
            from troubleshoot.run.watch import Watcher  # the job has started: its import delays nothing

            watcher = Watcher(pid, args.interval, on_sample=live).start()

    def on_output(data: bytes) -> None:
        scan.appended(len(data))
        if watcher:
            watcher.feed(data)

    try:
        result = wrapper.run(cmd, log, log_path, on_output=on_output, on_start=on_start, grace=grace, closed=closed)
    except wrapper.ExecError as exc:
        _say(f"error: {exc}")
        return exc.exit_code
    finally:
        if watcher:
            watcher.stop()
        log.close()
        scan.stop()

    from troubleshoot import pipeline
    from troubleshoot.sources import FactsSource, Sources

    scan.ready.wait()  # the thread has set `plugins` (and keeps scanning the log's end)
    if deferred and plugins is not None:
        from troubleshoot.plugins import warn

        warn(plugins.problems)
        plugins.problems.clear()
    run_facts = watcher.facts(final=True) if watcher else None
    failed = result.returncode != 0
    facts: dict = {}
    if failed and not args.no_probe:
        facts = pipeline.probe(None, plugins)
    if run_facts:
        facts["run"] = run_facts
    # The same diagnosis as `diagnose --log LOG` with these facts (pipeline.run), of the scan
    # made while the job ran.
    ruleset, scanned = scan.result()
    with scanned:
        res = pipeline.diagnose_scanned(scanned, Sources([scan.source], [FactsSource(facts, "machine facts")]
                                                         if facts else []), ruleset)
    live_rules = _live_rules(ruleset)
    # A job that succeeded still gets what its output or the watcher showed (a recovered OOM,
    # data loading dominating steps, memory climbing); machine-only findings need a failure.
    diagnoses = res.diagnoses if failed else [d for d in res.diagnoses if d.count or d.rule in live_rules]

    how = f"killed by signal {result.signal}" if result.signal else f"exit {result.returncode}"
    if result.interrupted:
        how += ", interrupted"
    _say(f"job ended ({how}) after {result.seconds:.1f}s; log: {log_path}")
    _report_leftovers(result)
    if watcher and not args.quiet:
        summary = watcher.summary()
        if summary:
            _err("\n".join("  " + ln for ln in summary.splitlines()) + "\n")

    if args.format == "json":
        from troubleshoot.report import jsonfmt

        report = Path(args.report) if args.report else log_path.with_suffix(log_path.suffix + ".json")
        meta = {"source": str(log_path), "exit_code": result.returncode, "signal": result.signal,
                "seconds": round(result.seconds, 2), "run": run_facts,
                "leftovers": [{"pid": p.pid, "command": p.command, "killed": result.killed} for p in result.leftovers]}
        try:
            report.write_text(jsonfmt.render(diagnoses, meta))
        except OSError as exc:
            _say(f"cannot write the report {report}: {exc.strerror or exc}")
        else:
            _say(f"diagnosis written to {report}")
    elif diagnoses and (failed or not args.quiet):
        from troubleshoot.report import text

        if not failed:
            _say("the job succeeded, but:")
        from troubleshoot.cli import _hint_args, command_line

        _err(text.render(diagnoses, colour=sys.stderr.isatty(), limit=3, source=str(log_path),
                         hint_args=_hint_args(args)))  # its preview line repeats --rules/-p
        if sys.stdin.isatty() and sys.stderr.isatty() and not args.tui:
            _say(f"open it in the TUI: {command_line('tui', '--log', str(log_path), args=args)}  (or run with --tui)")
    elif failed:
        _say("no known problem matched the job's output; `troubleshoot diagnose --log "
             f"{log_path}` shows the machine's facts too")
    if args.tui and failed and sys.stdin.isatty() and sys.stdout.isatty():
        from troubleshoot import snapshot
        from troubleshoot.tui.app import run_tui

        snap_path = log_path.with_suffix(log_path.suffix + ".snapshot.json")
        snapshot.save(facts, snap_path)
        run_tui(log=str(log_path), snapshot=str(snap_path), rules=args.rules, plugins=plugins)
    return result.returncode
