"""Command-line front end: the parser of every command, `main`, and the one place errors are
printed. `main` builds the command's `context.CommandContext` once from the parsed options and
hands it to the command's module (cli_diagnose, cli_rules, cli_fix, cli_run, cli_fleet), which
asks it for logs, facts and rules, calls the pipeline or the fix service, and renders.

Every command exits 0 when it ran, 2 with one line `troubleshoot: error: ...` on bad usage or
unreadable input, 130 when interrupted, and never shows a traceback for bad input (the other
statuses, `--fail-on`'s 1 and `run`'s job's own, are listed in cli_help.EXIT_STATUS).

Habits from other tools hold: `-p` and `--rules` are taken before and after the command, logs
are taken as arguments (`diagnose a.log b.log`), and a misspelt option, command or choice is
answered with the closest one and the help of the command it was given to.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence  # not typing: 4 ms of every start, `--version`'s too

from troubleshoot import __version__
from troubleshoot.console import PROG, did_you_mean, format_help, print_warning
from troubleshoot.errors import TroubleshootError
from troubleshoot.textsafe import terminal_safe


class _Parser(argparse.ArgumentParser):
    """argparse's parser, with one-line errors that name the help of the command at fault."""

    # An argument that is no option's value is read as this option, where it stands
    # (`diagnose a.log --no-probe b.log`): argparse takes a list positional only once.
    arguments_as: str | None = None

    def _get_formatter(self):
        # argparse builds a formatter for every argument added, only to check its metavar, and
        # the formatter asks shutil for the terminal's width: 2 ms of every start, for shutil.
        return self.formatter_class(prog=self.prog, width=_columns() - 2)

    def error(self, message: str):  # one line, no usage dump
        raise TroubleshootError(f"{message} (see `{self.prog} --help`)")

    def parse_known_args(self, args=None, namespace=None):
        if self.arguments_as is not None and args is not None:
            args = _arguments_as(self, list(args), self.arguments_as)
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            # Here, not in the parser of the command above: the help to see is this command's.
            known = [s for a in self._actions for s in a.option_strings if s.startswith("--")]
            options = [w.partition("=")[0] for w in extras if w.startswith("-")]
            hints = "".join(dict.fromkeys(did_you_mean(w, known) for w in options))
            self.error(f"unrecognized arguments: {' '.join(extras)}{hints}")
        return namespace, extras

    def _check_value(self, action, value):
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError as exc:  # `diagnoes`, `--format jsno`: the closest choice
            hint = did_you_mean(value, map(str, action.choices)) if isinstance(value, str) and action.choices else ""
            if not hint:
                raise
            raise argparse.ArgumentError(action, f"invalid choice: {value!r}{hint}") from None


def _columns() -> int:
    """The terminal's width as shutil.get_terminal_size gives it ($COLUMNS first, then the
    terminal of stdout, else 80)."""
    try:
        return int(os.environ["COLUMNS"]) or 80
    except (KeyError, ValueError):
        pass
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or 80
    except (AttributeError, ValueError, OSError):
        return 80


def _arguments_as(parser: argparse.ArgumentParser, args: list[str], option: str) -> list[str]:
    """`args` with each argument that is no option's value written as `OPTION=ARG`, in place;
    after `--`, every word is such an argument. Options are read as argparse reads them: an
    unknown one takes no value, a unique prefix of a long option is that option."""
    out: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--":
            out += [f"{option}={w}" for w in args[i + 1:]]
            break
        if not _looks_like_option(parser, word):
            out.append(f"{option}={word}")
        else:
            out.append(word)
            if _takes_next(parser, word) and i + 1 < len(args):
                out.append(args[i + 1])
                i += 1
        i += 1
    return out


def _looks_like_option(parser: argparse.ArgumentParser, word: str) -> bool:
    if len(word) < 2 or not word.startswith("-"):
        return False  # `-` is stdin
    if parser._negative_number_matcher.match(word) and not parser._has_negative_number_optionals:
        return False
    return " " not in word or word.partition("=")[0] in parser._option_string_actions


