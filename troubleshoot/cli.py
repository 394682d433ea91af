"""Command-line front end. Parses arguments, calls the pipeline, renders; no diagnosis logic.

Every command exits 0 when it ran, 2 with one line `troubleshoot: error: ...` on bad usage or
unreadable input, and never shows a traceback for bad input.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

from troubleshoot import __version__
from troubleshoot.errors import TroubleshootError
from troubleshoot.textsafe import terminal_safe

PROG = "troubleshoot"
MAX_WARNINGS = 12


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, no usage dump
        raise TroubleshootError(f"{message} (see `{self.prog} --help`)")


def _add_rules_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rules", metavar="DIR", action="append", default=[],
                   help="extra rule folder (repeatable); adds to, overrides or disables shipped rules")


PLUGIN_HELP = ("load a local plugin (repeatable), as if installed by entry point: a module name "
               "(found in the current folder too) or a file path like ./plugin.py")
FORMAT_HELP = {"text": "text: for people (default)", "json": "json: the stable contract for scripts (docs/json-output.md)",
               "markdown": "markdown: a report to paste into an issue"}


def format_help(*choices: str) -> str:
    return "; ".join(FORMAT_HELP.get(c, c) for c in choices)


def _add_plugin_arg(p: argparse.ArgumentParser, depth: int) -> None:
    # Accepted before and after each subcommand. A subcommand's parser fills its own namespace,
    # which argparse then copies over its parent's: each level needs a list of its own.
    p.add_argument("-p", "--plugin", dest=f"plugins_{depth}" if depth else "plugins", metavar="MODULE",
                   action="append", default=argparse.SUPPRESS if depth else [], help=PLUGIN_HELP)


def command_in(argv: Sequence[str]) -> str | None:
    """The subcommand `argv` names, where that is plain without parsing: only `-p MODULE` may
    come before it. None for anything else (`--help`, `--version`, a typo), which the whole
    parser then handles."""
    i = 0
    while i < len(argv):
        word = argv[i]
        if word in ("-p", "--plugin"):
            i += 2
        elif word.startswith("--plugin=") or (word.startswith("-p") and not word.startswith("--")):
            i += 1
        elif word.startswith("-"):
            return None
        else:
            return word if word in _COMMAND_NAMES else None
    return None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser; with `command` (see command_in), only that subcommand's: the
    other twenty cost every cold start 10-15 ms to build and are never used."""
    from troubleshoot import cli_help

    ap = _Parser(prog=PROG)
    ap.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    _add_plugin_arg(ap, 0)
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for names, add in _SUBCOMMANDS:
        if command is None or command in names:
            add(sub)
    for path, p in cli_help.subparsers(ap):
        if path:
            _add_plugin_arg(p, len(path))
    cli_help.apply(ap)
    return ap


def _add_diagnose(sub) -> None:
    d = sub.add_parser("diagnose", help="diagnose a log (file, '-' or piped stdin)")
    d.add_argument("--log", metavar="PATH", action="append",
                   help="log file, folder of per-rank logs, glob, or '-' for stdin (default: stdin when "
                        "piped); repeatable: the logs of one job are diagnosed together")
    _add_rules_arg(d)
    d.add_argument("--format", choices=("text", "json", "markdown"), default="text",
                   help=format_help("text", "json", "markdown"))
    d.add_argument("--fail-on", choices=("error", "warning", "info"), metavar="SEVERITY",
                   help="exit 1 when a diagnosis of SEVERITY (error, warning or info) or worse is found: "
                        "fails a CI step")
    d.add_argument("--no-probe", action="store_true", help="do not probe this machine (log only)")
    d.add_argument("--snapshot", metavar="FILE", help="diagnose against a saved snapshot instead of this machine")
    d.add_argument("--python", metavar="PATH", help="interpreter whose frameworks to probe (a venv or conda env)")
    d.add_argument("--follow", metavar="PATH", help="follow a growing log: print new diagnoses as the job writes")
    d.add_argument("--pid", type=int, metavar="PID", help="watch a running job's process until it ends")
    d.add_argument("--all", action="store_true", help="text: show every diagnosis, not the top 5")
    d.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                   help="text: colours and rendered Markdown on a terminal (auto), always, or plain text (never)")


