"""What the event store says about a fleet over a period: the share of nodes without an incident,
the repeat offenders, the mean time between incidents per reason class, and the incident rate
before and after a date (a driver upgrade, a firmware roll-out). Pure: events in, numbers out.

An incident is a node's check turning FAIL (a run of failing checks is one incident). The time
between incidents is the node-time watched over the incidents counted: (nodes x days) / n."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from troubleshoot.admin.events import Event


@dataclass(frozen=True)
class ClassFigures:
    cls: str
    incidents: int
    mtbi_node_days: float | None  # node-days per incident
    nodes: int  # nodes with at least one


@dataclass(frozen=True)
class Comparison:
    around: str
    before_days: float
    after_days: float
    rates: dict[str, tuple[float, float]]  # class (and "all") -> incidents per 100 node-days, before and after


@dataclass(frozen=True)
class FleetReport:
    since: str
    until: str
    days: float
    nodes: int
    clean: int
    offenders: list[tuple[str, int, list[str]]]  # node, incidents, classes
    classes: list[ClassFigures]
    comparison: Comparison | None = None
    incidents: int = field(default=0)

    def as_dict(self) -> dict:
        doc = {"since": self.since, "until": self.until, "days": round(self.days, 2), "nodes": self.nodes,
               "clean_nodes": self.clean, "clean_share": round(self.clean / self.nodes, 4) if self.nodes else None,
               "incidents": self.incidents,
               "repeat_offenders": [{"node": n, "incidents": c, "classes": k} for n, c, k in self.offenders],
               "classes": [{"class": c.cls, "incidents": c.incidents, "nodes": c.nodes,
                            "mtbi_node_days": None if c.mtbi_node_days is None else round(c.mtbi_node_days, 1)}
                           for c in self.classes]}
        if self.comparison:
            cmp = self.comparison
            doc["before_after"] = {"around": cmp.around, "before_days": round(cmp.before_days, 2),
                                   "after_days": round(cmp.after_days, 2),
                                   "per_100_node_days": {k: {"before": round(b, 3), "after": round(a, 3)}
                                                         for k, (b, a) in cmp.rates.items()}}
        return doc


def _days(a: str, b: str) -> float:
    return max((datetime.fromisoformat(b) - datetime.fromisoformat(a)).total_seconds() / 86400, 1e-9)


def report(events: Sequence[Event], since: str, until: str, around: str | None = None) -> FleetReport:
    """`events`: the store's checks and incidents between `since` and `until` (ISO, UTC)."""
    nodes = {e.node for e in events if e.kind in ("check", "incident")}
    incidents = [e for e in events if e.kind == "incident" and e.status == "open"]
    per_node = Counter(e.node for e in incidents)
    classes_of = defaultdict(set)
    for e in incidents:
        classes_of[e.node].add(e.cls or "?")
    days = _days(since, until)
    offenders = sorted(((n, c, sorted(classes_of[n])) for n, c in per_node.items() if c >= 2),
                       key=lambda x: (-x[1], x[0]))
    by_class = defaultdict(list)
    for e in incidents:
        by_class[e.cls or "?"].append(e)
    figures = [ClassFigures(c, len(es), len(nodes) * days / len(es) if es else None, len({e.node for e in es}))
               for c, es in sorted(by_class.items(), key=lambda kv: -len(kv[1]))]
    cmp = _compare(incidents, len(nodes), since, until, around) if around else None
    return FleetReport(since, until, days, len(nodes), len(nodes - set(per_node)), offenders[:20], figures, cmp,
                       len(incidents))


def _compare(incidents: Sequence[Event], nodes: int, since: str, until: str, around: str) -> Comparison:
    before_days, after_days = _days(since, around), _days(around, until)
    rates = {}
    for cls in ["all"] + sorted({e.cls or "?" for e in incidents}):
        mine = [e for e in incidents if cls == "all" or (e.cls or "?") == cls]
        b = sum(1 for e in mine if e.time < around)
        a = len(mine) - b
        rates[cls] = (100 * b / (nodes * before_days) if nodes else 0.0,
                      100 * a / (nodes * after_days) if nodes else 0.0)
    return Comparison(around, before_days, after_days, rates)


def render_text(r: FleetReport) -> str:
    share = f"{100 * r.clean / r.nodes:.1f} %" if r.nodes else "-"
    out = [f"{r.since} .. {r.until} ({r.days:.0f} days): {r.nodes} nodes checked, {r.incidents} incidents",
           f"clean (no incident): {r.clean} of {r.nodes} nodes ({share})", ""]
    out.append("by class    incidents  nodes  mean time between incidents (per node)")
    for c in r.classes:
        mtbi = f"{c.mtbi_node_days:.0f} node-days" if c.mtbi_node_days is not None else "-"
        out.append(f"  {c.cls:<9} {c.incidents:>9}  {c.nodes:>5}  {mtbi}")
    if not r.classes:
        out.append("  (none)")
    out += ["", "repeat offenders (2 incidents or more):"]
    out += [f"  {n:<20} {c:>3}  {', '.join(k)}" for n, c, k in r.offenders] or ["  (none)"]
    if r.comparison:
        cmp = r.comparison
        out += ["", f"before / after {cmp.around} (incidents per 100 node-days; {cmp.before_days:.0f} and "
                    f"{cmp.after_days:.0f} days):"]
        for k, (b, a) in cmp.rates.items():
            change = f"{100 * (a - b) / b:+.0f} %" if b else "new"
            out.append(f"  {k:<9} {b:8.2f} -> {a:8.2f}  ({change})")
    return "\n".join(out) + "\n"