def _takes_next(parser: argparse.ArgumentParser, word: str) -> bool:
    """Whether the option `word` (not `--opt=value`, not `-pVALUE`) takes the next word as its value."""
    actions = parser._option_string_actions
    if "=" in word and word.startswith("--"):
        return False
    if word.startswith("--"):
        matches = [s for s in actions if s.startswith(word)] if word not in actions else [word]
        action = actions[matches[0]] if len(matches) == 1 else None
    else:
        action = actions.get(word[:2])
        if action is not None and len(word) > 2:
            return False  # -pVALUE, or flags run together
    return action is not None and action.nargs in (None, 1)


RULES_HELP = "extra rule folder (repeatable); adds to, overrides or disables shipped rules"


def _add_rules_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rules", metavar="DIR", action="append", default=[], help=RULES_HELP)


def _add_rules_before(p: argparse.ArgumentParser, depth: int) -> None:
    # Like -p: a group's own list, joined before the command's own --rules in main.
    p.add_argument("--rules", dest=f"rules_{depth}", metavar="DIR", action="append",
                   default=argparse.SUPPRESS if depth else [],
                   help=f"extra rule folder for the {'SUBCOMMAND' if depth else 'COMMAND'} that follows (repeatable), "
                        "as if given after it, before its own --rules")


PLUGIN_HELP = ("load a local plugin (repeatable), as if installed by entry point: a module name "
               "(found in the current folder too) or a file path like ./plugin.py")
def _add_plugin_arg(p: argparse.ArgumentParser, depth: int) -> None:
    # Accepted before and after each subcommand. A subcommand's parser fills its own namespace,
    # which argparse then copies over its parent's: each level needs a list of its own.
    p.add_argument("-p", "--plugin", dest=f"plugins_{depth}" if depth else "plugins", metavar="MODULE",
                   action="append", default=argparse.SUPPRESS if depth else [], help=PLUGIN_HELP)


def command_in(argv: Sequence[str]) -> str | None:
    """The subcommand `argv` names, where that is plain without parsing: only `-p MODULE` and
    `--rules DIR` may come before it. None for anything else (`--help`, `--version`, a typo),
    which the whole parser then handles."""
    i = 0
    while i < len(argv):
        word = argv[i]
        if word in ("-p", "--plugin", "--rules"):
            i += 2
        elif word.startswith(("--plugin=", "--rules=")) or (word.startswith("-p") and not word.startswith("--")):
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
    _add_rules_before(ap, 0)
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for names, add in _SUBCOMMANDS:
        if command is None or command in names:
            add(sub)
    for path, p in list(cli_help.subparsers(ap)):
        if path:
            _add_plugin_arg(p, len(path))
            if _is_group(p) and any("--rules" in q._option_string_actions for _, q in cli_help.subparsers(p)):
                _add_rules_before(p, len(path))  # `rules --rules DIR test`, `fleet --rules DIR diagnose`
    cli_help.apply(ap)
    return ap


def _is_group(p: argparse.ArgumentParser) -> bool:
    return any(isinstance(a, argparse._SubParsersAction) for a in p._actions)


def _add_diagnose(sub) -> None:
    from troubleshoot.cli_help import add_fail_on_arg

    d = sub.add_parser("diagnose", help="diagnose a log (file, '-' or piped stdin)")
    d.arguments_as = "--log"
    d.add_argument("log_arguments", nargs="*", metavar="LOG", default=argparse.SUPPRESS,
                   help="a log, read as --log LOG (in the order given, with any --log)")
    d.add_argument("--log", metavar="PATH", action="append",
                   help="log file, folder of per-rank logs, glob, or '-' for stdin (default: stdin when "
                        "piped); repeatable: the logs of one job are diagnosed together")
    _add_rules_arg(d)
    d.add_argument("--format", choices=("text", "json", "markdown"), default="text",
                   help=format_help("text", "json", "markdown"))
    add_fail_on_arg(d)
    d.add_argument("--no-probe", action="store_true", help="do not probe this machine (log only)")
    d.add_argument("--here", action="store_true", help="the logs came from this machine: use its facts whatever the logs' age or form (by default a log pasted, typed in or last written over a day ago is judged by its own facts alone)")
    d.add_argument("--snapshot", metavar="FILE", help="diagnose against a saved snapshot instead of this machine")
    d.add_argument("--python", metavar="PATH", help="interpreter whose frameworks to probe (a venv or conda env)")
    d.add_argument("--follow", metavar="PATH", help="follow a growing log: print new diagnoses as the job writes")
    d.add_argument("--pid", type=int, metavar="PID", help="watch a running job's process until it ends")
    d.add_argument("--all", action="store_true", help="text: show every diagnosis, not the top 5")
    d.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                   help="text: colours and rendered Markdown on a terminal (auto), always, or plain text (never)")


