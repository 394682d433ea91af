"""Command-line front end: the parser of every command, `main`, and the one place errors are
printed. `main` builds the command's `context.CommandContext` once from the parsed options and
hands it to the command's module (cli_diagnose, cli_rules, cli_fix, cli_run, cli_fleet), which
asks it for logs, facts and rules, calls the pipeline or the fix service, and renders.

Every command exits 0 when it ran, 2 with one line `troubleshoot: error: ...` on bad usage or
unreadable input, and never shows a traceback for bad input.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence  # not typing: 4 ms of every start, `--version`'s too

from troubleshoot import __version__
from troubleshoot.console import PROG, format_help, print_warning
from troubleshoot.errors import TroubleshootError
from troubleshoot.textsafe import terminal_safe



class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, no usage dump
        raise TroubleshootError(f"{message} (see `{self.prog} --help`)")


def _add_rules_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rules", metavar="DIR", action="append", default=[],
                   help="extra rule folder (repeatable); adds to, overrides or disables shipped rules")


PLUGIN_HELP = ("load a local plugin (repeatable), as if installed by entry point: a module name "
               "(found in the current folder too) or a file path like ./plugin.py")
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
# The TUI (`tui`, or no command on a terminal): `q` never waits for a probe still running.
LEAVE_AT_ONCE = frozenset({"tui", None})
_last_command: str | None = None  # what main() ran, for entry()


def entry() -> None:
    """The `troubleshoot` executable. The process-wide settings a program may make, and a
    library it imports must not, are made here and only here, each with its reason; then
    main(); then the exit.

    After diagnose, probe and run the interpreter's teardown (freeing every object and module
    one by one: 15-35 ms, a tenth of a small diagnosis, all of it memory the kernel takes back
    at once) is skipped: atexit handlers still run and the standard streams are flushed first.
    Anything that could lose data takes the ordinary exit: another command, a thread still
    running that is not a daemon, a stream that cannot be flushed. The TUI leaves at once,
    whatever its background jobs are doing (~1 s of teardown with rules and a scan in memory)."""
    if not _asks_only(sys.argv[1:]):
        _process_settings(command_in(sys.argv[1:]))
    code = main()
    _compile_for_next_run()
    if _last_command in LEAVE_AT_ONCE:
        _flush_and_leave(code)
    if _last_command in QUICK_EXIT:
        import threading

        if all(t.daemon or t is threading.main_thread() for t in threading.enumerate()):
            import atexit

            atexit._run_exitfuncs()  # private, but the one way to run them as exit would
            _flush_and_leave(code)
    sys.exit(code)


def _asks_only(argv: Sequence[str]) -> bool:
    """`--version`, or `--help` before any command: a question answered from the parser alone,
    which needs none of the settings a scan or the TUI wants (ctypes alone costs a start 5 ms)."""
    return command_in(argv) is None and any(a in ("--version", "-h", "--help") for a in argv)


def _process_settings(command: str | None) -> None:
    """Settings of the whole process, for this program only."""
    from troubleshoot import scan

    # glibc serves the chunk-sized blocks of a scan from fresh mmaps and returns them on free:
    # a third of a large scan's CPU was faulting in new pages (scan.reader.tune_allocator).
    scan.tune_allocator()
    if command in LEAVE_AT_ONCE:
        # Background jobs (ten probes, a scan) hold the GIL in turns; the default 5 ms hand-over
        # makes every step of handling a key wait behind them. A shorter one keeps keys responsive.
        sys.setswitchinterval(0.0005)


def _compile_for_next_run() -> None:
    """A scan that went without the hyperscan database (not cached, an input too small to repay
    compiling it first) has it compiled for the next run by a detached process at the lowest
    priority (scan.hsdb.compile_later): one program-level decision, made only where the process
    can fork safely (one thread)."""
    hsdb = sys.modules.get("troubleshoot.scan.hsdb")
    if hsdb is None or not hsdb.wanted():
        return
    from troubleshoot.scan import children

    if children.forkable():
        hsdb.compile_later()


def _flush_and_leave(code: int) -> None:
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        sys.exit(code)  # Python reports the failed flush and sets the exit status, as usual
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    global _last_command
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv == ["--version"]:
        # Answered before any parser: argparse's version action formats it as help text, which
        # loads shutil, textwrap and locale (three times the rest of the answer).
        sys.stdout.write(f"{PROG} {__version__}\n")
        return 0
    try:
        args = build_parser(command_in(argv)).parse_args(argv)
        _last_command = args.command
        args.plugins = args.plugins + [m for depth in (1, 2) for m in getattr(args, f"plugins_{depth}", [])]
        from troubleshoot import cli_paths

        # fleet's --python is a path on each node, not here
        cli_paths.check(args, skip=("python",) if args.command == "fleet" else ())
        from troubleshoot import context

        return _dispatch(args, context.build(args, warn=print_warning))
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


def _dispatch(args, ctx) -> int:
    """The command's module, given its context (built once, in main)."""
    command = args.command
    if command is None and not (sys.stdin.isatty() and sys.stdout.isatty()):
        build_parser().print_help()  # no command, in a script: what there is to run
        return 0
    if command in ("diagnose", "probe", "tui", None):
        from troubleshoot import cli_diagnose

        run = {"diagnose": cli_diagnose.cmd_diagnose, "probe": cli_diagnose.cmd_probe}.get(command)
        return (run or cli_diagnose.cmd_tui)(args, ctx)
    if command == "run":
        from troubleshoot import cli_run

        return cli_run.cmd_run(args, ctx)
    if command in ("fixers", "fix", "undo", "history"):
        from troubleshoot import cli_fix

        run = {"fixers": cli_fix.cmd_fixers, "fix": cli_fix.cmd_fix, "undo": cli_fix.cmd_undo,
               "history": cli_fix.cmd_history}[command]
        return run(args, ctx)
    if command == "rules":
        from troubleshoot import cli_rules

        return cli_rules.cmd_rules(args, ctx)
    from troubleshoot import cli_fleet

    return cli_fleet.cmd_fleet(args, ctx)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
