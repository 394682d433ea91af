"""One node's verdict carried out: recorded in the event store, then drained or resumed through
Slurm as the policy decides, and what a limit held back recorded too."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

from troubleshoot.admin import policy
from troubleshoot.admin.events import BREAKER
from troubleshoot.admin.slurmctl import PREFIX

if TYPE_CHECKING:
    from troubleshoot.admin.events import EventStore
    from troubleshoot.admin.slurmctl import NodeState, Slurm
    from troubleshoot.admin.verdict import Verdict


@dataclass(frozen=True)
class Outcome:
    verdict: Verdict
    decision: policy.Decision

    def as_dict(self) -> dict:
        return {**self.verdict.as_dict(), "slurm": {"act": self.decision.act, "why": self.decision.why}}


def breaker_open(store: EventStore) -> str | None:
    """Why the circuit breaker is open, or None when it is closed."""
    last = store.last(BREAKER, ("breaker",))
    if last is None or last.status != "open":
        return None
    return f"the circuit breaker is open since {last.time} ({last.reason}); `troubleshoot breaker reset` closes it"


def trip_if_due(store: EventStore, limits: policy.Limits) -> str | None:
    """Open the breaker when `breaker_failures` verifications failed within the window since it
    was last closed; returns why it is open (now or already), else None."""
    already = breaker_open(store)
    if already:
        return already
    closed = store.last(BREAKER, ("breaker",))
    start = (datetime.now(timezone.utc) - timedelta(seconds=limits.breaker_window_s)).isoformat(timespec="seconds")
    if closed is not None and closed.time > start:
        start = closed.time
    failed = [e for e in store.events(since=start, kinds=("verify",)) if e.status == "failed"]
    if len(failed) < limits.breaker_failures:
        return None
    nodes = sorted({e.node for e in failed})
    store.record(BREAKER, "breaker", status="open",
                 reason=f"{len(failed)} failed verifications since {start} on {', '.join(nodes)}",
                 detail={"failed": [e.id for e in failed]})
    return breaker_open(store)


def carry_out(verdict: Verdict, state: NodeState, store: EventStore, slurm: Slurm | None,
              limits: policy.Limits, room: policy.Room) -> Outcome:
    """Record the check, decide, and drain or resume through `slurm` (None: decide and record
    only, as without --slurm)."""
    node = verdict.node
    before = store.last(node, ("check",))
    worst = verdict.worst()
    ev = worst.event_fields() if worst else {}
    store.record(node, "check", status=verdict.status, reason=verdict.reason() if verdict.status != "PASS" else "",
                 detail=verdict.as_dict(), **ev)
    if verdict.status == "FAIL" and (before is None or before.status != "FAIL"):
        store.record(node, "incident", status="open", reason=verdict.reason(), **ev)
    if slurm is None:
        return Outcome(verdict, policy.Decision("none", "Slurm not asked (--slurm not given)"))
    since = store.last(node, ("drain",)) if state.ours else None
    recent = store.recent_checks(node, max(limits.pass_after, limits.fail_after) + 1, after=since)
    decision = policy.decide(verdict.status, state, recent, limits, room, breaker_open(store), verdict.uptime_s)
    reason = f"{PREFIX} {verdict.reason()}"
    if decision.act == "drain":
        slurm.drain(node, reason)
        room.take(node, state.partitions)
        store.record(node, "drain", status="done", reason=reason, **ev)
    elif decision.act == "resume":
        slurm.resume(node)
        room.give(node)
        store.record(node, "resume", status="done", reason=decision.why)
    elif decision.act in ("hold", "report"):
        store.record(node, "held", status=decision.act, reason=f"{decision.why}; would have: {reason}"
                     if verdict.status == "FAIL" else decision.why)
    return Outcome(verdict, decision)
