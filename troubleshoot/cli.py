"""Command-line front end. Parses arguments, calls the pipeline, renders; no diagnosis logic.

Every command exits 0 when it ran, 2 with one line `troubleshoot: error: ...` on bad usage or
unreadable input, and never shows a traceback for bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Sequence

from troubleshoot import __version__
from troubleshoot.errors import TroubleshootError

PROG = "troubleshoot"
MAX_WARNINGS = 12


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, no usage dump
        raise TroubleshootError(f"{message} (see `{self.prog} --help`)")


def _add_rules_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rules", metavar="DIR", action="append", default=[],
                   help="extra rule folder (repeatable); adds to, overrides or disables shipped rules")


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog=PROG, description="Diagnose failing or slow AI training jobs on NVIDIA GPUs.")
    ap.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    ap.add_argument("-p", dest="plugins", metavar="MODULE", action="append", default=[],
                    help="load a local plugin module (repeatable), as if installed by entry point")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    d = sub.add_parser("diagnose", help="diagnose a log (file, '-' or piped stdin)")
    d.add_argument("--log", metavar="PATH", action="append",
                   help="log file, folder of per-rank logs, glob, or '-' for stdin (default: stdin when "
                        "piped); repeatable: the logs of one job are diagnosed together")
    _add_rules_arg(d)
    d.add_argument("--format", choices=("text", "json", "markdown"), default="text")
    d.add_argument("--no-probe", action="store_true", help="do not probe this machine (log only)")
    d.add_argument("--snapshot", metavar="FILE", help="diagnose against a saved snapshot instead of this machine")
    d.add_argument("--python", metavar="PATH", help="interpreter whose frameworks to probe (a venv or conda env)")
    d.add_argument("--follow", metavar="PATH", help="follow a growing log: print new diagnoses as the job writes")
    d.add_argument("--pid", type=int, metavar="PID", help="watch a running job's process until it ends")
    d.add_argument("--all", action="store_true", help="text: show every diagnosis, not the top 5")
    d.add_argument("--color", choices=("auto", "always", "never"), default="auto")

    t = sub.add_parser("tui", help="the interactive terminal UI (also: troubleshoot with no command)")
    t.add_argument("--log", metavar="PATH", help="log file to diagnose")
    t.add_argument("--follow", metavar="PATH", help="follow a growing log; new diagnoses appear as it grows")
    t.add_argument("--snapshot", metavar="FILE", help="machine facts from a saved snapshot instead of probing")
    t.add_argument("--no-probe", action="store_true", help="do not probe this machine")
    t.add_argument("--root", metavar="DIR", help="apply fixes' file changes under DIR; run no commands")
    _add_rules_arg(t)

    pr = sub.add_parser("probe", help="read this machine (GPUs, driver, CUDA, frameworks, Docker, IO)")
    pr.add_argument("--format", choices=("text", "json"), default="text")
    pr.add_argument("--save", metavar="FILE", help="also save the snapshot as JSON to FILE")
    pr.add_argument("--redact", action="store_true",
                    help="replace hostnames, IP/MAC addresses, user names and home paths with placeholders")
    pr.add_argument("--python", metavar="PATH", help="interpreter whose frameworks to probe")

    from troubleshoot import cli_fix

    cli_fix.add_parsers(sub, _add_rules_arg)
    from troubleshoot import cli_run

    cli_run.add_parser(sub, _add_rules_arg)
    from troubleshoot import cli_fleet

    cli_fleet.add_parser(sub, _add_rules_arg, _Parser)

    r = sub.add_parser("rules", help="list, show, lint, test and trace rules")
    rsub = r.add_subparsers(dest="rules_command", metavar="SUBCOMMAND", parser_class=_Parser)
    for name, helptext in (("lint", "check rule files; file:line: message for each problem"),
                           ("test", "run every rule's examples"),
                           ("list", "list the effective rules and where each came from"),
                           ("patterns", "print every log pattern, one per line (ERE for grep -E -f)")):
        p = rsub.add_parser(name, help=helptext)
        _add_rules_arg(p)
        if name in ("list",):
            p.add_argument("--format", choices=("text", "json"), default="text")
        if name == "patterns":
            p.add_argument("--syntax", choices=("ere", "python"), default="ere")
    p = rsub.add_parser("show", help="show one rule")
    p.add_argument("id")
    _add_rules_arg(p)
    p = rsub.add_parser("why", help="trace why a rule did or did not fire on a log")
    p.add_argument("id")
    p.add_argument("--log", metavar="PATH", help="log file or '-'")
    p.add_argument("--snapshot", metavar="FILE", help="facts from a saved snapshot")
    _add_rules_arg(p)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
        if args.command == "diagnose":
            return cmd_diagnose(args)
        if args.command == "probe":
            return cmd_probe(args)
        if args.command in (None, "tui"):
            return cmd_tui(args)
        if args.command == "run":
            from troubleshoot import cli_run

            return cli_run.cmd_run(args, _plugins(args))
        if args.command in ("fixers", "fix", "undo", "history"):
            from troubleshoot import cli_fix

            if args.command == "undo":
                return cli_fix.cmd_undo(args)
            if args.command == "history":
                return cli_fix.cmd_history(args)
            plugins = _plugins(args)
            return cli_fix.cmd_fix(args, plugins) if args.command == "fix" else cli_fix.cmd_fixers(args, plugins)
        if args.command == "rules":
            return cmd_rules(args)
        if args.command == "fleet":
            from troubleshoot import cli_fleet

            return cli_fleet.cmd_fleet(args, _plugins(args))
    except TroubleshootError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `troubleshoot ... | head`: the reader left; not an error worth a traceback.
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0


def _warn_problems(ruleset) -> None:
    problems = ruleset.problems
    for p in problems[:MAX_WARNINGS]:
        print(f"{PROG}: warning: {p}", file=sys.stderr)
    if len(problems) > MAX_WARNINGS:
        print(f"{PROG}: warning: ... and {len(problems) - MAX_WARNINGS} more (run `troubleshoot rules lint`)",
              file=sys.stderr)


def _use_colour(choice: str) -> bool:
    if choice == "always":
        return True
    if choice == "never" or os.environ.get("NO_COLOR"):
        return False
    return sys.stdout.isatty()


def _plugins(args):
    from troubleshoot.plugins import load_plugins, warn

    plugins = load_plugins(args.plugins)
    warn(plugins.problems)
    plugins.problems.clear()
    return plugins


def _facts_sources(args, plugins) -> list:
    """Facts for a diagnosis: a saved snapshot, this machine's probes, or none (--no-probe)."""
    from troubleshoot import pipeline
    from troubleshoot.sources import FactsSource

    if getattr(args, "snapshot", None):
        from troubleshoot import snapshot

        loaded = snapshot.load(args.snapshot)
        for w in loaded.warnings:
            print(f"{PROG}: warning: {w}", file=sys.stderr)
        return [FactsSource(loaded.facts, f"snapshot {args.snapshot}")]
    if getattr(args, "no_probe", False):
        return []
    return [FactsSource(pipeline.probe(getattr(args, "python", None), plugins), "this machine")]


