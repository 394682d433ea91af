"""CLI for fixers: `fixers list`, `fix`, `undo`, `history`. Rendering and prompts only; the
plans come from the fixers and the changes from the executor."""

from __future__ import annotations

import json
import shlex
import sys

from troubleshoot.errors import TroubleshootError
from troubleshoot.textsafe import terminal_safe

PROG = "troubleshoot"


def _say(line: str, err: bool = False) -> None:
    """One line of output: paths, titles and file contents are data, so no control sequence
    in them reaches the terminal (a file name can carry an OSC 52 clipboard write)."""
    print(terminal_safe(line, keep_newlines=False), file=sys.stderr if err else sys.stdout)


def add_parsers(sub, add_rules_arg) -> None:
    from troubleshoot.cli import format_help

    fl = sub.add_parser("fixers", help="list the fixers that rules can name (the default: list)")
    fsub = fl.add_subparsers(dest="fixers_command", metavar="SUBCOMMAND", parser_class=sub._parser_class)
    p = fsub.add_parser("list", help="list fixers and their parameters")
    p.add_argument("--format", choices=("text", "json"), default="text", help=format_help("text", "json"))

    f = sub.add_parser("fix", help="preview (default) or apply a fix, backed up and undoable")
    f.add_argument("fixer", nargs="?", metavar="FIXER_ID",
                   help="the fixer to plan, with its --param values (see `troubleshoot fixers list`)")
    f.add_argument("--rule", metavar="RULE_ID", help="take the fixes of this rule's diagnosis")
    f.add_argument("--log", metavar="PATH", help="with --rule: fill the fixes' parameters from this log")
    f.add_argument("--param", metavar="K=V", action="append", default=[], help="a fixer parameter (repeatable)")
    f.add_argument("--root", metavar="DIR", help="apply file changes under DIR instead of /; run no commands")
    f.add_argument("--apply", action="store_true", help="make the changes (asks for confirmation)")
    f.add_argument("--yes", action="store_true", help="with --apply: do not ask")
    f.add_argument("--format", choices=("text", "json"), default="text",
                   help="text: the plan as commands and diffs (default); json: plans and results for scripts")
    f.add_argument("--snapshot", metavar="FILE", help="machine facts from a saved snapshot instead of probing")
    f.add_argument("--no-probe", action="store_true", help="do not probe this machine")
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


def cmd_fixers(args, plugins) -> int:
    from troubleshoot.fixes.registry import load_fixers

    fixers = load_fixers(plugins)
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


def _snapshot(args, plugins, needed: bool) -> dict | None:
    from troubleshoot import pipeline, snapshot

    if args.snapshot:
        loaded = snapshot.load(args.snapshot)
        for w in loaded.warnings:
            _say(f"{PROG}: warning: {w}", err=True)
        return loaded.facts
    if args.no_probe or not needed:
        return None
    return pipeline.probe(None, plugins)


def _requests(args, plugins) -> list[tuple[str, dict]]:
    """(fixer id, raw params) to plan: one from FIXER_ID, or the fixes of a rule's diagnosis."""
    if args.fixer and args.rule:
        raise TroubleshootError("give a FIXER_ID or --rule RULE_ID, not both")
    if args.fixer:
        return [(args.fixer, _params(args.param))]
    if not args.rule:
        raise TroubleshootError("fix needs a FIXER_ID or --rule RULE_ID (see `troubleshoot fixers list`)")
    from troubleshoot import pipeline
    from troubleshoot.engine.diagnose import diagnose, scan_patterns
    from troubleshoot.engine.scanner import scan_stream

    ruleset = pipeline.load_rules(args.rules, plugins)
    rule = ruleset.get(args.rule)
    if rule is None:
        from troubleshoot.cli import command_line

        raise TroubleshootError(f"no rule with id {args.rule!r} (see `{command_line('rules', 'list', args=args)}`)")
    if not rule.fixes:
        raise TroubleshootError(f"rule {args.rule!r} names no fixes")
    if args.log:
        stream, _ = pipeline.open_log(args.log)
        try:
            scan = scan_stream(stream, scan_patterns([rule]))
        except OSError as exc:  # /proc/self/mem, a device, a vanished mount
            raise TroubleshootError(f"cannot read log {args.log}: {exc.strerror or exc}") from None
        finally:
            if stream is not sys.stdin.buffer:
                stream.close()
        found = [d for d in diagnose([rule], scan, None) if d.rule.id == rule.id]
        if not found:
            why = ["troubleshoot", "rules", "why", args.rule, "--log", args.log]
            for d in args.rules:
                why += ["--rules", d]
            raise TroubleshootError(f"rule {args.rule!r} does not fire on {args.log}; see `{shlex.join(why)}`")
        fixes = [(f.fixer, dict(f.params)) for f in found[0].fixes]
    else:
        from troubleshoot.engine.diagnose import render_fix

        fixes = [(f.fixer, dict(f.params)) for f in (render_fix(ref, {}, None) for ref in rule.fixes)]
    extra = _params(args.param)
    return [(fid, {**p, **extra}) for fid, p in fixes]


