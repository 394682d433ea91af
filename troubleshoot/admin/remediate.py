"""One node's remediation: the ladder planned from its verdict and the event store, shown as a
dry run, or carried out step by step: incident, evidence kept before anything changes, drain,
repair, verification with real work, then resume or escalation. Every step is recorded."""

from __future__ import annotations

import json
import os
import shlex
import shutil
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping

from troubleshoot.admin import ladder, loop, policy, verify
from troubleshoot.admin.slurmctl import PREFIX
from troubleshoot.errors import TroubleshootError

if TYPE_CHECKING:
    from troubleshoot.admin.events import EventStore
    from troubleshoot.admin.slurmctl import NodeState, Slurm
    from troubleshoot.admin.verdict import Finding, Verdict

KERNEL_LINES = 2000


@dataclass
class Plan:
    verdict: Verdict
    finding: Finding | None
    rung: ladder.Rung
    why: str
    evidence: str
    drain: policy.Decision | None  # None: not asked (no --slurm)
    checks: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    held: str | None = None  # why nothing may be carried out now (cool-down, breaker, kill switch)

    def as_dict(self) -> dict:
        return {"node": self.verdict.node, "status": self.verdict.status, "finding": self.finding.as_dict()
                if self.finding else None, "rung": self.rung.name, "why": self.why, "evidence": self.evidence,
                "drain": {"act": self.drain.act, "why": self.drain.why} if self.drain else None,
                "repair": [{"what": s.what, "argv": list(s.argv)} for s in self.rung.steps],
                "verify": [{"name": n, "argv": [a if len(a) < 200 else "<script>" for a in argv]}
                           for n, argv in self.checks] if self.rung.verify_now else [],
                "held": self.held}


def plan(verdict: Verdict, state: NodeState, store: EventStore, limits: policy.Limits, room: policy.Room,
         facts: Mapping | None, slurm_asked: bool, python: str) -> Plan:
    node = verdict.node
    f = verdict.worst() if verdict.status == "FAIL" else None
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    evidence = str(store.path.parent / "evidence" / f"{node}-{stamp}")
    if f is None or f.cls == "user":
        return Plan(verdict, f, ladder.Rung("none", "nothing on this node to repair"), "the node does not fail its "
                    "check" if f is None else "a fault of the job's own program", evidence, None)
    name, why = ladder.next_rung(f, node, store, limits)
    rung = ladder.rung_steps(name, f, _services(facts), evidence)
    drain = None
    if slurm_asked:
        drain = policy.Decision("none", "already drained by troubleshoot") if state.ours else \
            policy.Decision("none", f"already drained ({state.reason})") if state.drained else \
            _drain_decision(state, limits, room, loop.breaker_open(store))
    return Plan(verdict, f, rung, why, evidence, drain, verify.planned(python, _gpus(facts)),
                held=_held(node, store, limits))


def _drain_decision(state: NodeState, limits: policy.Limits, room: policy.Room, breaker: str | None) -> policy.Decision:
    return policy.decide("FAIL", state, ["FAIL"] * limits.fail_after, limits, room, breaker)


def _held(node: str, store: EventStore, limits: policy.Limits) -> str | None:
    if limits.report_only:
        return "the config's report_only switch is on: the ladder is only shown"
    breaker = loop.breaker_open(store)
    if breaker:
        return breaker
    last = store.last(node, ("repair",))
    if last is not None and limits.cooldown_s > 0:
        until = datetime.fromisoformat(last.time) + timedelta(seconds=limits.cooldown_s)
        if until > datetime.now(timezone.utc):
            return (f"cool-down: the last repair of {node} was at {last.time}; the next is allowed from "
                    f"{until.isoformat(timespec='seconds')}")
    return None


def _services(facts: Mapping | None) -> dict:
    node = facts.get("node") if isinstance(facts, Mapping) else None
    services = node.get("gpu_services") if isinstance(node, Mapping) else None
    return dict(services) if isinstance(services, Mapping) else {}


def _gpus(facts: Mapping | None) -> int:
    nvml = facts.get("nvml") if isinstance(facts, Mapping) else None
    gpus = nvml.get("gpus") if isinstance(nvml, Mapping) else None
    return len(gpus) if isinstance(gpus, list) else 1


