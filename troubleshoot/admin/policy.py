"""How far the tool may reach, and what it does with one verdict: pure decisions.

- Drains: none within `boot_grace_s` of a boot (services still starting); at most `max_drain`
  nodes held by this tool across the cluster and `max_drain_percent` of each partition (by
  default 1 node or 10 % of the partition, whichever is larger); a node drains after
  `fail_after` failing checks in a row; a node drained by anyone else is never touched (the
  finding is recorded).
- Resumes: only a node this tool drained, after `pass_after` passing checks in a row since the
  drain (a warning breaks the run).
- Repairs: `cooldown_s` between repairs of one node; after `breaker_failures` failed
  verifications within `breaker_window_s` the circuit breaker opens, and until a person closes
  it (`troubleshoot breaker reset`) every action is only reported. `report_only` (the kill
  switch in the config) does the same at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from troubleshoot.admin.slurmctl import NodeState


@dataclass(frozen=True)
class Limits:
    max_drain: int | None = None  # nodes held by this tool at once, cluster-wide
    max_drain_percent: float | None = None  # of each partition
    fail_after: int = 1
    pass_after: int = 3
    cooldown_s: float = 900.0
    breaker_failures: int = 3
    breaker_window_s: float = 86400.0
    max_reboots: int = 2
    boot_grace_s: float = 300.0  # after a boot, failing checks are recorded, not drained on
    report_only: bool = False

    def partition_cap(self, size: int) -> int | None:
        """Nodes of a partition of `size` this tool may hold drained; None: no cap per partition."""
        if self.max_drain_percent is None and self.max_drain is None:
            return max(1, math.floor(size * 0.10))  # the default: 1 node or 10 %, whichever is larger
        if self.max_drain_percent is None:
            return None
        return max(1, math.floor(size * self.max_drain_percent / 100))


@dataclass
class Room:
    """What this tool holds drained now (from Slurm), kept up to date as a fleet's decisions drain
    more, so that the limits hold across one run."""

    limits: Limits
    held: set[str] = field(default_factory=set)
    held_in: dict[str, set[str]] = field(default_factory=dict)  # partition -> our drained nodes
    sizes: dict[str, int] = field(default_factory=dict)  # partition -> nodes

    @classmethod
    def from_nodes(cls, limits: Limits, nodes: dict[str, NodeState]) -> "Room":
        room = cls(limits)
        for st in nodes.values():
            for p in st.partitions:
                room.sizes[p] = room.sizes.get(p, 0) + 1
            if st.ours:
                room.held.add(st.name)
                for p in st.partitions:
                    room.held_in.setdefault(p, set()).add(st.name)
        return room

    def allows(self, partitions: Sequence[str]) -> str | None:
        """None when one more drain fits every limit; else why not, in words."""
        cap = self.limits.max_drain
        if cap is not None and len(self.held) >= cap:
            return (f"held by the limit: {len(self.held)} node{'s' if len(self.held) != 1 else ''} drained by "
                    f"troubleshoot already (--max-drain {cap})")
        for p in partitions:
            pcap = self.limits.partition_cap(self.sizes.get(p, 1))
            have = len(self.held_in.get(p, ()))
            if pcap is not None and have >= pcap:
                return (f"held by the limit: {have} of {self.sizes.get(p, 1)} nodes of partition {p} drained by "
                        f"troubleshoot already (at most {pcap})")
        return None

    def take(self, node: str, partitions: Sequence[str]) -> None:
        self.held.add(node)
        for p in partitions:
            self.held_in.setdefault(p, set()).add(node)

    def give(self, node: str) -> None:
        self.held.discard(node)
        for nodes in self.held_in.values():
            nodes.discard(node)


@dataclass(frozen=True)
class Decision:
    act: str  # drain, resume, hold, report (an action the kill switch or breaker held back), record, none
    why: str


def streak(statuses: Sequence[str], status: str) -> int:
    """How many of the newest `statuses` (newest first) are `status` in a row."""
    n = 0
    for s in statuses:
        if s != status:
            break
        n += 1
    return n


def decide(status: str, state: NodeState, recent: Sequence[str], limits: Limits, room: Room,
           breaker: str | None, uptime_s: float | None = None) -> Decision:
    """What to do with one check's verdict. `recent`: the node's check statuses newest first,
    this one included (for a drained node: only those since the drain); `breaker`: why the
    circuit breaker is open, or None; `uptime_s`: the node's time since boot, when known."""
    if status == "FAIL":
        if uptime_s is not None and uptime_s < limits.boot_grace_s and not state.drained:
            return Decision("record", f"{uptime_s:.0f} s after boot, within the grace window ({limits.boot_grace_s:.0f} "
                                      f"s): recorded, not drained")
        return _on_fail(state, recent, limits, room, breaker)
    if state.ours:
        if status != "PASS":
            return Decision("record", "a warning: the passing checks before a resume start again")
        n = streak(recent, "PASS")
        if n < limits.pass_after:
            return Decision("record", f"{n} of {limits.pass_after} passing checks in a row before a resume")
        return _held_back("resume", limits, breaker) or Decision("resume", f"{n} passing checks in a row")
    if state.drained:
        return Decision("record", f"drained by someone else ({state.reason or 'no reason'}): left as it is")
    return Decision("none", "")


def _on_fail(state: NodeState, recent: Sequence[str], limits: Limits, room: Room, breaker: str | None) -> Decision:
    if state.ours:
        return Decision("record", "already drained by troubleshoot")
    if state.drained:
        return Decision("record", f"drained by someone else ({state.reason or 'no reason'}): the finding is "
                                  f"recorded, the reason left as it is")
    n = streak(recent, "FAIL")
    if n < limits.fail_after:
        return Decision("record", f"{n} of {limits.fail_after} failing checks in a row before a drain")
    held = _held_back("drain", limits, breaker)
    if held:
        return held
    why = room.allows(state.partitions)
    if why:
        return Decision("hold", why)
    return Decision("drain", f"{n} failing check{'s' if n != 1 else ''} in a row")


def _held_back(act: str, limits: Limits, breaker: str | None) -> Decision | None:
    if limits.report_only:
        return Decision("report", f"would {act}: the config's report_only switch is on")
    if breaker:
        return Decision("report", f"would {act}: {breaker}")
    return None