def _add_tui(sub) -> None:
    t = sub.add_parser("tui", help="the interactive terminal UI (also: troubleshoot with no command)")
    t.add_argument("--log", metavar="PATH", help="log file to diagnose")
    t.add_argument("--follow", metavar="PATH", help="follow a growing log; new diagnoses appear as it grows")
    t.add_argument("--snapshot", metavar="FILE", help="machine facts from a saved snapshot instead of probing")
    t.add_argument("--no-probe", action="store_true", help="do not probe this machine")
    t.add_argument("--root", metavar="DIR", help="apply fixes' file changes under DIR; run no commands")
    _add_rules_arg(t)


def _add_probe(sub) -> None:
    pr = sub.add_parser("probe", help="read this machine (GPUs, driver, CUDA, frameworks, Docker, IO)")
    pr.add_argument("--format", choices=("text", "json"), default="text", help=format_help("text", "json"))
    pr.add_argument("--save", metavar="FILE", help="also save the snapshot as JSON to FILE")
    pr.add_argument("--redact", action="store_true",
                    help="replace hostnames, IP/MAC addresses, user names and home paths with placeholders")
    pr.add_argument("--python", metavar="PATH", help="interpreter whose frameworks to probe")


def _add_fix(sub) -> None:
    from troubleshoot import cli_fix

    cli_fix.add_parsers(sub, _add_rules_arg)


def _add_run(sub) -> None:
    from troubleshoot import cli_run

    cli_run.add_parser(sub, _add_rules_arg)


def _add_fleet(sub) -> None:
    from troubleshoot import cli_fleet

    cli_fleet.add_parser(sub, _add_rules_arg, _Parser)


def _add_rules(sub) -> None:
    r = sub.add_parser("rules", help="list, show, lint, test, trace and scaffold rules; list symptom ids")
    rsub = r.add_subparsers(dest="rules_command", metavar="SUBCOMMAND", parser_class=_Parser)
    for name, helptext in (("lint", "check rule files; file:line: message for each problem"),
                           ("test", "run every rule's examples"),
                           ("list", "list the effective rules and where each came from (the default)"),
                           ("symptoms", "list every symptom id (shipped and team) and where each comes from"),
                           ("patterns", "print every log pattern, one per line (ERE for grep -E -f)")):
        p = rsub.add_parser(name, help=helptext)
        _add_rules_arg(p)
        if name in ("list", "symptoms"):
            p.add_argument("--format", choices=("text", "json"), default="text", help=format_help("text", "json"))
        if name == "patterns":
            p.add_argument("--syntax", choices=("ere", "python"), default="ere",
                           help="ere: POSIX extended regexes for grep -E -f (default); python: as written in the rules")
    p = rsub.add_parser("show", help="show one rule")
    p.add_argument("id", metavar="RULE_ID", help="a rule id (see `troubleshoot rules list`)")
    _add_rules_arg(p)
    p = rsub.add_parser("why", help="trace why a rule did or did not fire on a log")
    p.add_argument("id", metavar="RULE_ID", help="a rule id (see `troubleshoot rules list`)")
    p.add_argument("--log", metavar="PATH", help="log file or '-' (default: stdin when piped)")
    p.add_argument("--snapshot", metavar="FILE", help="facts from a saved snapshot")
    _add_rules_arg(p)
    p = rsub.add_parser("new", help="scaffold a rule file from a pasted log line")
    p.add_argument("line", metavar="LOG_LINE", help="the log line the rule should match ('-': read it from stdin)")
    p.add_argument("--id", metavar="RULE_ID", help="the new rule's id (default: team- and words of the line)")
    p.add_argument("--symptom", metavar="SYMPTOM", help="its symptom id (see `troubleshoot rules symptoms`)")
    p.add_argument("--out", metavar="FILE", help="write the rule file here (default: print it; with --rules DIR: "
                                                  "DIR/RULE_ID.yaml)")
    _add_rules_arg(p)