def describe(p: Plan, db: str) -> list[str]:
    """The ladder in words, one numbered step per line (continuations indented)."""
    node = p.verdict.node
    if p.finding is None or p.rung.name == "none":
        return [f"{node}: {p.verdict.status}: nothing to remediate ({p.why})"]
    lines = [f"{node}: FAIL  [{p.finding.cls}] {p.finding.text}",
             f"rung: {p.rung.name}: {p.why}"]
    reason = f"{PREFIX} {p.verdict.reason()}"
    steps = [f"record the incident in {db}",
             f"keep the evidence before any change, in {p.evidence}/: the facts, the kernel log's last "
             f"{KERNEL_LINES} lines, nvidia-smi -q, and nvidia-bug-report.sh's report where it is installed"]
    if p.drain is None:
        steps.append(f"drain: not asked (--slurm): make sure no job runs on {node}")
    elif p.drain.act == "drain":
        steps.append(f"drain {node}: scontrol update nodename={node} state=drain reason={shlex.quote(reason)}")
    else:
        steps.append(f"drain: {p.drain.act}: {p.drain.why}")
    repair = [f"repair ({p.rung.name}: {p.rung.why}):"] + [
        f"   {s.what}" + (f": {shlex.join(s.argv)}" if s.argv else "") for s in p.rung.steps]
    steps.append("\n".join(repair))
    if p.rung.verify_now:
        names = {"matmul": "a matrix product on each GPU, checked against the CPU",
                 "nccl-allreduce": "an NCCL all-reduce across the node's GPUs", "dcgm-diag": "dcgmi diag -r 1 (where installed)"}
        steps.append("verify: " + "; ".join(names[n] for n, _ in p.checks))
        nxt = ladder.RUNGS[min(ladder.RUNGS.index(p.rung.name) + 1, len(ladder.RUNGS) - 1)]
        steps.append(f"passed: resume {node} (a node troubleshoot drained); failed: escalate to {nxt}, the node "
                     f"stays drained")
    elif p.rung.name == "reboot":
        steps.append(f"after the boot: `troubleshoot check --slurm` (the node's health check) resumes {node} once "
                     f"it has passed its checks in a row; a fault that comes back climbs to the next rung")
    else:
        steps.append(f"{node} stays drained with reason {shlex.quote(_service_reason(p))}")
    lines += [f"  {i}. " + s.replace("\n", "\n     ") for i, s in enumerate(steps, 1)]
    if p.held:
        lines.append(f"held back: {p.held}")
    return lines


def _service_reason(p: Plan) -> str:
    return f"{PREFIX} service_required {p.verdict.reason()} evidence {p.evidence}"[:400]


# ---------------------------------------------------------------- carried out

def apply(p: Plan, state: NodeState, store: EventStore, slurm: Slurm | None, limits: policy.Limits,
          runner: Callable, facts: Mapping | None, python: str, say: Callable[[str], None]) -> str:
    """Carry the plan out; returns how it ended: resumed, escalated, rebooting, service_required,
    held, nothing."""
    node, f = p.verdict.node, p.finding
    if f is None or p.rung.name == "none":
        return "nothing"
    if p.held:
        raise TroubleshootError(f"not carried out: {p.held}")
    if os.geteuid() != 0 and any(s.argv for s in p.rung.steps):
        raise TroubleshootError(f"remediate --apply runs {p.rung.steps[0].argv[0]} and needs root: run it with sudo "
                                f"(the dry run needs none)")
    ev = {**f.event_fields(), "action": p.rung.name}
    store.record(node, "incident", status="remediation", reason=p.verdict.reason(), **ev)
    saved = keep_evidence(Path(p.evidence), facts, runner)
    store.record(node, "evidence", status="saved", reason=p.evidence, detail={"files": saved}, **ev)
    say(f"evidence: {p.evidence} ({', '.join(saved)})")
    if slurm is not None and p.drain is not None:
        if p.drain.act == "hold" or p.drain.act == "report":
            store.record(node, "held", status=p.drain.act, reason=p.drain.why, **ev)
            say(f"not repaired: {p.drain.why}")
            return "held"
        if p.drain.act == "drain":
            reason = f"{PREFIX} {p.verdict.reason()}"
            slurm.drain(node, reason)
            store.record(node, "drain", status="done", reason=reason, **ev)
            say(f"drained {node}")
    # Slurm's node reason is troubleshoot's to change only on a node it drained (now or before)
    ours = slurm if slurm is not None and p.drain is not None and (p.drain.act == "drain" or state.ours) else None
    if p.rung.name == "service_required":
        return _service(p, ours, store, ev, say)
    ok = _repair(p, store, runner, ev, say)
    if not p.rung.verify_now:
        return "rebooting" if ok else _escalate(p, ours, store, ev, say, "the reboot could not be scheduled")
    checks = verify.run(python, _gpus(facts), runner) if ok else []
    result = verify.verdict(checks) if ok else "failed"
    store.record(node, "verify", status=result, reason="; ".join(f"{c.name} {c.status}" for c in checks) or
                 "the repair failed", detail={"checks": [c.as_dict() for c in checks]}, **ev)
    for c in checks:
        say(f"verify {c.name}: {c.status}: {c.detail}")
    if result == "passed":
        if ours is not None:
            ours.resume(node)
            store.record(node, "resume", status="done", reason=f"verified after {p.rung.name}", **ev)
            say(f"resumed {node}")
        return "resumed"
    loop.trip_if_due(store, limits)
    return _escalate(p, ours, store, ev, say, "verification failed")


