"""CLI for fixers: `fixers list`, `fix`, `undo`, `history`. Rendering and prompts only: the
diagnosis a `--rule` takes its fixes from comes from the pipeline (the command context's logs
and facts), and plans, changes, verification and undo from the fix service, as in the TUI."""

from __future__ import annotations

import json
import os
import shlex
import sys
from typing import TYPE_CHECKING

from troubleshoot.console import format_help
from troubleshoot.errors import TroubleshootError
from troubleshoot.textsafe import terminal_safe

if TYPE_CHECKING:
    from troubleshoot.context import CommandContext



def _say(line: str, err: bool = False) -> None:
    """One line of output: paths, titles and file contents are data, so no control sequence
    in them reaches the terminal (a file name can carry an OSC 52 clipboard write)."""
    print(terminal_safe(line, keep_newlines=False), file=sys.stderr if err else sys.stdout)


def add_parsers(sub, add_rules_arg) -> None:
    fl = sub.add_parser("fixers", help="list the fixers that rules can name (the default: list)")
    fsub = fl.add_subparsers(dest="fixers_command", metavar="SUBCOMMAND", parser_class=sub._parser_class)
    p = fsub.add_parser("list", help="list fixers and their parameters")
    p.add_argument("--format", choices=("text", "json"), default="text", help=format_help("text", "json"))

    f = sub.add_parser("fix", help="preview (default) or apply a fix, backed up and undoable")
    f.add_argument("fixer", nargs="?", metavar="FIXER_ID",
                   help="the fixer to plan, with its --param values (see `troubleshoot fixers list`)")
    f.add_argument("--rule", metavar="RULE_ID", help="take the fixes of this rule's diagnosis")
    f.add_argument("--log", metavar="PATH", action="append",
                   help="with --rule: fill the fixes' parameters from the rule's diagnosis of this log (a file, a "
                        "folder of per-rank logs, a glob, or '-'; repeatable), as `diagnose` reads it")
    f.add_argument("--param", metavar="K=V", action="append", default=[], help="a fixer parameter (repeatable)")
    f.add_argument("--root", metavar="DIR", help="apply file changes under DIR instead of /; run no commands")
    f.add_argument("--apply", action="store_true", help="make the changes (asks for confirmation)")
    f.add_argument("--yes", action="store_true", help="with --apply: do not ask")
    f.add_argument("--format", choices=("text", "json"), default="text",
                   help="text: the plan as commands and diffs (default); json: plans and results for scripts")
    f.add_argument("--snapshot", metavar="FILE", help="machine facts from a saved snapshot instead of probing")
    f.add_argument("--no-probe", action="store_true", help="do not probe this machine")
    f.add_argument("--here", action="store_true", help="the logs came from this machine: use its facts, as diagnose --here")
    add_rules_arg(f)

    u = sub.add_parser("undo", help="restore the files a fix changed (latest fix, or ID)")
    u.add_argument("id", nargs="?", metavar="ID",
                   help="the fix to undo, as `troubleshoot history` lists it (default: the applied fix that wrote its "
                        "files last)")
    u.add_argument("--yes", action="store_true", help="do not ask")
    u.add_argument("--force", action="store_true", help="restore even files that changed since the fix")

    h = sub.add_parser("history", help="fixes applied, newest first")
    h.add_argument("--format", choices=("text", "json"), default="text", help=format_help("text", "json"))


def _params(pairs: list[str]) -> dict:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise TroubleshootError(f"--param wants KEY=VALUE, got {pair!r}")
        out[key.strip()] = value
    return out


def cmd_fixers(args, ctx: CommandContext) -> int:
    fixers = ctx.fixers()
    rows = [{"id": f.id, "title": f.title, "plugin": type(f).__module__,
             "params": [{"name": p.name, "type": p.type.__name__, "required": p.required, "default": p.default,
                         "help": p.help, "choices": list(p.choices)} for p in f.params]}
            for f in sorted(fixers.values(), key=lambda f: f.id)]
    if getattr(args, "format", "text") == "json":
        print(json.dumps({"schema": 1, "fixers": rows}, indent=2, default=str))
        return 0
    for r in rows:  # a plugin's words are data too
        params = " ".join(f"{p['name']}{'' if p['required'] else '?'}" for p in r["params"])
        print(terminal_safe(f"{r['id']:<28} {r['title']}" + (f"   [{params}]" if params else ""), keep_newlines=False))
    return 0


