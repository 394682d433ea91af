"""`troubleshoot fleet probe|diagnose`: the inputs from the command's context (its rules), the
work in fleet/ (which diagnoses through the pipeline), the rendering here."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from troubleshoot.cli_admin import add_admin_args, add_limit_args, settings, store
from troubleshoot.cli_help import add_fail_on_arg, fail_on
from troubleshoot.console import MAX_WARNINGS, PROG, print_warning
from troubleshoot.errors import TroubleshootError
from troubleshoot.textsafe import terminal_safe

if TYPE_CHECKING:
    from troubleshoot.context import CommandContext



def add_parser(sub, add_rules_arg, parser_class) -> None:
    f = sub.add_parser("fleet", help="many nodes: collect, compare and diagnose snapshots; check, drain and resume "
                                     "through Slurm; report on the event store")
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
    _add_check(fsub, add_rules_arg)
    r = fsub.add_parser("report", help="the event store over a period: clean share, repeat offenders, mean time "
                                       "between incidents, before/after a date")
    r.add_argument("--since", metavar="TIME", help="from this time (ISO 8601; default: a year before --until)")
    r.add_argument("--until", metavar="TIME", help="to this time (default: now)")
    r.add_argument("--around", metavar="TIME", help="compare the incident rates before and after this time "
                                                    "(a driver upgrade, a firmware roll-out)")
    r.add_argument("--format", choices=("text", "json"), default="text", help="text (default) or json")
    add_admin_args(r)


def _add_check(fsub, add_rules_arg) -> None:
    c = fsub.add_parser("check", help="every node's verdict; with --slurm, drains and resumes within the limits")
    src = c.add_mutually_exclusive_group()
    src.add_argument("--snapshots", metavar="DIR", help="recorded facts, one <node>.json per node, instead of "
                                                        "probing the nodes through srun")
    sel = c.add_mutually_exclusive_group()
    sel.add_argument("--nodes", type=int, metavar="N", help="through srun: allocate N nodes")
    sel.add_argument("--nodelist", metavar="LIST", help="through srun: these nodes (Slurm syntax: gpu[01-04])")
    sel.add_argument("--job", metavar="JOBID", help="through srun: the nodes of a running job")
    c.add_argument("--partition", metavar="P", help="through srun: allocate in this partition")
    c.add_argument("--slurm", action="store_true",
                   help="act through Slurm: drain failing nodes and resume the ones troubleshoot drained, within "
                        "the limits (without --snapshots, also probe the nodes through srun)")
    c.add_argument("--timeout", type=float, default=60, metavar="S", help="per-node deadline through srun (default 60)")
    c.add_argument("--format", choices=("text", "json"), default="text", help="text (default) or json")
    add_limit_args(c)
    add_admin_args(c)
    add_rules_arg(c)


def cmd_fleet(args, ctx: CommandContext) -> int:
    ctx.plugins  # a -p plugin that cannot load stops the command before anything runs
    if args.fleet_command == "probe":
        return _probe(args)
    if args.fleet_command == "diagnose":
        return _diagnose(args, ctx)
    if args.fleet_command == "check":
        return _check(args, ctx)
    if args.fleet_command == "report":
        return _report(args)
    raise TroubleshootError("fleet needs a subcommand: probe, diagnose, check, report")


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


def _check(args, ctx: CommandContext) -> int:
    from troubleshoot.admin.fleetcheck import check_fleet
    from troubleshoot.admin.slurmctl import Slurm

    s = settings(args)
    if args.snapshots:
        nodes = _recorded(Path(args.snapshots))
    elif args.slurm:
        nodes = _through_srun(args)
    else:
        raise TroubleshootError("fleet check needs --snapshots DIR (recorded facts) or --slurm (probe the nodes "
                                "through srun)")
    with store(args, s) as events:
        res = check_fleet(nodes, ctx.ruleset(), events, Slurm() if args.slurm else None, s.limits)
    if args.format == "json":
        sys.stdout.write(json.dumps({"schema": 1, **res.as_dict()}, indent=2) + "\n")
    else:
        sys.stdout.write(terminal_safe(_check_table(res)))
    return res.exit_code


def _recorded(folder: Path) -> list:
    from troubleshoot.fleet.diagnose import snapshot_files

    nodes = [_node_facts(path.stem, path, f"snapshot {path}") for path in snapshot_files(folder)]
    if not nodes:
        raise TroubleshootError(f"{folder}: no <node>.json snapshots in it")
    return nodes


def _through_srun(args) -> list:
    import tempfile

    from troubleshoot.admin.fleetcheck import NodeFacts
    from troubleshoot.admin.nodecheck import PROBES
    from troubleshoot.fleet import collect

    command = collect.probe_command() + ["--only", ",".join(PROBES)]
    sel = collect.Selection(nodes=args.nodes, nodelist=args.nodelist, partition=args.partition, job=args.job)
    with tempfile.TemporaryDirectory(prefix="troubleshoot-fleet-check-") as out:
        results = collect.probe_slurm(Path(out), sel, timeout=args.timeout, command=command)
        return [_node_facts(r.node, r.path, f"{r.node} through srun") if r.status == "ok"
                else NodeFacts(r.node, None, "srun", r.error) for r in results]


def _node_facts(node: str, path: Path, origin: str):
    """One node's recorded facts, read as `fleet diagnose` reads them (fleet.nodes.load): a file
    that cannot be read leaves that node without facts, reported, and the others go on."""
    from troubleshoot.admin.fleetcheck import NodeFacts
    from troubleshoot.fleet.nodes import load

    warnings: list[str] = []
    loaded = load(Path(path), warnings)
    for w in ((loaded.warnings if loaded else []) + warnings)[:MAX_WARNINGS]:
        print_warning(w)
    return NodeFacts(node, loaded.facts if loaded else None, origin, warnings[0] if warnings else None)


def _check_table(res) -> str:
    from troubleshoot.console import plural

    rows = [("node", "verdict", "finding", "slurm")]
    for o in res.outcomes:
        f = o.verdict.worst()
        finding = f"[{f.cls}] {f.text}" if f and o.verdict.status != "PASS" else "-"
        act = o.decision.act if o.decision.act not in ("none", "record") else ""
        rows.append((o.verdict.node, o.verdict.status, finding[:60],
                     (f"{act}: {o.decision.why}" if act else o.decision.why)[:90] or "-"))
    rows += [(m.node, "UNKNOWN", f"no facts: {m.error}"[:60], "-") for m in res.missing]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}".rstrip() for r in rows]
    c = res.counts()
    held = res.acted("hold")
    lines.append("")
    lines.append(f"{plural(len(res.outcomes), 'node')}: {c['PASS']} PASS, {c['WARN']} WARN, {c['FAIL']} FAIL; "
                 f"drained {len(res.acted('drain'))}, resumed {len(res.acted('resume'))}"
                 + (f"; held by the limits: {len(held)} ({', '.join(held)})" if held else ""))
    return "\n".join(lines) + "\n"


def _report(args) -> int:
    from datetime import datetime, timedelta, timezone

    from troubleshoot.admin import fleetreport
    from troubleshoot.cli_admin import iso_time

    s = settings(args)
    until = iso_time(args.until, "--until") if args.until else datetime.now(timezone.utc).isoformat(timespec="seconds")
    since = iso_time(args.since, "--since") if args.since else \
        (datetime.fromisoformat(until) - timedelta(days=365)).isoformat(timespec="seconds")
    with store(args, s) as events:
        found = events.events(since=since, until=until, kinds=("check", "incident"))
    if found and not args.since:
        since = found[0].time  # the period watched starts at the first check, not a year of nothing
    around = iso_time(args.around, "--around") if args.around else None
    if since >= until or (around and not since < around < until):
        raise TroubleshootError(f"--since must come before --until, and --around between them (the events run "
                                f"from {since} to {until})")
    r = fleetreport.report(found, since, until, around)
    if args.format == "json":
        sys.stdout.write(json.dumps({"schema": 1, **r.as_dict()}, indent=2) + "\n")
    else:
        sys.stdout.write(terminal_safe(fleetreport.render_text(r)))
    return 0