def _repair(p: Plan, store: EventStore, runner: Callable, ev: dict, say: Callable[[str], None]) -> bool:
    for s in p.rung.steps:
        if not s.argv:
            continue
        r = runner(list(s.argv), 120)
        say(f"{s.what}: {'done' if r.ok else 'failed: ' + (r.error or r.stderr.strip()[-200:] or str(r.returncode))}")
        if not r.ok:
            store.record(p.verdict.node, "repair", status="failed", reason=f"{s.what}: {r.error or r.returncode}", **ev)
            return False
    store.record(p.verdict.node, "repair", status="done", reason=p.why, **ev)
    return True


def _escalate(p: Plan, ours: Slurm | None, store: EventStore, ev: dict, say, why: str) -> str:
    nxt = ladder.RUNGS[min(ladder.RUNGS.index(p.rung.name) + 1, len(ladder.RUNGS) - 1)]
    store.record(p.verdict.node, "escalate", status=nxt, reason=f"{why} after {p.rung.name}: next {nxt}",
                 **{**ev, "action": nxt})
    say(f"escalated: {why}; next rung: {nxt}; {p.verdict.node} stays drained")
    if nxt == "service_required":
        return _service(p, ours, store, ev, say)
    return "escalated"


def _service(p: Plan, ours: Slurm | None, store: EventStore, ev: dict, say) -> str:
    """The end of the ladder: the node stays out of service for a person. `ours`: Slurm, when
    the node is troubleshoot's to give a new reason (else its reason stays as someone set it)."""
    reason = _service_reason(p)
    if ours is not None:
        ours.drain(p.verdict.node, reason)  # a drained node takes the new reason
    store.record(p.verdict.node, "escalate", status="service_required", reason=reason,
                 **{**ev, "action": "service_required"})
    say(f"service required: {reason}")
    return "service_required"


def keep_evidence(folder: Path, facts: Mapping | None, runner: Callable) -> list[str]:
    """What this machine can tell about the fault, saved before anything changes it."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    saved = []
    (folder / "facts.json").write_text(json.dumps(facts, indent=1, default=str))
    saved.append("facts.json")
    outputs = {"kernel-log.txt": ["journalctl", "-k", "-n", str(KERNEL_LINES), "--no-pager"],
               "nvidia-smi-q.txt": ["nvidia-smi", "-q"]}
    for name, argv in outputs.items():
        r = runner(argv, 30)
        if name == "kernel-log.txt" and not r.ok:
            r = runner(["dmesg", "-T"], 30)
        if r.ok and r.stdout:
            (folder / name).write_text("\n".join(r.stdout.splitlines()[-KERNEL_LINES:]) + "\n")
            saved.append(name)
    if shutil.which("nvidia-bug-report.sh"):
        r = runner(["nvidia-bug-report.sh", "--output-file", str(folder / "nvidia-bug-report.log.gz")], 300)
        if r.ok:
            saved.append("nvidia-bug-report.log.gz")
    return saved