# In the order `--help` lists them; each adds the subcommands it names.
_SUBCOMMANDS = ((("diagnose",), _add_diagnose), (("tui",), _add_tui), (("probe",), _add_probe),
                (("fixers", "fix", "undo", "history"), _add_fix), (("run",), _add_run), (("fleet",), _add_fleet),
                (("rules",), _add_rules))
_COMMAND_NAMES = frozenset(n for names, _ in _SUBCOMMANDS for n in names)


# Commands whose files are all written and closed before they return: the `troubleshoot`
# command leaves them without the interpreter's teardown (see `entry`).
QUICK_EXIT = frozenset({"diagnose", "probe", "run"})
_last_command: str | None = None  # what main() ran, for entry()


def entry() -> None:
    """The `troubleshoot` executable: main(), then exit. After diagnose, probe and run the
    interpreter's teardown (freeing every object and module one by one: 15-35 ms, a tenth of a
    small diagnosis, all of it memory the kernel takes back at once) is skipped: atexit
    handlers still run and the standard streams are flushed first. Anything that could lose
    data takes the ordinary exit: another command, a thread still running that is not a
    daemon, a stream that cannot be flushed."""
    code = main()
    if _last_command in QUICK_EXIT:
        import threading

        if all(t.daemon or t is threading.main_thread() for t in threading.enumerate()):
            import atexit

            atexit._run_exitfuncs()  # private, but the one way to run them as exit would
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except (OSError, ValueError):
                sys.exit(code)  # Python reports the failed flush and sets the exit status, as usual
            os._exit(code)
    sys.exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    global _last_command
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser(command_in(argv)).parse_args(argv)
        _last_command = args.command
        args.plugins = args.plugins + [m for depth in (1, 2) for m in getattr(args, f"plugins_{depth}", [])]
        from troubleshoot import cli_paths

        # fleet's --python is a path on each node, not here
        cli_paths.check(args, skip=("python",) if args.command == "fleet" else ())
        if args.command == "diagnose":
            return cmd_diagnose(args)
        if args.command == "probe":
            return cmd_probe(args)
        if args.command in (None, "tui"):
            return cmd_tui(args)
        if args.command == "run":
            from troubleshoot import cli_run

            # Installed plugins load once the job runs; a -p plugin that fails stops it before.
            return cli_run.cmd_run(args, _plugins(args) if args.plugins else None)
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
    except TroubleshootError as exc:  # the one place errors are printed: what they quote is data
        print(f"{PROG}: error: {terminal_safe(str(exc), keep_newlines=False)}", file=sys.stderr)
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


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def command_line(*words: str, args=None) -> str:
    """A command to print as a hint, repeating the --rules/-p of this one so that it copy-pastes."""
    import shlex

    return shlex.join(["troubleshoot", *words, *(_hint_args(args) if args is not None else [])])


def print_warning(message: object) -> None:
    """One line on stderr; the file names, keys and values it quotes are data."""
    print(f"{PROG}: warning: {terminal_safe(str(message), keep_newlines=False)}", file=sys.stderr)


def _warn_problems(ruleset, args=None) -> None:
    problems = ruleset.problems
    for p in problems[:MAX_WARNINGS]:
        if p.level == "error":
            print_warning(p)
        else:  # a warning says so itself
            print(f"{PROG}: {terminal_safe(str(p), keep_newlines=False)}", file=sys.stderr)
    if len(problems) > MAX_WARNINGS:
        print_warning(f"... and {len(problems) - MAX_WARNINGS} more (run `{command_line('rules', 'lint', args=args)}`)")


def _use_rich(choice: str) -> bool:
    """Markdown rendered for a terminal (Rich); plain text without its marks when piped or `never`."""
    if choice == "always":
        return True
    return choice != "never" and sys.stdout.isatty()


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
    plugins.report = lambda problem: warn([problem])
    return plugins


