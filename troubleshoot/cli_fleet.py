"""`troubleshoot fleet probe|diagnose`: the inputs from the command's context (its rules), the
work in fleet/ (which diagnoses through the pipeline), the rendering here."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from troubleshoot.cli_help import add_fail_on_arg, fail_on
from troubleshoot.console import MAX_WARNINGS, PROG, print_warning
from troubleshoot.errors import TroubleshootError
from troubleshoot.textsafe import terminal_safe

if TYPE_CHECKING:
    from troubleshoot.context import CommandContext



def add_parser(sub, add_rules_arg, parser_class) -> None:
    f = sub.add_parser("fleet", help="many nodes: collect snapshots through Slurm, compare and diagnose them")
    fsub = f.add_subparsers(dest="fleet_command", metavar="SUBCOMMAND", parser_class=parser_class)
    p = fsub.add_parser("probe", help="one snapshot per node (troubleshoot probe through srun) into --out DIR")
    p.add_argument("--slurm", action="store_true", required=True, help="collect through Slurm (srun)")
    sel = p.add_mutually_exclusive_group()
    sel.add_argument("--nodes", type=int, metavar="N", help="allocate N nodes")
    sel.add_argument("--nodelist", metavar="LIST", help="these nodes (Slurm syntax: gpu[01-04])")
    sel.add_argument("--job", metavar="JOBID", help="the nodes of a running job (steps overlap it)")
    p.add_argument("--partition", metavar="P", help="allocate in this partition (all its idle nodes without -N)")
    p.add_argument("--out", metavar="DIR", required=True, help="folder for <node>.json")
    p.add_argument("--timeout", type=float, default=60, metavar="S", help="per-node deadline in seconds (default 60)")
    p.add_argument("--command", dest="remote_command", metavar="CMD",
                   help="what each node runs instead of this troubleshoot's `probe --format json`")
    p.add_argument("--python", metavar="PATH", help="on each node, the interpreter whose frameworks to probe")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="text: one line per node as it answers (default); json: every node's result at the end")
    d = fsub.add_parser("diagnose", help="diagnose and compare a folder of node snapshots (and the job's logs)")
    d.add_argument("dir", metavar="DIR", help="folder of <node>.json snapshots; logs in it are read too")
    d.add_argument("--log", metavar="PATH", action="append", default=[], help="more logs (file, folder, glob)")
    d.add_argument("--format", choices=("text", "json", "tui"), default="text",
                   help="text: the comparison and diagnoses by node (default); json: for scripts; tui: browse it")
    d.add_argument("--max-nodes", type=int, metavar="N",
                   help="read at most N snapshots, the first in name order (default: every one); "
                        "the report says how many were left out")
    d.add_argument("--jobs", type=int, metavar="N",
                   help="processes that read the snapshots (default: one per CPU, at most 8; 1: this one alone)")
    add_fail_on_arg(d, " on any node (or in the job's logs); a drift or outlier counts as a warning")
    add_rules_arg(d)


def cmd_fleet(args, ctx: CommandContext) -> int:
    ctx.plugins  # a -p plugin that cannot load stops the command before anything runs
    if args.fleet_command == "probe":
        return _probe(args)
    if args.fleet_command == "diagnose":
        return _diagnose(args, ctx)
    raise TroubleshootError("fleet needs a subcommand: probe, diagnose")


def _probe(args) -> int:
    from troubleshoot.fleet import collect

    if args.timeout <= 0:
        raise TroubleshootError("--timeout must be positive")
    if args.nodes is not None and args.nodes < 1:
        raise TroubleshootError("--nodes must be at least 1")
    command = shlex.split(args.remote_command) if args.remote_command else collect.probe_command()
    if args.python:
        command += ["--python", args.python]
    sel = collect.Selection(nodes=args.nodes, nodelist=args.nodelist, partition=args.partition, job=args.job)

    def say(r) -> None:
        if args.format == "text":
            what = r.path if r.status == "ok" else r.error
            line = f"{r.node}: {r.status.upper() if r.status != 'ok' else 'ok'} ({r.seconds:.1f}s) {what}"
            print(terminal_safe(line, keep_newlines=False), flush=True)  # srun's and the node's words are data

    results = collect.probe_slurm(Path(args.out), sel, timeout=args.timeout, command=command, on_result=say)
    bad = [r for r in results if r.status != "ok"]
    if args.format == "json":
        print(json.dumps({"schema": 1, "out": args.out, "nodes": [r.as_dict() for r in results]}, indent=2))
    sys.stdout.flush()
    print(terminal_safe(f"{PROG}: {len(results) - len(bad)} of {len(results)} nodes answered"
                        + (f"; no snapshot from {', '.join(r.node for r in bad)}" if bad else ""), False),
          file=sys.stderr)
    return 1 if bad else 0


def _diagnose(args, ctx: CommandContext) -> int:
    from troubleshoot.fleet.diagnose import diagnose_fleet
    from troubleshoot.fleet.forked import default_jobs
    from troubleshoot.report import fleet_text

    for name in ("max_nodes", "jobs"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            raise TroubleshootError(f"--{name.replace('_', '-')} must be at least 1")
    res = diagnose_fleet(Path(args.dir), ctx.ruleset(), list(ctx.options.logs), max_nodes=args.max_nodes,
                         jobs=args.jobs or default_jobs())
    for w in res.warnings[:MAX_WARNINGS]:
        print_warning(w)
    if args.format == "json":
        sys.stdout.write(fleet_text.render_json(res))
    elif args.format == "tui":
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            raise TroubleshootError("the fleet view needs a terminal; use --format text or json in scripts")
        from troubleshoot.tui.fleet import run_fleet_tui

        run_fleet_tui(res)
    else:
        sys.stdout.write(fleet_text.render_text(res))
        if res.left_out:
            sys.stdout.write(f"{res.left_out} more node{'s' if res.left_out != 1 else ''} left out "
                             f"(--max-nodes {args.max_nodes})\n")
    status = fail_on(args.fail_on, [d for found in (*res.per_node.values(), res.job) for d in found])
    # A node that drifted or stands out is a warning: what a cron job watching the fleet wants
    # to hear of, short of an error.
    return status or (1 if res.findings and args.fail_on in ("warning", "info") else 0)