def _add_tui(sub) -> None:
    t = sub.add_parser("tui", help="the interactive terminal UI (also: troubleshoot with no command)")
    t.arguments_as = "--log"
    t.add_argument("log_argument", nargs="?", metavar="LOG", default=argparse.SUPPRESS, help="a log, read as --log LOG")
    t.add_argument("--log", metavar="PATH", action=_OneLog, help="log file to diagnose (one)")
    t.add_argument("--follow", metavar="PATH", help="follow a growing log; new diagnoses appear as it grows")
    t.add_argument("--snapshot", metavar="FILE", help="machine facts from a saved snapshot instead of probing")
    t.add_argument("--no-probe", action="store_true", help="do not probe this machine")
    t.add_argument("--here", action="store_true", help="logs opened or pasted came from this machine: use its facts")
    t.add_argument("--root", metavar="DIR", help="apply fixes' file changes under DIR; run no commands")
    _add_rules_arg(t)


class _OneLog(argparse.Action):
    """The TUI's one log: a second is an error, not a silent choice of the last."""

    def __call__(self, parser, namespace, values, option_string=None):
        if getattr(namespace, self.dest, None) is not None:
            raise argparse.ArgumentError(self, f"one log only ({getattr(namespace, self.dest)} and {values} "
                                               f"given); `troubleshoot diagnose` reads several")
        setattr(namespace, self.dest, values)


def _add_probe(sub) -> None:
    pr = sub.add_parser("probe", help="read this machine (GPUs, driver, CUDA, frameworks, Docker, IO)")
    pr.add_argument("--format", choices=("text", "json"), default="text", help=format_help("text", "json"))
    pr.add_argument("--save", metavar="FILE", help="also save the snapshot as JSON to FILE")
    pr.add_argument("--redact", action="store_true",
                    help="replace hostnames, IP/MAC addresses, user names and home paths with placeholders")
    pr.add_argument("--python", metavar="PATH", help="interpreter whose frameworks to probe")
    pr.add_argument("--only", metavar="NAMES", help="only these probes, comma-separated (e.g. nvml,kernel)")


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
    from troubleshoot import cli_rules

    cli_rules.add_parser(sub, _add_rules_arg, _Parser)


def _add_bundle(sub) -> None:
    from troubleshoot import cli_bundle

    cli_bundle.add_parser(sub, _add_rules_arg)


def _add_check(sub) -> None:
    from troubleshoot import cli_check

    cli_check.add_parsers(sub, _add_rules_arg)


def _add_remediate(sub) -> None:
    from troubleshoot import cli_remediate

    cli_remediate.add_parser(sub, _add_rules_arg)


def _add_completion(sub) -> None:
    c = sub.add_parser("completion", help="print a shell completion script (bash, zsh, tcsh)")
    c.add_argument("shell", choices=("bash", "zsh", "tcsh"), help="the shell to complete in")


# In the order `--help` lists them; each adds the subcommands it names.
_SUBCOMMANDS = ((("diagnose",), _add_diagnose), (("tui",), _add_tui), (("probe",), _add_probe),
                (("fixers", "fix", "undo", "history"), _add_fix), (("run",), _add_run), (("fleet",), _add_fleet),
                (("bundle",), _add_bundle), (("rules",), _add_rules), (("check", "events", "breaker"), _add_check),
                (("remediate",), _add_remediate),
                (("completion",), _add_completion))