def cmd_diagnose(args) -> int:
    from troubleshoot import pipeline
    from troubleshoot.sources import Sources, log_sources

    if args.follow or args.pid is not None:
        from troubleshoot import cli_follow

        return cli_follow.follow(args, _plugins(args))
    specs = args.log or ([] if sys.stdin.isatty() else ["-"])
    if not specs and args.no_probe:
        raise TroubleshootError("nothing to diagnose: give a log (--log PATH, --log -, or pipe one), "
                                "or let troubleshoot probe this machine (drop --no-probe)")
    plugins = _plugins(args)
    ruleset = pipeline.load_rules(args.rules, plugins)
    logs = log_sources(specs)  # a bad path fails before seconds of probing
    facts = _facts_sources(args, plugins)
    result = pipeline.diagnose_sources(Sources(logs, facts), ruleset)
    _warn_problems(result.ruleset)
    facts_source = facts[0].origin if facts else None
    source = result.source if facts_source is None or logs else facts_source
    if args.format == "json":
        from troubleshoot.report import jsonfmt

        meta = {"source": result.source, "lines": result.lines, "facts": facts_source,
                "logs": result.logs, "summary": result.headline}
        sys.stdout.write(jsonfmt.render(result.diagnoses, meta))
    elif args.format == "markdown":
        from troubleshoot.report import markdown

        sys.stdout.write(markdown.render(result.diagnoses, source))
    else:
        from troubleshoot.report import text

        if result.headline:
            from troubleshoot.textsafe import terminal_safe

            sys.stdout.write(terminal_safe(result.headline) + "\n\n")
        sys.stdout.write(text.render(result.diagnoses, colour=_use_colour(args.color),
                                     limit=None if args.all else 5, source=source))
    return 0