def cmd_fix(args, plugins) -> int:
    from troubleshoot.fixes import executor
    from troubleshoot.fixes.registry import load_fixers

    fixers = load_fixers(plugins)
    requests = _requests(args, plugins)
    for fid, _ in requests:
        if fid not in fixers:
            raise TroubleshootError(f"no fixer {fid!r} (see `troubleshoot fixers list`)")
    needed = any(fixers[fid].needs_snapshot for fid, _ in requests)
    snap = _snapshot(args, plugins, needed)
    prepared = []
    for fid, raw in requests:
        fixer = fixers[fid]
        plan = fixer.plan(fixer.validate(raw), snap)
        prepared.append(executor.prepare(plan, args.root))

    if args.format == "json" and not args.apply:
        print(json.dumps({"schema": 1, "plans": [_plan_json(p) for p in prepared]}, indent=2, default=str))
        return 0
    if args.format == "text":
        from troubleshoot.report.mdtext import to_plain

        for prep in prepared:  # advice, diffs and log-derived params are data: no escapes reach the terminal
            sys.stdout.write(terminal_safe(executor.preview(prep, markdown=to_plain)))
    if not args.apply:
        changing = any(s.changes for p in prepared for s in p.steps)
        if args.format == "text" and changing:
            again = shlex.join(["troubleshoot", *sys.argv[1:], "--apply"]) if sys.argv[1:2] == ["fix"] else "--apply"
            print()
            _say(f"Dry run: nothing was changed. To apply: {again}")  # the command line holds the parameters
        return 0

    results = []
    status = 0
    for prep in prepared:
        if not any(s.changes for s in prep.steps) and not prep.plan.ladder:
            results.append({"fixer": prep.plan.fixer, "status": "nothing to change"})
            continue
        if prep.needs_root and not executor._is_root():
            raise TroubleshootError(f"this fix needs root; nothing was changed. Run: {executor.sudo_line(prep.plan)}"
                                    + (f" (with --root {args.root})" if args.root else ""))
        if not args.yes:
            root_note = " (as root)" if prep.needs_root else ""
            if not executor.confirm(f"Apply '{prep.plan.title}'{root_note}?"):
                raise TroubleshootError("not applied: no confirmation (answer y, or pass --yes)")
        out = executor.apply(prep)
        executor.verify(prep, out, probe=lambda probes, root: _probe_areas(plugins, probes, root))
        results.append(_outcome_json(prep, out))
        if args.format == "text":
            _print_outcome(prep, out)
        if out.failed or out.verified is False:
            status = 1
            break
    if args.format == "json":
        print(json.dumps({"schema": 1, "plans": [_plan_json(p) for p in prepared], "applied": results}, indent=2,
                         default=str))
    return status


def _probe_areas(plugins, names: tuple, root: str | None) -> dict:
    from troubleshoot.probes.base import ProbeContext, run_probes

    ctx = ProbeContext()
    if root:
        from pathlib import Path

        ctx.root = Path(root)
    probes = [p for p in plugins.collect("troubleshoot_probes") if p.name in names]
    return run_probes(probes, ctx)


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
        from troubleshoot.fixes import executor

        if executor.confirm(f"Roll back {eid}?"):
            _print_undo(eid, executor.undo(eid))
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


def cmd_undo(args) -> int:
    from troubleshoot.fixes import executor, journal

    eid = args.id
    if eid is None:
        latest = journal.latest_to_undo()
        if latest is None:
            raise TroubleshootError("no applied fix to undo (see `troubleshoot history`)")
        eid = latest.id
        if not args.yes and not executor.confirm(f"Undo {eid} ({latest.data.get('title')})?"):
            raise TroubleshootError(f"not undone: no confirmation (answer y, or `troubleshoot undo {eid}`)")
    try:
        res = executor.undo(eid, force=args.force)
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


def cmd_history(args) -> int:
    from troubleshoot.fixes import journal

    rows = []
    for eid, e in journal.entries():
        if isinstance(e, str):
            rows.append({"id": eid, "status": "corrupt", "error": e})
        else:
            d = e.data
            rows.append({"id": eid, "fixer": d.get("fixer"), "title": d.get("title"), "status": d.get("status"),
                         "started": d.get("started"), "root": d.get("root"), "params": d.get("params"),
                         "verify": d.get("verify"), "rung": d.get("rung")})
    if args.format == "json":
        print(json.dumps({"schema": 1, "history": rows}, indent=2, default=str))
        return 0
    if not rows:
        print("No fixes applied yet.")
    for r in rows:
        where = f" under {r['root']}" if r.get("root") else ""
        print(terminal_safe(f"{r['id']:<52} {r['status']:<13} {r.get('title') or r.get('error')}{where}", False))
    return 0
