"""The options every command of the admin loop shares (the event store, the config, the
limits), and the settings and store they name."""

from __future__ import annotations

from typing import TYPE_CHECKING

from troubleshoot.errors import TroubleshootError

if TYPE_CHECKING:
    from troubleshoot.admin.config import Settings
    from troubleshoot.admin.events import EventStore
    from troubleshoot.admin.policy import Limits, Room
    from troubleshoot.admin.slurmctl import NodeState, Slurm
    from troubleshoot.context import CommandContext

LIMIT_OPTIONS = ("max_drain", "max_drain_percent", "fail_after", "pass_after")


def add_admin_args(p) -> None:
    """The event store, the config and the limits: every command of the loop takes them."""
    p.add_argument("--db", metavar="FILE", help="the event store (default: $XDG_STATE_HOME/troubleshoot/admin/"
                                                "events.db, or the config's admin.db)")
    p.add_argument("--config", metavar="FILE", help="settings file with an `admin:` section (default: "
                                                    "$XDG_CONFIG_HOME/troubleshoot/config.yaml when it exists)")


def add_limit_args(p) -> None:
    p.add_argument("--max-drain", type=int, metavar="N", help="drain at most N nodes at once, cluster-wide")
    p.add_argument("--max-drain-percent", type=float, metavar="P",
                   help="drain at most P %% of a partition (default without either: 1 node or 10 %%, "
                        "whichever is larger)")
    p.add_argument("--fail-after", type=int, metavar="N", help="failing checks in a row before a drain (default 1)")
    p.add_argument("--pass-after", type=int, metavar="N",
                   help="passing checks in a row before a node troubleshoot drained is resumed (default 3)")


def settings(args) -> Settings:
    from troubleshoot.admin import config

    for name in LIMIT_OPTIONS:
        value = getattr(args, name, None)
        least = 0 if name.startswith("max_drain") else 1
        if value is not None and value < least:
            raise TroubleshootError(f"--{name.replace('_', '-')} must be at least {least}")
    return config.load(args.config, {name: getattr(args, name, None) for name in LIMIT_OPTIONS})


def store(args, s: Settings) -> EventStore:
    from troubleshoot.admin.events import EventStore

    return EventStore(args.db or s.db)


def node_facts(args, ctx: CommandContext, cap: float | None = None) -> tuple[dict | None, str]:
    """The node's facts: the recorded --snapshot, else this machine's node probes, each waited
    for at most `cap` seconds (a hung NVML becomes a finding, not a hung health check)."""
    from troubleshoot.admin.nodecheck import PROBE_CAP_S, PROBES

    if args.snapshot:
        m = ctx.machine()
        return m.facts, m.origin or f"snapshot {args.snapshot}"
    return ctx.probe(on_result=lambda outcome: None, names=PROBES, cap=cap or PROBE_CAP_S), "this machine"


def slurm_view(asked: bool, limits: Limits, node: str, failing: bool) -> tuple[Slurm | None, NodeState, Room]:
    """Slurm (when --slurm asked for it), the node's state there and the room the limits leave.
    Every node's state is asked for only when a drain may follow (`failing`, on a node not
    drained yet): on a large cluster every node's health check runs every few minutes, and
    listing all nodes each time would load the controller for nothing."""
    from troubleshoot.admin.policy import Room
    from troubleshoot.admin.slurmctl import NodeState, Slurm

    if not asked:
        return None, NodeState(node, "UNKNOWN"), Room(limits)
    slurm = Slurm()
    state = slurm.node(node)
    if not failing or state.drained:
        return slurm, state, Room(limits)
    nodes = slurm.nodes()
    return slurm, nodes.get(node, state), Room.from_nodes(limits, nodes)


def iso_time(text: str, option: str) -> str:
    """An ISO 8601 time given on the command line, in UTC as the event store keeps times; a time
    without a zone is the admin's local time."""
    from datetime import datetime, timezone

    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        raise TroubleshootError(f"{option} {text!r}: not a time (ISO 8601: 2026-12-01 or 2026-12-01T08:00)") from None
    if t.tzinfo is None:
        t = t.astimezone()
    return t.astimezone(timezone.utc).isoformat(timespec="seconds")