def _facts_sources(args, plugins) -> list:
    """Facts for a diagnosis: a saved snapshot, this machine's probes, or none (--no-probe)."""
    from troubleshoot import pipeline
    from troubleshoot.sources import FactsSource

    if getattr(args, "snapshot", None):
        from troubleshoot import snapshot

        loaded = snapshot.load(args.snapshot)
        for w in loaded.warnings:
            print_warning(w)
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
    _warn_problems(result.ruleset, args)
    facts_source = facts[0].origin if facts else None
    source = result.source if facts_source is None or logs else facts_source
    if args.format == "json":
        from troubleshoot.report import jsonfmt

        meta = {"source": result.source, "lines": result.lines, "facts": facts_source,
                "logs": result.logs, "summary": result.headline}
        sys.stdout.write(jsonfmt.render(result.diagnoses, meta))
    elif args.format == "markdown":
        from troubleshoot.report import markdown

        sys.stdout.write(terminal_safe(markdown.render(result.diagnoses, source)))
    else:
        from troubleshoot.report import text

        if result.headline:
            sys.stdout.write(terminal_safe(result.headline) + "\n\n")
        sys.stdout.write(text.render(result.diagnoses, colour=_use_colour(args.color),
                                     limit=None if args.all else 5, source=source,
                                     hint_args=_hint_args(args), rich=_use_rich(args.color)))
    return _fail_on(args.fail_on, result.diagnoses)


def _fail_on(threshold: str | None, diagnoses) -> int:
    """1 when a diagnosis is at least as severe as `threshold` (SEVERITIES runs worst first)."""
    from troubleshoot.model import SEVERITIES

    if threshold is None:
        return 0
    worst = SEVERITIES.index(threshold)
    return 1 if any(SEVERITIES.index(d.severity) <= worst for d in diagnoses) else 0


def _hint_args(args) -> list[str]:
    """The options a printed command line must repeat to see the same rules and plugins."""
    out: list[str] = []
    for d in getattr(args, "rules", None) or []:
        out += ["--rules", d]
    for p in getattr(args, "plugins", None) or []:
        out += ["-p", p]
    return out


def cmd_tui(args) -> int:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        if args.command is None:
            build_parser().print_help()
            return 0
        raise TroubleshootError("the TUI needs a terminal; use `troubleshoot diagnose` in scripts")
    from troubleshoot.tui.early import EarlyKeys

    early = EarlyKeys.start(sys.stdin.fileno())  # `q` works from here on, before Textual is imported
    try:
        from troubleshoot.tui.app import run_tui

        return run_tui(log=getattr(args, "log", None), snapshot=getattr(args, "snapshot", None),
                       rules=getattr(args, "rules", []), follow=getattr(args, "follow", None),
                       root=getattr(args, "root", None), probe=not getattr(args, "no_probe", False),
                       plugins=_plugins(args), fast_exit=True, early=early)
    finally:
        if early is not None:
            early.finish()


def cmd_probe(args) -> int:
    import json

    from troubleshoot import pipeline, snapshot
    from troubleshoot.fleet.collect import hang_if_asked

    hang_if_asked()
    snap = pipeline.probe(args.python, _plugins(args))
    if args.redact:
        snap = snapshot.redact(snap)
    if args.save:
        snapshot.save(snap, args.save)
        print(f"{PROG}: saved snapshot to {terminal_safe(args.save, keep_newlines=False)}", file=sys.stderr)
    if args.format == "json":
        sys.stdout.write(json.dumps(snap, indent=2, default=str) + "\n")
    else:
        from troubleshoot.report import probe_text

        sys.stdout.write(terminal_safe(probe_text.render(snap)))  # this machine's names and values are data
    return 0