def cmd_tui(args) -> int:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        if args.command is None:
            build_parser().print_help()
            return 0
        raise TroubleshootError("the TUI needs a terminal; use `troubleshoot diagnose` in scripts")
    from troubleshoot.tui.app import run_tui

    return run_tui(log=getattr(args, "log", None), snapshot=getattr(args, "snapshot", None),
                   rules=getattr(args, "rules", []), follow=getattr(args, "follow", None),
                   root=getattr(args, "root", None), probe=not getattr(args, "no_probe", False),
                   plugins=_plugins(args), fast_exit=True)


def cmd_probe(args) -> int:
    from troubleshoot import pipeline, snapshot
    from troubleshoot.fleet.collect import hang_if_asked

    hang_if_asked()
    snap = pipeline.probe(args.python, _plugins(args))
    if args.redact:
        snap = snapshot.redact(snap)
    if args.save:
        snapshot.save(snap, args.save)
        print(f"{PROG}: saved snapshot to {args.save}", file=sys.stderr)
    if args.format == "json":
        sys.stdout.write(json.dumps(snap, indent=2, default=str) + "\n")
    else:
        from troubleshoot.report import probe_text

        sys.stdout.write(probe_text.render(snap))
    return 0


def cmd_rules(args) -> int:
    sub = args.rules_command
    if sub is None:
        raise TroubleshootError("rules needs a subcommand: lint, test, list, show, why, patterns")
    if sub == "why":
        return cmd_why(args)
    from troubleshoot import pipeline

    plugins = _plugins(args)
    ruleset = pipeline.load_rules(args.rules, plugins)
    if sub == "lint":
        from troubleshoot.engine.lint import lint

        from troubleshoot import snapshot

        documented = set(snapshot.schema()["properties"])
        areas = frozenset(p.name for p in plugins.collect("troubleshoot_probes") if p.name not in documented)
        from troubleshoot.fixes.registry import load_fixers

        problems = lint(ruleset, extra_areas=areas, fixers=load_fixers(plugins))
        for p in problems:
            print(p)
        errors = [p for p in problems if p.level == "error"]
        sys.stdout.flush()
        print(f"{len(ruleset.rules)} rules, {len(errors)} errors, {len(problems) - len(errors)} warnings",
              file=sys.stderr)
        return 2 if errors else 0
    if sub == "test":
        from troubleshoot.engine.examples import check_examples

        _warn_problems(ruleset)
        from troubleshoot import paste

        checked, failures = check_examples(ruleset.rules, facts_of=lambda text: paste.read(text).facts)
        for f in failures:
            print(f)
        print(f"{checked} examples in {len(ruleset.rules)} rules: {checked - len(failures)} passed, {len(failures)} failed")
        return 1 if failures else 0
    if sub == "list":
        return _rules_list(ruleset, args.format)
    if sub == "show":
        return _rules_show(ruleset, args.id)
    if sub == "patterns":
        from troubleshoot.engine.ere import to_ere

        for r in ruleset.rules:
            for p in r.log:
                print(p.source if args.syntax == "python" else to_ere(p.regex))
        return 0
    raise TroubleshootError(f"unknown rules subcommand {sub!r}")  # pragma: no cover


