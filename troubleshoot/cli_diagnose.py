"""`troubleshoot diagnose`, `probe` and `tui`: the command's context gives the logs, facts and
rules, the pipeline the diagnoses, the report modules the text; this module picks the format
and the exit status."""

from __future__ import annotations

import sys

from troubleshoot import inputwatch
from troubleshoot.cli_help import fail_on  # diagnose's and fleet diagnose's --fail-on
from troubleshoot.console import PROG, warn_problems
from troubleshoot.context import CommandContext
from troubleshoot.errors import TroubleshootError
from troubleshoot.textsafe import terminal_safe


def cmd_diagnose(args, ctx: CommandContext) -> int:
    if args.follow or args.pid is not None:
        from troubleshoot import cli_follow

        return cli_follow.follow(args, ctx)
    if not ctx.options.logs and not ctx.stdin_log and not ctx.options.probe:
        raise TroubleshootError("nothing to diagnose: give a log (--log PATH, --log -, or pipe one), "
                                "or let troubleshoot probe this machine (drop --no-probe)")
    ctx.plugins  # a -p plugin that cannot load stops the command before anything is read
    logs = ctx.log_sources()  # a bad path fails before seconds of probing
    sources = ctx.sources(logs)  # probed first: the probes' own progress line has gone
    # A log from a pipe, a FIFO or a device shows its progress on a terminal (inputwatch);
    # --color never asks for plain text, and a progress line moves the cursor.
    with inputwatch.progress_on(sys.stderr, colour=ctx.colour(sys.stderr), allowed=args.color != "never"):
        result = ctx.diagnose(sources)
    warn_problems(result.ruleset, ctx)
    from troubleshoot.report.factsview import facts_lines

    machine = sources.facts[0].origin if sources.facts else None
    source = result.source if machine is None or logs else machine
    opening = facts_lines(machine, result.log_facts, ctx.facts_note)
    if args.format == "json":
        from troubleshoot.report import jsonfmt

        sys.stdout.write(jsonfmt.render(result.diagnoses, jsonfmt.result_meta(result, machine, ctx.facts_note)))
    elif args.format == "markdown":
        from troubleshoot.report import markdown

        head = "".join(f"{line}\n\n" for line in opening)
        sys.stdout.write(terminal_safe(head + markdown.render(result.diagnoses, source)))
    else:
        from troubleshoot.report import text

        if result.headline:
            sys.stdout.write(terminal_safe(result.headline) + "\n\n")
        if opening:
            sys.stdout.write(terminal_safe("\n".join(opening)) + "\n\n")
        sys.stdout.write(text.render(result.diagnoses, colour=ctx.colour(sys.stdout),
                                     limit=None if args.all else 5, source=source,
                                     hint_args=ctx.hint_args(), rich=ctx.rich(sys.stdout),
                                     log_args=ctx.log_hint(), facts_args=ctx.facts_hint()))
    return fail_on(args.fail_on, result.diagnoses)


def cmd_tui(args, ctx: CommandContext) -> int:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise TroubleshootError("the TUI needs a terminal; use `troubleshoot diagnose` in scripts")
    from troubleshoot.tui.early import EarlyKeys

    early = EarlyKeys.start(sys.stdin.fileno())  # `q` works from here on, before Textual is imported
    try:
        ctx.plugins  # loaded, and their problems told, before the screen is taken over
        from troubleshoot.tui.app import run_tui

        return run_tui(ctx, fast_exit=True, early=early)
    finally:
        if early is not None:
            early.finish()


def cmd_probe(args, ctx: CommandContext) -> int:
    import json

    from troubleshoot import snapshot

    if getattr(args, "only", None):
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in ctx.probe_names()]
        if unknown or not names:
            raise TroubleshootError(f"--only: no probe named {(unknown or [args.only])[0]!r}; probes: "
                                    f"{', '.join(ctx.probe_names())}")
        snap = ctx.probe(names=names)
    else:
        snap = ctx.machine().facts
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