def _requests(args, ctx: CommandContext) -> list:
    """What to plan: FIXER_ID with its --param values, or the fixes of a rule's diagnosis (of
    --log and the command's facts, as `diagnose` gives it)."""
    from troubleshoot.fixes import service

    if args.fixer and args.rule:
        raise TroubleshootError("give a FIXER_ID or --rule RULE_ID, not both")
    if args.fixer:
        return [service.Request(args.fixer, _params(args.param))]
    if not args.rule:
        raise TroubleshootError("fix needs a FIXER_ID or --rule RULE_ID (see `troubleshoot fixers list`)")
    rule = ctx.rule(args.rule)
    extra = _params(args.param)
    if not ctx.options.logs:
        return service.rule_requests(rule, [], extra, read_logs=False)
    if not rule.fixes:
        raise TroubleshootError(f"rule {args.rule!r} names no fixes")
    found = service.rule_requests(rule, ctx.diagnose().diagnoses, extra)
    if found is None:
        logs = ctx.options.logs
        single = len(logs) == 1 and logs[0] != "-" and os.path.isfile(logs[0])
        words = ["rules", "why", args.rule, "--log", logs[0], *ctx.facts_hint()] if single else \
            ["diagnose", *(ctx.log_hint() or ["--log", "-"]), *ctx.facts_hint()]
        raise TroubleshootError(f"rule {args.rule!r} does not fire on {', '.join(logs)}; "
                                f"see `{ctx.command_line(*words)}`")
    return found


def cmd_fix(args, ctx: CommandContext) -> int:
    from troubleshoot.fixes import service as fixes

    svc = ctx.fix_service()
    # A rule names several fixers: one that refuses (a fact it needs is missing, a driver it
    # cannot install) must not hide the others' plans. A fixer named alone is planned strictly.
    plans = svc.plan(_requests(args, ctx), strict=not args.rule)
    if plans.errors and not plans.prepared:
        raise TroubleshootError(plans.errors[0])
    for problem in plans.errors:
        ctx.warn(problem)
    prepared = plans.prepared
    if args.format == "json" and not args.apply:
        print(json.dumps({"schema": 1, "plans": [_plan_json(p) for p in prepared], "errors": plans.errors},
                         indent=2, default=str))
        return 0
    if args.format == "text":
        from troubleshoot.report.mdtext import to_plain

        for prep in prepared:  # advice, diffs and log-derived params are data: no escapes reach the terminal
            sys.stdout.write(terminal_safe(svc.preview(prep, markdown=to_plain)))
    if not args.apply:
        if args.format == "text" and any(s.changes for p in prepared for s in p.steps):
            again = shlex.join(["troubleshoot", *sys.argv[1:], "--apply"]) if sys.argv[1:2] == ["fix"] else "--apply"
            print()
            _say(f"Dry run: nothing was changed. To apply: {again}")  # the command line holds the parameters
        return 0

    results: list[dict] = []

    def confirm(prep) -> bool:
        from troubleshoot.fixes import executor

        return args.yes or executor.confirm(f"Apply '{prep.plan.title}'{' (as root)' if prep.needs_root else ''}?")

    def applied(a) -> None:
        if a.outcome is None:
            results.append({"fixer": a.prep.plan.fixer, "status": "nothing to change"})
            return
        results.append(_outcome_json(a.prep, a.outcome))
        if args.format == "text":
            _print_outcome(a.prep, a.outcome)

    try:
        done = svc.apply(prepared, confirm, applied)
    except fixes.NotConfirmed:
        raise TroubleshootError("not applied: no confirmation (answer y, or pass --yes)") from None
    if args.format == "json":
        print(json.dumps({"schema": 1, "plans": [_plan_json(p) for p in prepared], "applied": results}, indent=2,
                         default=str))
    return 1 if any(a.stopped for a in done) else 0