def cmd_rules(args) -> int:
    sub = args.rules_command
    if sub is None:
        # Like `fixers`: the group's read-only listing is what someone exploring it wants to see;
        # the other subcommands need arguments or change nothing without them.
        sub, args.rules, args.format = "list", [], "text"
    if sub == "why":
        return cmd_why(args, _plugins(args))
    if sub == "new":
        from troubleshoot import cli_rules_new

        return cli_rules_new.cmd_new(args, _plugins(args))
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
            print(terminal_safe(str(p), keep_newlines=False))
        errors = [p for p in problems if p.level == "error"]
        sys.stdout.flush()
        print(f"{plural(len(ruleset.rules), 'rule')}, {plural(len(errors), 'error')}, "
              f"{plural(len(problems) - len(errors), 'warning')}", file=sys.stderr)
        return 2 if errors else 0
    if sub == "test":
        from troubleshoot.engine.examples import check_examples

        _warn_problems(ruleset, args)
        from troubleshoot import paste

        checked, failures = check_examples(ruleset.rules, facts_of=lambda text: paste.read(text).facts)
        for f in failures:
            print(terminal_safe(str(f)))
        # A rule that did not load has no examples to fail: its file must fail the run instead.
        broken = sorted({terminal_safe(str(p.path), keep_newlines=False) for p in ruleset.errors})
        print(f"{plural(checked, 'example')} in {plural(len(ruleset.rules), 'rule')}: {checked - len(failures)} passed, "
              f"{len(failures)} failed" + (f"; {plural(len(broken), 'rule file')} did not load (or lost rules): "
                                           f"{', '.join(broken)}" if broken else ""))
        return 1 if failures or broken else 0
    if sub == "list":
        _warn_problems(ruleset, args)
        return _rules_list(ruleset, args.format)
    if sub == "symptoms":
        _warn_problems(ruleset, args)
        return _rules_symptoms(ruleset, args.format)
    if sub == "show":
        return _rules_show(ruleset, args.id, args)
    if sub == "patterns":
        return _rules_patterns(ruleset, args.syntax)
    raise TroubleshootError(f"unknown rules subcommand {sub!r}")  # pragma: no cover


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
        print(terminal_safe(f"{row['id']:<44} {row['symptom']:<26} {row['severity']:<8} {row['pack']}:"
                            f"{os.path.basename(row['path'])}:{row['line']}{extra}", keep_newlines=False))
    for rid, origin in ruleset.disabled.items():
        print(terminal_safe(f"{rid:<44} disabled by {origin}", keep_newlines=False))
    print(plural(len(rows), "rule"), file=sys.stderr)
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


def _rules_show(ruleset, rule_id: str, args=None) -> int:
    r = ruleset.get(rule_id)
    if r is None:
        raise TroubleshootError(f"no rule with id {rule_id!r} (see `{command_line('rules', 'list', args=args)}`)")
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
    if r.fixes:
        out += ["", "  fixes:"]
    for f in r.fixes:
        out.append(f"  - {f.fixer}" + (f": {f.title}" if f.title else ""))
        out += _param_lines(f.params, "      ")
    if r.references:
        out += ["", "  references:"]
    out += [f"  - {ref}" for ref in r.references]
    out.append(f"  examples: {len(r.examples.match)} match, {len(r.examples.no_match)} no_match")
    print(terminal_safe("\n".join(out)))  # rule files are data, like logs
    return 0


def _param_lines(params: dict, indent: str) -> list[str]:
    """`name: value` per parameter; a multi-line text as an indented block, other values as JSON."""
    import json

    out = []
    for k, v in params.items():
        if isinstance(v, str) and "\n" in v.strip():
            out.append(f"{indent}{k}: |")
            out += [f"{indent}  {ln}" for ln in v.strip().splitlines()]
        else:
            out.append(f"{indent}{k}: {v if isinstance(v, str) else json.dumps(v)}")
    return out


def cmd_why(args, plugins=None) -> int:
    from troubleshoot import pipeline

    log = args.log
    if log is None and not sys.stdin.isatty():
        log = "-"
    facts = None
    if args.snapshot:
        from troubleshoot import snapshot

        loaded = snapshot.load(args.snapshot)
        for w in loaded.warnings:
            print_warning(w)
        facts = loaded.facts
    trace, _ = pipeline.why(args.id, log, args.rules, facts, plugins)
    for line in _why_lines(trace):
        print(terminal_safe(line, keep_newlines=False))  # rule files, log lines and facts are data
    return 0


def _why_lines(trace) -> list[str]:
    """The trace of `rules why`, one line each."""
    import json

    from troubleshoot.engine.conditions import UNKNOWN

    r = trace.rule
    verdict = "fired" if trace.fired else "did not fire"
    out = [f"rule {r.id} ({r.origin}): {verdict}" + (f": {trace.reason}" if trace.reason != verdict else "")]
    if r.log:
        out.append(f"  match.log: {trace.log_count} matching line(s)")
        out += [f"    pattern {p.source}" for p in r.log]
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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
