"""`troubleshoot rules list|show|why|lint|test|patterns|symptoms`: their parsers, and the rules
of the command's context, rendered. `rules new` is in cli_rules_new (its parser is here)."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from troubleshoot.console import format_help, plural, warn_problems
from troubleshoot.errors import TroubleshootError
from troubleshoot.textsafe import terminal_safe

if TYPE_CHECKING:
    from troubleshoot.context import CommandContext


def add_parser(sub, add_rules_arg, parser_class) -> None:
    r = sub.add_parser("rules", help="list, show, lint, test, trace and scaffold rules; list symptom ids")
    rsub = r.add_subparsers(dest="rules_command", metavar="SUBCOMMAND", parser_class=parser_class)
    for name, helptext in (("lint", "check rule files; file:line: message for each problem"),
                           ("test", "run the rules' examples (with --rules: those folders' rules alone)"),
                           ("list", "list the effective rules and where each came from (the default)"),
                           ("symptoms", "list every symptom id (shipped and team) and where each comes from"),
                           ("patterns", "print every log pattern, one per line (ERE for grep -E -f)")):
        p = rsub.add_parser(name, help=helptext)
        add_rules_arg(p)
        if name in ("list", "symptoms"):
            p.add_argument("--format", choices=("text", "json"), default="text", help=format_help("text", "json"))
        if name == "test":
            p.add_argument("--all", action="store_true",
                           help="with --rules: test every effective rule, not only the rules of those folders")
        if name == "patterns":
            p.add_argument("--syntax", choices=("ere", "python"), default="ere",
                           help="ere: POSIX extended regexes for grep -E -f (default); python: as written in the rules")
    p = rsub.add_parser("show", help="show one rule")
    p.add_argument("id", metavar="RULE_ID", help="a rule id (see `troubleshoot rules list`)")
    add_rules_arg(p)
    p = rsub.add_parser("why", help="trace why a rule did or did not fire on a log")
    p.add_argument("id", metavar="RULE_ID", help="a rule id (see `troubleshoot rules list`)")
    p.add_argument("--log", metavar="PATH", help="log file or '-' (default: stdin when piped)")
    p.add_argument("--snapshot", metavar="FILE", help="facts from a saved snapshot")
    p.add_argument("--no-probe", action="store_true",
                   help="no machine facts (so is the default without --snapshot: this machine is never probed)")
    add_rules_arg(p)
    p = rsub.add_parser("new", help="scaffold a rule file from a pasted log line")
    p.add_argument("line", metavar="LOG_LINE", help="the log line the rule should match ('-': read it from stdin)")
    p.add_argument("--id", metavar="RULE_ID", help="the new rule's id (default: team- and words of the line)")
    p.add_argument("--symptom", metavar="SYMPTOM", help="its symptom id (see `troubleshoot rules symptoms`)")
    p.add_argument("--out", metavar="FILE", help="write the rule file here (default: print it; with --rules DIR: "
                                                  "DIR/RULE_ID.yaml)")
    add_rules_arg(p)


def cmd_rules(args, ctx: CommandContext) -> int:
    sub = args.rules_command
    if sub is None:
        # Like `fixers`: the group's read-only listing is what someone exploring it wants to see;
        # the other subcommands need arguments or change nothing without them.
        sub, args.format = "list", "text"
    if sub == "why":
        return cmd_why(args, ctx)
    if sub == "new":
        from troubleshoot import cli_rules_new

        return cli_rules_new.cmd_new(args, ctx)
    ruleset = ctx.ruleset()
    if sub == "lint":
        return _rules_lint(ctx)
    if sub == "test":
        return _rules_test(ctx, everything=args.all)
    if sub in ("list", "symptoms"):
        warn_problems(ruleset, ctx)
        return _rules_list(ruleset, args.format) if sub == "list" else _rules_symptoms(ruleset, args.format)
    if sub == "show":
        return _rules_show(ctx, args.id)
    if sub == "patterns":
        return _rules_patterns(ruleset, args.syntax)
    raise TroubleshootError(f"unknown rules subcommand {sub!r}")  # pragma: no cover


def _rules_lint(ctx: CommandContext) -> int:
    problems = ctx.lint()
    for p in problems:
        print(terminal_safe(str(p), keep_newlines=False))
    errors = [p for p in problems if p.level == "error"]
    sys.stdout.flush()
    print(f"{plural(len(ctx.ruleset().rules), 'rule')}, {plural(len(errors), 'error')}, "
          f"{plural(len(problems) - len(errors), 'warning')}", file=sys.stderr)
    return 2 if errors else 0


def _rules_test(ctx: CommandContext, everything: bool) -> int:
    """The examples of every effective rule; with --rules (and not --all), of the rules those
    folders define alone: a team tests its own folder, not the 900 shipped examples."""
    from troubleshoot import paste
    from troubleshoot.engine.examples import check_examples

    ruleset = ctx.ruleset()
    warn_problems(ruleset, ctx)
    rules, errors = ruleset.rules, ruleset.errors
    folders = ctx.options.rule_dirs
    if folders and not everything:
        rules = [r for r in rules if r.origin.pack in folders]  # a --rules folder's pack is named as given
        errors = [p for p in errors if _inside(str(p.path), folders)]
    checked, failures = check_examples(rules, facts_of=lambda text: paste.read(text).facts)
    for f in failures:
        print(terminal_safe(str(f)))
    # A rule that did not load has no examples to fail: its file must fail the run instead.
    broken = sorted({terminal_safe(str(p.path), keep_newlines=False) for p in errors})
    print(f"{plural(checked, 'example')} in {plural(len(rules), 'rule')}: {checked - len(failures)} passed, "
          f"{len(failures)} failed" + (f"; {plural(len(broken), 'rule file')} did not load (or lost rules): "
                                       f"{', '.join(broken)}" if broken else ""))
    return 1 if failures or broken else 0


def _inside(path: str, folders) -> bool:
    """Whether `path` is one of `folders` (a --rules value may name one rule file) or inside one."""
    here = os.path.abspath(path)
    return any(here == (top := os.path.abspath(f)) or here.startswith(top.rstrip(os.sep) + os.sep) for f in folders)


def _rules_patterns(ruleset, syntax: str) -> int:
    """One pattern a line. Piped, as written (`grep -E -f` needs each byte of a pattern); on a
    terminal, its control characters are shown, not obeyed."""
    from troubleshoot.engine.ere import to_ere

    shown = (lambda p: terminal_safe(p, keep_newlines=False)) if sys.stdout.isatty() else (lambda p: p)
    for r in ruleset.rules:
        for p in r.log:
            print(shown(p.source if syntax == "python" else to_ere(p.regex)))
    return 0


def _rules_list(ruleset, fmt: str) -> int:
    import json

    from troubleshoot.report.ruleview import rule_view

    rules = sorted(ruleset.rules, key=lambda r: (r.symptom, r.id))
    views = [rule_view(r, ruleset.overridden.get(r.id, [])) for r in rules]
    if fmt == "json":
        disabled = {k: str(v) for k, v in ruleset.disabled.items()}
        print(json.dumps({"schema": 1, "rules": [v.record for v in views], "disabled": disabled}, indent=2))
        return 0
    for v in views:
        extra = f" (overrides {', '.join(v.overrides)})" if v.overrides else ""
        print(f"{v.id:<44} {v.symptom:<26} {v.severity:<8} {v.pack}:{os.path.basename(v.path)}:{v.line}{extra}")
    for rid, origin in ruleset.disabled.items():
        print(terminal_safe(f"{rid:<44} disabled by {origin}", keep_newlines=False))
    print(plural(len(views), "rule"), file=sys.stderr)
    return 0


def _rules_symptoms(ruleset, fmt: str) -> int:
    import json

    rows = []
    for sid, desc in ruleset.taxonomy.items():
        origin = ruleset.symptom_origins.get(sid)
        rows.append({"id": sid, "description": desc, "pack": origin.pack if origin else "shipped",
                     "path": origin.path if origin else None, "line": origin.line if origin else None})
    if fmt == "json":
        print(json.dumps({"schema": 1, "symptoms": rows}, indent=2))
        return 0
    for row in rows:
        where = f"{row['path']}:{row['line']}" if row["path"] else "shipped"
        print(terminal_safe(f"{row['id']:<30} {where}  {row['description']}", keep_newlines=False))
    team = sum(1 for r in rows if r["path"])
    print(f"{plural(len(rows), 'symptom')} ({team} from team folders)", file=sys.stderr)
    return 0


def _rules_show(ctx: CommandContext, rule_id: str) -> int:
    from troubleshoot.report.ruleview import rule_view

    print("\n".join(show_lines(rule_view(ctx.rule(rule_id)))))
    return 0


def show_lines(v) -> list[str]:
    """`rules show`: the rule as its file defines it, placeholders and all (report.ruleview.RuleView)."""
    out = [f"{v.id}  ({v.origin}, pack {v.pack})", f"  symptom:    {v.symptom}", f"  title:      {v.title}",
           f"  severity:   {v.severity}", f"  confidence: {v.confidence}"]
    if v.downstream_of:
        out.append(f"  downstream of: {', '.join(v.downstream_of)}")
    if v.refines:
        out.append(f"  refines:    {', '.join(v.refines)}")
    out += [f"  {label}: {source}" for label, source in v.patterns]
    out += [f"  facts: {source}" for source in v.facts]
    out.append("")
    out += ["  " + ln for ln in v.explain.splitlines()]
    if v.fixes:
        out += ["", "  fixes:"]
    for f in v.fixes:
        out.append(f"  - {f.fixer}" + (f": {f.title}" if f.title else ""))
        for k, value in f.params:  # a multi-line text as an indented block
            if "\n" in value.strip():
                out.append(f"      {k}: |")
                out += [f"        {ln}" for ln in value.strip().splitlines()]
            else:
                out.append(f"      {k}: {value}")
    if v.references:
        out += ["", "  references:"]
    out += [f"  - {ref}" for ref in v.references]
    matching = sum(1 for kind, _ in v.examples if kind == "must match")
    out.append(f"  examples: {matching} match, {len(v.examples) - matching} no_match")
    return out


def cmd_why(args, ctx: CommandContext) -> int:
    """How one rule did or did not fire on one log (a file or stdin) and the --snapshot's facts."""
    from troubleshoot import pipeline
    from troubleshoot.sources import LogSource, check_readable, nothing_to_diagnose, skipped_input, sniff_file

    rule = ctx.rule(args.id)
    log = None  # one file or stdin: a trace shows one log's lines
    if args.log not in (None, "-"):
        check_readable(args.log)
        log = LogSource(args.log, args.log)
        binary = sniff_file(args.log)  # as diagnose judges it: a trace of a binary's "lines" says nothing
        if binary:
            raise TroubleshootError(nothing_to_diagnose([skipped_input(log, binary)]))
    elif args.log == "-" or ctx.stdin_log:
        log = LogSource("stdin")
    # The facts of a snapshot only: a trace is about the rule, not this machine (--no-probe,
    # accepted as diagnose takes it, asks for what is done anyway).
    facts = ctx.machine().facts if ctx.options.snapshot else None
    trace = pipeline.why(rule, log, facts)
    for line in _why_lines(trace):
        print(terminal_safe(line, keep_newlines=False))  # rule files, log lines and facts are data
    return 0


