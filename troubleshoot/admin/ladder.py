"""The remediation ladder of one node: which repair to try now, from the finding's recovery action
and what the event store remembers of earlier repairs of the same GPU. Pure planning: the steps
are data (argv tuples and words), carried out by `remediate`.

Rungs, least drastic first: restart-fabric-manager, reset-gpu, reboot, service_required. A
fault that comes back after a repair (the check fails again with a fault logged after the repair)
climbs one rung; `max_reboots` reboots of the same GPU within RECURRENCE_DAYS end the ladder at
service_required: the node stays drained for a person, with the evidence path in its reason."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

from troubleshoot.engine.gpufaults import GPU_HOLDERS, PCI_ADDRESS

if TYPE_CHECKING:
    from troubleshoot.admin.events import EventStore
    from troubleshoot.admin.policy import Limits
    from troubleshoot.admin.verdict import Finding

RUNGS = ("restart-fabric-manager", "reset-gpu", "reboot", "service_required")
RECURRENCE_DAYS = 7
# The Xid catalog's actions (and a finding without one, by its class) -> the rung to start on.
START = {"restart-fabric-manager": "restart-fabric-manager", "reset-gpu": "reset-gpu", "drain-p2p": "reset-gpu",
         "reboot": "reboot", "recover-imex-domain": "reboot", "contact-support": "service_required",
         "check-mechanicals": "service_required"}
_BY_SYMPTOM = {"fabric-manager": "restart-fabric-manager", "driver-library-mismatch": "reboot",
               "driver-not-loaded": "reboot", "nouveau-conflict": "reboot", "gpu-hardware-fault": "reboot"}
PCI = re.compile(PCI_ADDRESS)


@dataclass(frozen=True)
class Step:
    what: str  # one line for the admin
    argv: tuple[str, ...] = ()  # a command, run without a shell; () for a step that is words only
    undo: tuple[str, ...] = ()


@dataclass(frozen=True)
class Rung:
    name: str  # one of RUNGS, or "none" (nothing the node can do: the job's own fault, or no action)
    why: str
    steps: tuple[Step, ...] = field(default=())
    verify_now: bool = True  # False for a reboot: the checks after boot verify it


def start_rung(f: Finding) -> str:
    if f.cls == "user":
        return "none"
    if f.action in START:
        return START[f.action]
    if f.action in ("ignore", "restart-app"):
        return "none"
    return _BY_SYMPTOM.get(f.symptom, "service_required" if f.cls == "config" else "reboot")


def next_rung(f: Finding, node: str, store: EventStore, limits: Limits) -> tuple[str, str]:
    """(rung, why): the finding's own rung, one above the last repair of this GPU when the fault
    came back after it, service_required after `max_reboots` reboots of it."""
    rung = start_rung(f)
    if rung == "none":
        return rung, "a fault of the job's own program, or one the catalog says needs no action"
    since = (datetime.now(timezone.utc) - timedelta(days=RECURRENCE_DAYS)).isoformat(timespec="seconds")
    done = [e for e in store.events(node=node, since=since, kinds=("repair",))
            if e.status == "done" and (f.gpu is None or e.gpu in (None, f.gpu)) and e.action in RUNGS]
    reboots = sum(1 for e in done if e.action == "reboot")
    if reboots >= limits.max_reboots:
        return "service_required", (f"{reboots} reboot{'s' if reboots != 1 else ''} of this node in "
                                    f"{RECURRENCE_DAYS} days and the fault is back (max_reboots {limits.max_reboots})")
    if done:
        last = done[-1]
        if RUNGS.index(last.action) >= RUNGS.index(rung):
            up = RUNGS[min(RUNGS.index(last.action) + 1, len(RUNGS) - 1)]
            return up, f"'{last.action}' at {last.time} did not hold: the fault came back after it"
    return rung, f"the first step for {f.text}" + (f" (catalog action: {f.action})" if f.action else "")


def rung_steps(rung: str, f: Finding, services: dict, evidence: str) -> Rung:
    gpu = f.gpu if f.gpu and PCI.fullmatch(f.gpu) else None
    target = ("-i", gpu) if gpu else ()
    if rung == "restart-fabric-manager":
        return Rung(rung, "Fabric Manager re-initialises the NVSwitch fabric",
                    (Step("restart nvidia-fabricmanager", ("systemctl", "restart", "nvidia-fabricmanager")),))
    if rung == "reset-gpu":
        held = [u for u in GPU_HOLDERS if services.get(u) == "active"]
        steps = [Step(f"stop {u}: it keeps the GPU open", ("systemctl", "stop", u), ("systemctl", "start", u))
                 for u in held]
        steps.append(Step(f"reset {('GPU ' + gpu) if gpu else 'the GPUs'}", ("nvidia-smi", "--gpu-reset", *target)))
        steps += [Step(f"start {u} again", ("systemctl", "start", u)) for u in held]
        return Rung(rung, "the catalog's recovery for this fault; the GPU must be idle (the node is drained)",
                    tuple(steps))
    if rung == "reboot":
        return Rung(rung, "the driver cannot recover the GPU without a reboot",
                    (Step("reboot in one minute (cancel: shutdown -c)",
                          ("shutdown", "-r", "+1", "troubleshoot: remediation reboot"), ("shutdown", "-c")),),
                    verify_now=False)
    if rung == "service_required":
        return Rung(rung, "the ladder is spent or the fault needs hands: the node stays drained for a person",
                    (Step(f"leave the node drained; evidence in {evidence}; open a support/RMA case with "
                          f"nvidia-bug-report.sh's report"),), verify_now=False)
    return Rung("none", "nothing to do on the node")
