"""`diagnose --follow PATH` / `--pid PID`: watch a job that is already running.

New diagnoses are printed as they appear (once each); when the process ends (`--pid`) or on
Ctrl-C, the full diagnosis of everything seen follows.
"""

from __future__ import annotations

import sys
import time

from troubleshoot.errors import TroubleshootError
from troubleshoot.textsafe import terminal_safe

POLL = 1.0


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2:][:1] not in (b"Z", b"X")  # a zombie has ended


def follow(args, plugins) -> int:
    from troubleshoot import pipeline
    from troubleshoot.engine.diagnose import diagnose
    from troubleshoot.engine.ruleset import fact_paths

    path, pid = args.follow, args.pid
    if pid is not None and not _alive(pid):
        raise TroubleshootError(f"no running process {pid}")
    if path is not None:
        pipeline.open_log(path)[0].close()
    ruleset = pipeline.load_rules(args.rules, plugins)
    live_rules = [r for r in ruleset.rules if r.facts and all(p.startswith("run.") for p in fact_paths(r))]
    watcher = None
    if pid is not None:
        from troubleshoot.run.watch import Watcher

        watcher = Watcher(pid).start()
    said: set[str] = set()
    tail = pipeline.LogTail(path) if path is not None else None
    what = " and ".join(x for x in (path and f"following {path}", pid and f"watching process {pid}") if x)
    print(terminal_safe(f"troubleshoot: {what}; Ctrl-C to stop"), file=sys.stderr)
    try:
        while True:
            found = tail.new_diagnoses(ruleset) if tail is not None else []
            if watcher is not None:
                found += diagnose(live_rules, None, {"run": watcher.facts()})
            for d in found:
                if d.rule.id not in said:
                    said.add(d.rule.id)
                    print(terminal_safe(f"new: [{d.severity}] {d.title} (symptom {d.symptom}, rule {d.rule.id})",
                                        keep_newlines=False), flush=True)
            if pid is not None and not _alive(pid):
                print(f"troubleshoot: process {pid} ended", file=sys.stderr)
                break
            time.sleep(POLL)
    except KeyboardInterrupt:
        print("", file=sys.stderr)
    finally:
        if watcher is not None:
            watcher.stop()
    facts = {"run": watcher.facts(final=True)} if watcher is not None else None
    result = pipeline.run(path, facts=facts, ruleset=ruleset)
    from troubleshoot.report import text

    from troubleshoot.cli import _hint_args

    sys.stdout.write(text.render(result.diagnoses, colour=sys.stdout.isatty(), limit=5, source=path or f"process {pid}",
                                 hint_args=_hint_args(args)))
    return 0
