"""`diagnose --follow PATH` / `--pid PID`: watch a job that is already running.

New diagnoses are printed as they appear (once each); when the process ends (`--pid`) or on
Ctrl-C, the full diagnosis of everything seen follows.
"""

from __future__ import annotations

import json
import sys
import time
from typing import TYPE_CHECKING

from troubleshoot.errors import TroubleshootError
from troubleshoot.textsafe import terminal_safe

if TYPE_CHECKING:
    from troubleshoot.context import CommandContext

POLL = 1.0


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2:][:1] not in (b"Z", b"X")  # a zombie has ended


def follow(args, ctx: CommandContext) -> int:
    from troubleshoot.sources import LogTail, check_readable

    path, pid = args.follow, args.pid
    if pid is not None and not _alive(pid):
        raise TroubleshootError(f"no running process {pid}")
    if path is not None:
        check_readable(path)
    ruleset = ctx.ruleset()
    watcher = None
    if pid is not None:
        from troubleshoot.run.watch import Watcher

        watcher = Watcher(pid).start()
    tail = LogTail(path) if path is not None else None
    what = " and ".join(x for x in (path and f"following {path}", pid and f"watching process {pid}") if x)
    print(terminal_safe(f"troubleshoot: {what}; Ctrl-C to stop"), file=sys.stderr)
    json_lines = args.format == "json"
    try:
        _watch(tail, watcher, pid, ruleset, json_lines)
    except KeyboardInterrupt:
        print("", file=sys.stderr)
    finally:
        if watcher is not None:
            watcher.stop()
    facts = {"run": watcher.facts(final=True)} if watcher is not None else None
    logs = [tail.source] if tail is not None else []
    result = ctx.diagnose(ctx.sources(logs, facts, "the job" if facts else "machine facts"))
    if json_lines:
        from troubleshoot.report import jsonfmt

        doc = jsonfmt.document(result.diagnoses, jsonfmt.result_meta(result, "the job" if facts else None))
        print(json.dumps({"event": "end", **doc}, default=str), flush=True)
        return 0
    from troubleshoot.report import text

    sys.stdout.write(text.render(result.diagnoses, colour=ctx.colour(sys.stdout), limit=5,
                                 source=path or f"process {pid}", hint_args=ctx.hint_args(),
                                 rich=ctx.rich(sys.stdout)))
    return 0


def _watch(tail, watcher, pid: int | None, ruleset, json_lines: bool = False) -> None:
    """New diagnoses, each rule once, until the process ends (or Ctrl-C): judged as `run` judges
    a job while it runs (run.verdict), so both say the same of the same lines and samples.
    `json_lines`: each as one line of JSON (`{"event": "new", "diagnosis": ...}`)."""
    from troubleshoot.report.jsonfmt import diagnosis_dict
    from troubleshoot.report.text import one_line
    from troubleshoot.run.verdict import Verdict, job_facts

    verdict = Verdict(ruleset)
    said: set[str] = set()
    while True:
        found = verdict.so_far(tail, job_facts(watcher.facts(), None) if watcher is not None else None)
        for d in found:
            if d.rule.id not in said:
                said.add(d.rule.id)
                print(json.dumps({"event": "new", "diagnosis": diagnosis_dict(d)}, default=str) if json_lines
                      else "new: " + one_line(d), flush=True)
        if pid is not None and not _alive(pid):
            print(f"troubleshoot: process {pid} ended", file=sys.stderr)
            return
        time.sleep(POLL)