def _rules_list(ruleset, fmt: str) -> int:
    rows = []
    for r in sorted(ruleset.rules, key=lambda r: (r.symptom, r.id)):
        rows.append({"id": r.id, "symptom": r.symptom, "severity": r.severity, "title": r.title,
                     "pack": r.origin.pack, "path": r.origin.path, "line": r.origin.line,
                     "overrides": [str(o) for o in ruleset.overridden.get(r.id, [])]})
    if fmt == "json":
        disabled = {k: str(v) for k, v in ruleset.disabled.items()}
        print(json.dumps({"schema": 1, "rules": rows, "disabled": disabled}, indent=2))
        return 0
    for row in rows:
        extra = f" (overrides {', '.join(row['overrides'])})" if row["overrides"] else ""
        print(f"{row['id']:<44} {row['symptom']:<26} {row['severity']:<8} {row['pack']}:{os.path.basename(row['path'])}:{row['line']}{extra}")
    for rid, origin in ruleset.disabled.items():
        print(f"{rid:<44} disabled by {origin}")
    print(f"{len(rows)} rules", file=sys.stderr)
    return 0


def _rules_show(ruleset, rule_id: str) -> int:
    r = ruleset.get(rule_id)
    if r is None:
        raise TroubleshootError(f"no rule with id {rule_id!r} (see `troubleshoot rules list`)")
    out = [f"{r.id}  ({r.origin}, pack {r.origin.pack})", f"  symptom:    {r.symptom}", f"  title:      {r.title}",
           f"  severity:   {r.severity}", f"  confidence: {r.confidence}"]
    if r.downstream_of:
        out.append(f"  downstream of: {', '.join(r.downstream_of)}")
    if r.refines:
        out.append(f"  refines:    {', '.join(r.refines)}")
    for label, pats in (("log", r.log), ("with_log", r.with_log), ("without_log", r.without_log)):
        for p in pats:
            out.append(f"  {label}: {p.source}")
    for c in r.facts:
        out.append(f"  facts: {c.source}")
    out.append("")
    out += ["  " + ln for ln in r.explain.splitlines()]
    for f in r.fixes:
        out.append(f"  fix: {f.fixer} {f.title} {dict(f.params)}")
    for ref in r.references:
        out.append(f"  reference: {ref}")
    out.append(f"  examples: {len(r.examples.match)} match, {len(r.examples.no_match)} no_match")
    print("\n".join(out))
    return 0


def cmd_why(args) -> int:
    from troubleshoot import pipeline
    from troubleshoot.engine.conditions import UNKNOWN

    log = args.log
    if log is None and not sys.stdin.isatty():
        log = "-"
    facts = None
    if args.snapshot:
        from troubleshoot import snapshot

        loaded = snapshot.load(args.snapshot)
        for w in loaded.warnings:
            print(f"{PROG}: warning: {w}", file=sys.stderr)
        facts = loaded.facts
    trace, _ = pipeline.why(args.id, log, args.rules, facts)
    r = trace.rule
    print(f"rule {r.id} ({r.origin}): {'FIRED' if trace.fired else 'did not fire'}: {trace.reason}")
    if r.log:
        print(f"  match.log: {trace.log_count} matching line(s)")
        for p in r.log:
            print(f"    pattern {p.source}")
        for h in trace.log_lines:
            print(f"    line {h.line}: {h.text}")
    for src, line in trace.with_log:
        print(f"  with_log {src}: " + (f"matched line {line}" if line else "no line matched"))
    for src, line in trace.without_log:
        print(f"  without_log {src}: " + (f"matched line {line} (vetoes the rule)" if line else "no line matched"))
    for c in trace.conditions:
        value = "unknown" if c.value is UNKNOWN else str(c.value).lower()
        print(f"  condition {c.source}: {value}")
        for path, v in c.reads:
            print(f"    {path} = {'(missing)' if path in c.missing else json.dumps(v, default=str)}")
    if trace.captures:
        print("  captures: " + ", ".join(f"{k}={v!r}" for k, v in trace.captures.items()))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