def _why_lines(trace) -> list[str]:
    """The trace of `rules why`, one line each."""
    import json

    from troubleshoot.engine.conditions import UNKNOWN
    from troubleshoot.model import as_written

    r = trace.rule
    verdict = "fired" if trace.fired else "did not fire"
    out = [f"rule {r.id} ({r.origin}): {verdict}" + (f": {trace.reason}" if trace.reason != verdict else "")]
    if r.log:
        out.append(f"  match.log: {trace.log_count} matching line{'' if trace.log_count == 1 else 's'}")
        out += [f"    pattern {src}" for src in as_written(r.log)]
        out += [f"    line {h.line}: {h.text}" for h in trace.log_lines]
    for src, line in trace.with_log:
        out.append(f"  with_log {src}: " + (f"matched line {line}" if line else "no line matched"))
    for src, line in trace.without_log:
        out.append(f"  without_log {src}: " + (f"matched line {line} (vetoes the rule)" if line else "no line matched"))
    for c in trace.conditions:
        value = "unknown" if c.value is UNKNOWN else str(c.value).lower()
        out.append(f"  condition {c.source}: {value}")
        for path, v in c.reads:
            out.append(f"    {path} = {'(missing)' if path in c.missing else json.dumps(v, default=str)}")
    if trace.captures:
        out.append("  captures: " + ", ".join(f"{k}={v!r}" for k, v in trace.captures.items()))
    return out