_COMMAND_NAMES = frozenset(n for names, _ in _SUBCOMMANDS for n in names)


# Commands whose files are all written and closed before they return: the `troubleshoot`
# command leaves them without the interpreter's teardown (see `entry`).
# `check` too: a health check whose NVML call hung leaves that probe's thread blocked in C, and
# the interpreter's teardown must not wait on it.
QUICK_EXIT = frozenset({"diagnose", "probe", "run", "check"})
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
        # A thread is started through threading: where it was never loaded, none runs.
        threading = sys.modules.get("threading")
        if threading is None or all(t.daemon or t is threading.main_thread() for t in threading.enumerate()):
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
    if command not in LEAVE_AT_ONCE:
        # A command's start makes ~60,000 objects the collector tracks (modules, the rule set)
        # that live to its end; collecting every 700 new ones scans them again and again: 5 ms
        # of a small diagnosis's ~70. Every 100,000 a one-shot command never collects, and a
        # long one (`run`, a thousand rank logs) still frees its cycles, in rarer, longer passes.
        # The TUI keeps the default, whose short passes never hold up a key.
        import gc

        gc.set_threshold(100_000, 10, 10)
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
        _join_levels(args)
        from troubleshoot import cli_paths

        # fleet's --python is a path on each node, not here
        cli_paths.check(args, skip=("python",) if args.command == "fleet" else ())
        from troubleshoot import context

        return _dispatch(args, context.build(args, warn=print_warning))
    except TroubleshootError as exc:  # the one place errors are printed: what they quote is data
        print(f"{PROG}: error: {terminal_safe(str(exc), keep_newlines=False)}", file=sys.stderr)
        if _wants_npd(argv):  # node-problem-detector reads stdout only: a check that cannot run is Unknown (2)
            print(terminal_safe(f"Unknown: {exc}", keep_newlines=False)[:400])
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


def _wants_npd(argv: Sequence[str]) -> bool:
    return "--format=npd" in argv or any(a == "--format" and b == "npd" for a, b in zip(argv, argv[1:]))


def _join_levels(args) -> None:
    """The -p and --rules given before the command (and before a group's subcommand) joined to
    the command's own, in the order given."""
    args.plugins = args.plugins + [m for depth in (1, 2) for m in getattr(args, f"plugins_{depth}", [])]
    before = [d for depth in (0, 1) for d in getattr(args, f"rules_{depth}", [])]
    for depth in (0, 1):
        if hasattr(args, f"rules_{depth}"):
            delattr(args, f"rules_{depth}")
    if not before:
        return
    # The TUI (no command) and `rules` (its list) read rules without a --rules of their own.
    if hasattr(args, "rules") or args.command is None or getattr(args, "rules_command", "") is None:
        args.rules = before + getattr(args, "rules", [])
        return
    words = [args.command] + [getattr(args, f"{args.command}_command", None) or ""]
    raise TroubleshootError(f"--rules: `{PROG} {' '.join(words).strip()}` reads no rules")


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
    if command == "bundle":
        from troubleshoot import cli_bundle

        return cli_bundle.cmd_bundle(args, ctx)
    if command == "rules":
        from troubleshoot import cli_rules

        return cli_rules.cmd_rules(args, ctx)
    if command in ("check", "events", "breaker"):
        from troubleshoot import cli_check

        run = {"check": cli_check.cmd_check, "events": cli_check.cmd_events, "breaker": cli_check.cmd_breaker}[command]
        return run(args, ctx)
    if command == "remediate":
        from troubleshoot import cli_remediate

        return cli_remediate.cmd_remediate(args, ctx)
    if command == "completion":
        from troubleshoot import cli_completion

        return cli_completion.cmd_completion(args.shell, build_parser())
    from troubleshoot import cli_fleet

    return cli_fleet.cmd_fleet(args, ctx)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
