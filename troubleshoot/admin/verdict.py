"""A node's verdict from its diagnoses: PASS, WARN or FAIL, one finding per cause with its reason
class (hw, driver, config, user) and recovery action. Pure: the diagnoses and facts come in.

A finding of the job's own program (class `user`) never fails a node: a bad kernel in one job
must not take a healthy node out of service. An error of the GPU, the driver or the node's setup
fails it; a warning of any class warns."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

if TYPE_CHECKING:
    from troubleshoot.model import Diagnosis

CLASSES = ("hw", "driver", "config", "user")
TABLE = Path(__file__).resolve().parent.parent / "data" / "reason-classes.json"
EXIT = {"PASS": 0, "WARN": 1, "FAIL": 2}
# Probes whose silence is itself a finding: a hung NVML or kernel read is what a wedged GPU or
# driver looks like from user space.
WATCHED_PROBES = {"nvml": "NVML", "kernel": "the kernel log"}
# Printable ASCII only: a finding's words go into Slurm's node reason and node-problem-detector's
# one message line, where a control sequence or a newline would be read by other tools.
_UNPRINTABLE = re.compile(r"[^\x20-\x7e]+")


@dataclass(frozen=True)
class Finding:
    cls: str  # hw, driver, config, user
    severity: str  # error, warning, info
    text: str  # one line, printable ASCII
    symptom: str
    rule: str
    action: str | None = None  # the recovery action (the Xid catalog's vocabulary), None if none
    gpu: str | None = None  # PCI address, when one GPU is named
    xid: int | None = None

    def event_fields(self) -> dict[str, Any]:
        """What the event store keeps of it beside an event (events.EventStore.record's keywords)."""
        return {"cls": self.cls, "symptom": self.symptom, "action": self.action, "gpu": self.gpu, "xid": self.xid}

    def as_dict(self) -> dict[str, Any]:
        return {"class": self.cls, "severity": self.severity, "text": self.text, "symptom": self.symptom,
                "rule": self.rule, "action": self.action, "gpu": self.gpu, "xid": self.xid}


@dataclass(frozen=True)
class Verdict:
    node: str
    status: str  # PASS, WARN, FAIL
    findings: tuple[Finding, ...] = ()
    facts_from: str = ""
    dropped: tuple[str, ...] = field(default=())  # what was left out as older than the last repair
    uptime_s: float | None = None  # the node's time since boot, when its facts say

    @property
    def exit_code(self) -> int:
        return EXIT[self.status]

    def worst(self) -> Finding | None:
        """The finding that decides the verdict: errors of the node first, then warnings."""
        order = {"error": 0, "warning": 1, "info": 2}
        node_first = sorted(self.findings, key=lambda f: (f.cls == "user", order.get(f.severity, 3)))
        return node_first[0] if node_first else None

    def reason(self) -> str:
        """One line for Slurm's node reason: `[hw] Xid 79 on 0000:03:00 (...): reboot`."""
        f = self.worst()
        if f is None:
            return "passed"
        more = len([g for g in self.findings if g.severity in ("error", "warning")]) - 1
        text = f"[{f.cls}] {f.text}" + (f": {f.action}" if f.action else "") + (f" (+{more} more)" if more > 0 else "")
        return clean(text)[:200]

    def as_dict(self) -> dict[str, Any]:
        return {"node": self.node, "status": self.status, "exit": self.exit_code, "facts_from": self.facts_from,
                "reason": self.reason() if self.status != "PASS" else None,
                "findings": [f.as_dict() for f in self.findings], "dropped": list(self.dropped)}


def _short(text: str, most: int) -> str:
    if len(text) <= most:
        return text
    return text[:most].rsplit(" ", 1)[0].rstrip(",;:") + "..."


def clean(text: str) -> str:
    return _UNPRINTABLE.sub(" ", text).strip()


@lru_cache(maxsize=1)
def _table() -> dict:
    return json.loads(TABLE.read_text())


def symptom_class(symptom: str) -> str:
    """The reason class of a symptom; an unknown one (a team's own) is the node's setup."""
    return _table()["symptoms"].get(symptom, "config")


def xid_class(catalog_class: str) -> str:
    return _table()["xid_classes"].get(catalog_class, "hw")


def judge(node: str, diagnoses: Sequence[Diagnosis], facts: Mapping | None, facts_from: str,
          dropped: Sequence[str] = ()) -> Verdict:
    findings: list[Finding] = []
    for d in diagnoses:
        findings += _findings(d, facts)
    findings += _silent_probes(facts)
    status = "PASS"
    if any(f.severity == "warning" or (f.severity == "error" and f.cls == "user") for f in findings):
        status = "WARN"
    if any(f.severity == "error" and f.cls != "user" for f in findings):
        status = "FAIL"
    host = facts.get("host") if isinstance(facts, Mapping) else None
    uptime = host.get("uptime_s") if isinstance(host, Mapping) else None
    return Verdict(node, status, tuple(findings), facts_from, tuple(dropped),
                   uptime if isinstance(uptime, (int, float)) and not isinstance(uptime, bool) else None)


def _findings(d: Diagnosis, facts: Mapping | None) -> list[Finding]:
    reads_xids = any(e.path == "kernel.xid_events" for e in d.evidence)
    if reads_xids:
        xids = _xid_findings(d, facts)
        if xids:
            return xids
    return [Finding(symptom_class(d.symptom), d.severity, clean(d.title), d.symptom, d.rule.id, d.action)]


def _xid_findings(d: Diagnosis, facts: Mapping | None) -> list[Finding]:
    """One finding per Xid code and GPU that the diagnosis stands for (its catalog action)."""
    from troubleshoot.engine import gpufaults

    kernel = (gpufaults.with_verdicts(facts) or {}).get("kernel") if isinstance(facts, Mapping) else None
    events = kernel.get("xid_events") if isinstance(kernel, Mapping) else None
    seen: dict[tuple, Finding] = {}
    for e in events if isinstance(events, list) else ():
        if not isinstance(e, Mapping) or not isinstance(e.get("code"), int) or e.get("action") != d.action:
            continue
        code, pci = e["code"], str(e.get("pci") or "") or None
        v = gpufaults.verdict(code, str(e.get("line") or ""))
        what = _short(clean(str(e.get("message") or (v.name if v else ""))), 80)
        text = f"Xid {code} on {pci or 'a GPU'}" + (f" ({what})" if what else "")
        cls = xid_class(v.cls) if v else symptom_class(d.symptom)
        seen.setdefault((code, pci), Finding(cls, d.severity, text, d.symptom, d.rule.id, d.action, pci, code))
    return list(seen.values())


def _silent_probes(facts: Mapping | None) -> list[Finding]:
    probes = facts.get("probes") if isinstance(facts, Mapping) else None
    out = []
    for name, words in WATCHED_PROBES.items():
        status = probes.get(name) if isinstance(probes, Mapping) else None
        if isinstance(status, Mapping) and status.get("status") == "timeout":
            out.append(Finding("driver", "error", clean(f"{words} did not answer within {status.get('seconds')}s: "
                                                        "a hung driver or GPU"),
                               "gpu-hardware-fault", f"probe-{name}-hung", "reboot"))
    return out


def facts_since(facts: Mapping | None, since: str | None) -> tuple[Mapping | None, list[str]]:
    """The facts without the Xid events logged at or before `since` (the last repair of this
    node, ISO time): a GPU reset leaves the old Xid in the kernel log, and it must not fail the
    checks that decide whether the reset worked. Events without a time are kept: whether they
    came before the repair cannot be told."""
    kernel = facts.get("kernel") if isinstance(facts, Mapping) else None
    events = kernel.get("xid_events") if isinstance(kernel, Mapping) else None
    if not since or not isinstance(events, list):
        return facts, []
    cut = _when(since)
    kept, dropped = [], []
    for e in events:
        when = _when(e.get("time")) if isinstance(e, Mapping) else None
        if cut is not None and when is not None and _before(when, cut):
            dropped.append(f"Xid {e.get('code')} on {e.get('pci') or 'a GPU'} at {e.get('time')}, before the "
                           f"repair at {since}")
        else:
            kept.append(e)
    return {**facts, "kernel": {**kernel, "xid_events": kept}}, dropped


def _when(text: object) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def _before(when: datetime, cut: datetime) -> bool:
    """`when` at or before `cut`; a time without a zone is the machine's local time, as the
    kernel log's wall times are written."""
    if (when.tzinfo is None) != (cut.tzinfo is None):
        when, cut = (when.astimezone() if when.tzinfo is None else when), (cut.astimezone() if cut.tzinfo is None else cut)
    return when <= cut
