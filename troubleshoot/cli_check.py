"""`troubleshoot check | events | breaker`: a node's verdict for a health check, prolog or
preflight (drained and resumed through Slurm with --slurm), the event store's history, and the
circuit breaker. The work is in admin/; here the inputs are built and the outputs rendered."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from troubleshoot.cli_admin import (add_admin_args, add_limit_args, iso_time, node_facts, settings,
                                    slurm_view, store)
from troubleshoot.errors import TroubleshootError
from troubleshoot.textsafe import terminal_safe

if TYPE_CHECKING:
    from troubleshoot.admin.loop import Outcome
    from troubleshoot.context import CommandContext


def add_parsers(sub, add_rules_arg) -> None:
    c = sub.add_parser("check", help="a node's verdict: PASS, WARN or FAIL (exit 0, 1, 2), for health checks")
    c.add_argument("--snapshot", metavar="FILE", help="check recorded facts instead of probing this machine")
    c.add_argument("--node", metavar="NAME", help="the node's Slurm name (default: $SLURMD_NODENAME, the facts', "
                                                  "or the host name)")
    c.add_argument("--format", choices=("text", "json", "npd"), default="text",
                   help="text (default); json; npd: node-problem-detector's plugin convention (one line; "
                        "exit 0 OK, 1 NonOK, 2 Unknown)")
    c.add_argument("--slurm", action="store_true",
                   help="drain the node on FAIL and resume a node troubleshoot drained once it passes again")
    c.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="wait at most S seconds for each probe (default 4)")
    add_limit_args(c)
    add_admin_args(c)
    add_rules_arg(c)
    e = sub.add_parser("events", help="what the admin loop recorded: checks, drains, resumes, repairs")
    e.add_argument("--node", metavar="NAME", help="only this node's")
    e.add_argument("--since", metavar="TIME", help="only from this time on (ISO 8601: 2026-12-01 or 2026-12-01T08:00)")
    e.add_argument("--kind", action="append", default=[], metavar="KIND",
                   help="only events of this kind (check, drain, resume, held, repair, verify, ...); repeatable")
    e.add_argument("--format", choices=("text", "json"), default="text", help="text (default) or json")
    add_admin_args(e)
    b = sub.add_parser("breaker", help="the circuit breaker: its state, or close it after a person looked")
    b.add_argument("action", choices=("status", "reset"), help="status: open or closed; reset: close it")
    b.add_argument("--why", metavar="TEXT", default="", help="what was found, kept with the reset")
    add_admin_args(b)


def cmd_check(args, ctx: CommandContext) -> int:
    from troubleshoot.admin import loop, nodecheck
    from troubleshoot.admin.slurmctl import check_name

    if args.timeout is not None and args.timeout <= 0:
        raise TroubleshootError("--timeout must be positive")
    s = settings(args)
    facts, origin = node_facts(args, ctx, args.timeout)
    node = check_name(args.node or nodecheck.node_name(facts))
    with store(args, s) as events:
        verdict = nodecheck.verdict_since_repair(events, node, facts, origin, ctx.ruleset())
        slurm, state, room = slurm_view(args.slurm, s.limits, node, verdict.status == "FAIL")
        outcome = loop.carry_out(verdict, state, events, slurm, s.limits, room)
    _render_check(args.format, outcome)
    return verdict.exit_code if args.format != "npd" else (1 if verdict.status == "FAIL" else 0)


def _render_check(fmt: str, outcome: Outcome) -> None:
    v, d = outcome.verdict, outcome.decision
    if fmt == "json":
        sys.stdout.write(json.dumps({"schema": 1, **outcome.as_dict()}, indent=2) + "\n")
        return
    if fmt == "npd":
        line = f"{v.node}: {v.status}" + (f": {v.reason()}" if v.status != "PASS" else "")
        print(terminal_safe(line, keep_newlines=False)[:400])
        return
    out = [f"{v.node}: {v.status}  ({v.facts_from})"]
    for f in v.findings:
        out.append(f"  [{f.cls}] {f.severity}: {f.text}" + (f"  -> {_action_words(f.action)}" if f.action else ""))
    out += [f"  left out: {x}" for x in v.dropped]
    if d.act != "none":
        out.append(f"slurm: {_act_words(d.act, v.node)}: {d.why}")
    sys.stdout.write(terminal_safe("\n".join(out)) + "\n")


def _action_words(action: str) -> str:
    from troubleshoot.engine import xid

    try:
        return xid.actions().get(action) or action
    except TroubleshootError:  # a broken catalog loses the words, never the verdict
        return action


def _act_words(act: str, node: str) -> str:
    return {"drain": f"drained {node}", "resume": f"resumed {node}", "hold": f"{node} not drained",
            "report": f"{node} not changed", "record": "recorded"}.get(act, act)


def cmd_events(args, ctx: CommandContext) -> int:
    s = settings(args)
    since = iso_time(args.since, "--since") if args.since else None
    with store(args, s) as events:
        found = events.events(node=args.node, since=since, kinds=args.kind)
    if args.format == "json":
        sys.stdout.write(json.dumps({"schema": 1, "events": [e.as_dict() for e in found]}, indent=2) + "\n")
        return 0
    lines = [f"{e.time}  {e.node:<16} {e.kind:<9} {e.status or '':<7} {e.reason}".rstrip() for e in found]
    sys.stdout.write(terminal_safe("\n".join(lines or ["no events"])) + "\n")
    return 0


def cmd_breaker(args, ctx: CommandContext) -> int:
    from troubleshoot.admin.events import BREAKER
    from troubleshoot.admin.loop import breaker_open

    s = settings(args)
    with store(args, s) as events:
        why = breaker_open(events)
        if args.action == "reset":
            if why is None:
                print("the circuit breaker is closed; nothing to reset")
                return 0
            events.record(BREAKER, "breaker", status="closed", reason=args.why or "closed by hand")
            print("the circuit breaker is closed: actions are carried out again")
            return 0
    print(terminal_safe(why or "the circuit breaker is closed", keep_newlines=False))
    return 1 if why else 0