def _print_outcome(prep, out) -> None:
    eid = out.entry.id if out.entry else "?"
    for line in out.done:
        _say(f"  done: {line}")
    for line in out.skipped:
        _say(f"  skipped: {line}")
    for line in out.notes:
        _say(f"  note: {line}")
    if out.failed:
        _say(f"  FAILED: {out.failed}", err=True)
        _say(f"  Every file touched so far is backed up: `troubleshoot undo {eid}` restores them.", err=True)
        return
    _say(f"Applied as {eid} (undo: `troubleshoot undo {eid}`).")
    if out.verified is True:
        _say(f"  verified: {out.verify_detail}")
    elif out.verified is False:
        _say(f"  VERIFICATION FAILED: {out.verify_detail}", err=True)
        from troubleshoot.fixes import executor, service

        if executor.confirm(f"Roll back {eid}?"):
            _print_undo(eid, service.undo(eid))
        else:
            _say(f"  To roll back: troubleshoot undo {eid}", err=True)
    elif out.verify_detail:
        _say(f"  not verified: {out.verify_detail}")


def _plan_json(prep) -> dict:
    from troubleshoot.fixes import executor, files

    steps = []
    for s in prep.steps:
        d = {"kind": s.kind, "title": s.title, "needs_root": s.needs_root}
        if s.argv:
            d.update(argv=list(s.argv), command=shlex.join(s.argv), runs=s.runs)
        if s.target is not None:
            d.update(path=s.path, target=str(s.target), changes=s.changes,
                     diff=files.diff(str(s.target), s.old, s.new) if s.changes else "")
        if s.text:
            d["text"] = s.text
        steps.append(d)
    plan = prep.plan
    return {"fixer": plan.fixer, "title": plan.title, "params": dict(plan.params), "root": prep.root,
            "needs_root": prep.needs_root, "sudo": executor.sudo_line(plan) if prep.needs_root else None,
            "steps": steps, "notes": list(plan.notes), "rung": plan.rung,
            "verify": plan.verify.description if plan.verify else None}


def _outcome_json(prep, out) -> dict:
    return {"fixer": prep.plan.fixer, "id": out.entry.id if out.entry else None,
            "status": "failed" if out.failed else "applied", "done": out.done, "skipped": out.skipped,
            "error": out.failed, "verified": out.verified, "verify": out.verify_detail}


def cmd_undo(args, ctx: CommandContext) -> int:
    from troubleshoot.fixes import executor, service

    eid = args.id
    if eid is None:
        latest = service.latest_to_undo()
        if latest is None:
            raise TroubleshootError("no applied fix to undo (see `troubleshoot history`)")
        eid = latest.id
        if not args.yes and not executor.confirm(f"Undo {eid} ({latest.data.get('title')})?"):
            raise TroubleshootError(f"not undone: no confirmation (answer y, or `troubleshoot undo {eid}`)")
    try:
        res = service.undo(eid, force=args.force)
    except executor.UndoConflict as exc:
        for c in exc.conflicts:
            _say(f"{c.target} changed since the fix (what the fix left -> what is there now):", err=True)
            sys.stderr.write(terminal_safe(c.diff) if c.diff else "  (no record of what the fix left)\n")
        raise
    _print_undo(eid, res)
    return 1 if res.problems else 0


def _print_undo(eid: str, res) -> None:
    for p in res.restored:
        _say(f"  restored {p}")
    for p in res.removed:
        _say(f"  removed {p} (it did not exist before)")
    for p in getattr(res, "forced", []):
        _say(f"  note: {p} had changed since the fix; those changes were overwritten (--force)")
    for c in res.not_reversed:
        _say(f"  not reversed (a command): {c}")
    for p in res.problems:
        _say(f"  PROBLEM: {p}", err=True)
    _say(f"Undid {eid}." if not res.problems else f"Undo of {eid} incomplete.")


def cmd_history(args, ctx: CommandContext) -> int:
    from troubleshoot.fixes import journal
    from troubleshoot.report.historyview import history_view

    views = [history_view(eid, e) for eid, e in journal.entries()]
    if args.format == "json":
        print(json.dumps({"schema": 1, "history": [v.record for v in views]}, indent=2, default=str))
        return 0
    if not views:
        print("No fixes applied yet.")
    for v in views:  # a corrupt journal's title says why it is not trusted
        print(f"{v.id:<52} {v.status:<13} {v.title}" + (f" under {v.root}" if v.root else ""))
    return 0
