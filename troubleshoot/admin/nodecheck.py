"""A node's check: its facts (probed within a deadline, or a recorded snapshot) diagnosed by the
rules that read facts, and judged into a verdict."""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING, Mapping

from troubleshoot.admin.verdict import Verdict, facts_since, judge

if TYPE_CHECKING:
    from troubleshoot.admin.events import EventStore
    from troubleshoot.engine.ruleset import RuleSet

# What a node's health depends on; the frameworks, CUDA libraries and Docker are the jobs'
# (and importing a framework would cost the check seconds).
PROBES = ("host", "nvml", "kernel", "fabric_manager", "node", "io", "accelerators")
# Each probe waited for at most this long: a whole check stays well under 5 s on a healthy node,
# and a hung NVML becomes a finding instead of a hung health check.
PROBE_CAP_S = 4.0


def node_name(facts: Mapping | None) -> str:
    """This node's name as Slurm knows it: slurmd's environment (a HealthCheckProgram, a prolog),
    the facts' Slurm node, else the short host name."""
    env = os.environ.get("SLURMD_NODENAME")
    if env:
        return env
    node = facts.get("node") if isinstance(facts, Mapping) else None
    name = node.get("slurm_node") if isinstance(node, Mapping) else None
    if isinstance(name, str) and name:
        return name
    return socket.gethostname().split(".")[0]


def verdict_of(node: str, facts: Mapping | None, origin: str, ruleset: RuleSet, since: str | None = None) -> Verdict:
    """The verdict on `facts`, leaving out Xid events from before `since` (the last repair)."""
    from troubleshoot import pipeline
    from troubleshoot.sources import FactsSource, Sources

    kept, dropped = facts_since(facts, since)
    result = pipeline.diagnose_sources(Sources([], [FactsSource(kept, origin)]), ruleset)
    return judge(node, result.diagnoses, kept, origin, dropped)


def verdict_since_repair(store: EventStore, node: str, facts: Mapping | None, origin: str,
                         ruleset: RuleSet) -> Verdict:
    """The node's verdict, the Xid events logged before its last repair (the event store's)
    left out: a GPU reset leaves the old Xid in the kernel log."""
    repaired = store.last(node, ("repair",), status="done")
    return verdict_of(node, facts, origin, ruleset, since=repaired.time if repaired else None)
