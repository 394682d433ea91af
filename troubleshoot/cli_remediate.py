"""`troubleshoot remediate`: one node's ladder (evidence, drain, repair, verification, resume or
escalation), shown as a dry run, carried out with --apply. The work is in admin/remediate."""

from __future__ import annotations

import json
import shutil
import sys
from typing import TYPE_CHECKING

from troubleshoot.cli_admin import add_admin_args, add_limit_args, node_facts, settings, slurm_view, store
from troubleshoot.errors import TroubleshootError
from troubleshoot.textsafe import terminal_safe

if TYPE_CHECKING:
    from troubleshoot.context import CommandContext


def add_parser(sub, add_rules_arg) -> None:
    r = sub.add_parser("remediate", help="a failing node's repair ladder: evidence, drain, repair, verify, resume "
                                         "(dry run unless --apply)")
    r.add_argument("--node", metavar="NAME", help="the node's Slurm name (default: $SLURMD_NODENAME, the facts', or "
                                                  "the host name)")
    r.add_argument("--snapshot", metavar="FILE", help="plan from recorded facts (a dry run only)")
    r.add_argument("--slurm", action="store_true", help="drain the node first and resume it once verified")
    r.add_argument("--apply", action="store_true", help="carry the ladder out on this machine (needs root)")
    r.add_argument("--python", metavar="PATH",
                   help="the interpreter whose PyTorch runs the verification (default: python3 on PATH)")
    r.add_argument("--format", choices=("text", "json"), default="text", help="text (default) or json")
    add_limit_args(r)
    add_admin_args(r)
    add_rules_arg(r)


def cmd_remediate(args, ctx: CommandContext) -> int:
    from troubleshoot.admin import nodecheck, remediate
    from troubleshoot.admin.slurmctl import check_name
    from troubleshoot.probes.base import run_command

    if args.apply and args.snapshot:
        raise TroubleshootError("--apply repairs this machine from its own facts, never from a recorded snapshot; "
                                "leave out --snapshot")
    s = settings(args)
    python = args.python or shutil.which("python3") or sys.executable
    facts, origin = node_facts(args, ctx)
    node = check_name(args.node or nodecheck.node_name(facts))
    with store(args, s) as events:
        verdict = nodecheck.verdict_since_repair(events, node, facts, origin, ctx.ruleset())
        slurm, state, room = slurm_view(args.slurm, s.limits, node, verdict.status == "FAIL")
        p = remediate.plan(verdict, state, events, s.limits, room, facts, args.slurm, python)
        if not args.apply:
            _render(args.format, p, str(events.path), None)
            return 0 if p.rung.name == "none" else 1
        said: list[str] = []

        def say(line: str) -> None:
            said.append(line)
            if args.format == "text":
                print(terminal_safe(line, keep_newlines=False), flush=True)

        ended = remediate.apply(p, state, events, slurm, s.limits, run_command, facts, python, say)
    if args.format == "json":
        _render("json", p, str(events.path), {"ended": ended, "steps": said})
    else:
        print(f"{node}: {ended}")
    return {"resumed": 0, "nothing": 0, "rebooting": 0}.get(ended, 1)


def _render(fmt: str, p, db: str, applied: dict | None) -> None:
    from troubleshoot.admin.remediate import describe

    if fmt == "json":
        doc = {"schema": 1, "dry_run": applied is None, **p.as_dict(), **({"applied": applied} if applied else {})}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return
    lines = describe(p, db)
    if applied is None and p.rung.name != "none":
        lines.append("dry run: nothing was changed; --apply carries it out (as root)")
    sys.stdout.write(terminal_safe("\n".join(lines)) + "\n")
