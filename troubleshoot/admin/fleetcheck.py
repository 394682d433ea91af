"""Many nodes' checks with the limits applied centrally: every node's verdict first, then the
drains in order of how much the node's fault matters (hardware, then driver, then setup), so
that a limit holds back the lesser faults, never the worst."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping, Sequence

from troubleshoot.admin import loop, policy
from troubleshoot.admin.nodecheck import verdict_since_repair
from troubleshoot.admin.slurmctl import NodeState

if TYPE_CHECKING:
    from troubleshoot.admin.events import EventStore
    from troubleshoot.admin.slurmctl import Slurm
    from troubleshoot.engine.ruleset import RuleSet

_CLASS_ORDER = {"hw": 0, "driver": 1, "config": 2, "user": 3}


@dataclass(frozen=True)
class NodeFacts:
    node: str
    facts: Mapping | None
    origin: str
    error: str | None = None  # why there are no facts (the node did not answer)


@dataclass(frozen=True)
class FleetCheck:
    outcomes: list[loop.Outcome]
    missing: list[NodeFacts]  # nodes without facts

    def counts(self) -> dict[str, int]:
        out = {"PASS": 0, "WARN": 0, "FAIL": 0}
        for o in self.outcomes:
            out[o.verdict.status] += 1
        return out

    def acted(self, act: str) -> list[str]:
        return [o.verdict.node for o in self.outcomes if o.decision.act == act]

    @property
    def exit_code(self) -> int:
        worst = max((o.verdict.exit_code for o in self.outcomes), default=0)
        return max(worst, 1 if self.missing else 0)

    def as_dict(self) -> dict:
        return {"counts": self.counts(), "drained": self.acted("drain"), "resumed": self.acted("resume"),
                "held": self.acted("hold"), "nodes": [o.as_dict() for o in self.outcomes],
                "missing": [{"node": m.node, "error": m.error} for m in self.missing]}


def check_fleet(nodes: Sequence[NodeFacts], ruleset: RuleSet, store: EventStore, slurm: Slurm | None,
                limits: policy.Limits) -> FleetCheck:
    states = slurm.nodes() if slurm is not None else {}
    room = policy.Room.from_nodes(limits, states)
    verdicts = []
    for n in nodes:
        if n.facts is None:
            continue
        verdicts.append(verdict_since_repair(store, n.node, n.facts, n.origin, ruleset))
    verdicts.sort(key=lambda v: (v.status != "FAIL", _CLASS_ORDER.get(getattr(v.worst(), "cls", "user"), 4), v.node))
    outcomes = []
    for v in verdicts:
        state = states.get(v.node)
        if slurm is not None and state is None:
            outcomes.append(loop.Outcome(v, policy.Decision("none", "Slurm knows no node of this name")))
            loop.carry_out(v, NodeState(v.node, "UNKNOWN"), store, None, limits, room)
            continue
        outcomes.append(loop.carry_out(v, state or NodeState(v.node, "UNKNOWN"), store, slurm, limits, room))
    outcomes.sort(key=lambda o: o.verdict.node)
    return FleetCheck(outcomes, [n for n in nodes if n.facts is None])
