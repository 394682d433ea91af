"""GPU faults as verdicts: what an Xid means and what to do about it.

The one place where a GPU fault becomes a verdict (symptom, severity, recovery action): an Xid
line of a log, an Xid event the kernel probe stored, an Xid code handed to a fixer, or NVML's
recovery action for a GPU. NVIDIA's catalog (read by engine/xid.py) answers for each code; some
codes need their line or the rest of the log, and the catalog names which:
  - the codes of its NVLink5 decode sheet are decoded by unit, error status and IntrInfo bits;
  - a recovery-action change names the new action in its line, and is about the fault logged
    before it on the same GPU: that fault leads, taking the change's action when it is more
    drastic;
  - a code filed under the "follow the other Xid" workflow takes the action of the Xid that
    caused it when that one is not in the log, and alone on an NVSwitch system restarts Fabric
    Manager.
Probes store raw events only; the verdict fields of the facts (`kernel.xid_events[].symptom` and
`.action`) are computed here from each event's code and line, whenever facts are diagnosed or
written out, so a snapshot's own verdicts never outlive a change of the catalog.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Mapping, Sequence

from troubleshoot.engine.xid import Catalog, load_catalog
from troubleshoot.errors import TroubleshootError

if TYPE_CHECKING:
    from troubleshoot.model import Diagnosis

# The follow-the-other-Xid workflow when no other Xid is there and the machine has an NVSwitch
# fabric: the catalog's investigatory column says RESTART_FM.
SOLO_ON_NVSWITCH = ("restart-fabric-manager", "warning")
# What the facts' Xid events carry besides what the kernel logged: computed here, never read.
VERDICT_FIELDS = ("symptom", "action")
# Services that keep a GPU open: a reset fails while one runs, so they are stopped around it.
GPU_HOLDERS = ("nvidia-persistenced", "nvidia-dcgm", "dcgm", "nvidia-fabricmanager")
# A GPU's PCI address as the kernel log, NVML and nvidia-smi -i write it (domain optional).
PCI_ADDRESS = r"(?:[0-9A-Fa-f]{4,8}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?"


@dataclass(frozen=True)
class Verdict:
    """What the catalog says about one Xid event."""

    code: int
    name: str
    cls: str
    symptom: str
    severity: str
    action: str
    detail: str = ""  # how the action was decided when the line or the log mattered


def action_rank(action: str | None, unknown: int = -1) -> int:
    """How drastic `action` is: its place in the catalog's actions, listed least drastic first."""
    order = tuple(load_catalog().actions)
    return order.index(action) if action in order else unknown


def verdict(code: int, text: str = "", others: tuple[int, ...] = (), nvswitch: bool = False,
            catalog: Catalog | None = None) -> Verdict | None:
    """The catalog's answer for Xid `code` seen in `text`; `others` are the other Xid codes in
    the same log, `nvswitch` whether the machine has an NVSwitch fabric."""
    catalog = catalog or load_catalog()
    e = catalog.xids.get(code)
    if e is None:
        return None
    action = catalog.buckets.get(e.immediate, "contact-support")
    severity, detail = e.severity, ""
    if code in catalog.decoded:
        action, severity, detail = _decode_nvlink5(catalog, code, text, action, severity)
    elif code in catalog.recovery_changes:
        named = recovery_named(text, catalog)
        if named:
            action, detail = named[1], f"recovery action {named[0]!r} named in the line"
            severity = "info" if action == "ignore" else "error"
    elif code in catalog.follows_other:
        previous = re.search(r"caused by previous Xid (\d+)", text)
        cause = int(previous.group(1)) if previous else None
        if cause is not None and cause not in others and cause not in catalog.follows_other and cause in catalog.xids:
            # the Xid that caused it is not in this log: the catalog says follow it
            v = verdict(cause, "", others, nvswitch, catalog)
            return replace(v, code=code, name=e.name, detail=f"caused by Xid {cause} (not in this log): its action")
        if previous or [c for c in others if c not in catalog.follows_other]:
            detail = "follows another Xid" + (f" ({previous.group(1)})" if previous else "")
        elif nvswitch:
            (action, severity), detail = SOLO_ON_NVSWITCH, f"solo Xid {code} on an NVSwitch system"
    return Verdict(code=code, name=e.name, cls=e.cls, symptom=catalog.classes[e.cls], severity=severity,
                   action=action, detail=detail)


def recovery_named(text: str, catalog: Catalog | None = None) -> tuple[str, str] | None:
    """(name, action) of the recovery action a recovery-action change line changes to."""
    m = _RECOVERY_CHANGE.search(text)
    if not m:
        return None
    catalog = catalog or load_catalog()
    name = (m.group("name") or "").strip().lower()
    for known, action in catalog.recovery.values():
        if name and known.lower() == name:
            return known, action
    return catalog.recovery.get(int(m.group("code"), 16))


def nvml_recovery(number: object) -> tuple[str, str] | None:
    """(name, action) of NVML's nvmlDeviceGetGpuRecoveryAction value; None when it asks for
    nothing (0) or is not a number."""
    if not isinstance(number, int) or isinstance(number, bool) or not number:
        return None
    return load_catalog().recovery_action(number)


def gpu_recovery(facts: Mapping | None, pci: str | None) -> tuple[str, str] | None:
    """(name, action) of NVML's GPU recovery action for the GPU at `pci`, when the facts have one."""
    if not pci or not facts:
        return None
    want = pci.lower().split(".")[0][-7:]
    for g in ((facts.get("nvml") or {}).get("gpus") or []):
        bus = str(g.get("pci_bus_id") or "").lower().split(".")[0]
        if bus and bus.endswith(want) and g.get("recovery_action"):
            return nvml_recovery(g["recovery_action"])
    return None


def nvswitch(facts: Mapping | None) -> bool:
    """Whether the facts show an NVSwitch fabric (Fabric Manager present or NVSwitches seen)."""
    fm = (facts or {}).get("fabric_manager") or {}
    return bool(isinstance(fm, Mapping) and (fm.get("nvswitch_count") or fm.get("installed")))


# ---------------------------------------------------------------- Xid lines of a log

def log_verdict(code: int, texts: Sequence[str], others: tuple[int, ...], facts: Mapping | None,
                pci: str | None) -> Verdict | None:
    """The verdict for the lines of one Xid code in a log (`others`: every Xid code the log has).
    Lines of one code may disagree (NVLink5 units): the most drastic action wins, except for a
    recovery-action change, where the latest line is the one in force. NVML's recovery action for
    the GPU, when the facts have it, is preferred over the log."""
    catalog = load_catalog()
    fabric = nvswitch(facts)
    verdicts = [v for v in (verdict(code, t, others, fabric, catalog) for t in texts) if v is not None]
    if not verdicts:
        return None
    if code in catalog.recovery_changes:
        v = verdicts[-1]
    else:
        v = max(verdicts, key=lambda v: action_rank(v.action, unknown=0))
    nvml = gpu_recovery(facts, pci)
    if nvml and nvml[1] != v.action:
        v = replace(v, action=nvml[1], detail=(v.detail + "; " if v.detail else "")
                    + f"NVML's recovery action for this GPU is {nvml[0]!r} (preferred over the log)")
    return v


def catalog_words(v: Verdict) -> dict[str, str]:
    """What a `catalog: xid` rule's text may name besides its captures (xid.CATALOG_WORDS)."""
    catalog = load_catalog()
    return {"action": v.action, "xid_name": v.name, "xid_description": catalog.xids[v.code].description,
            "action_text": catalog.action_text(v.action), "xid_class": v.cls}


def follow_recovery_changes(diagnoses: list[Diagnosis]) -> list[Diagnosis]:
    """A recovery-action change is about another Xid (the catalog: "informational only regarding
    another Xid"): on a GPU that logged the fault too, the fault leads, taking the change's
    action when that is more drastic, and the change's diagnosis ranks after it."""
    catalog = load_catalog()
    not_faults = catalog.recovery_changes | catalog.follows_other

    def gpu(d: Diagnosis) -> str:
        return (d.xid or {}).get("pci") or ""

    changes = {gpu(d): d for d in diagnoses if d.xid and d.xid.get("code") in catalog.recovery_changes}
    if not changes:
        return diagnoses
    faults = {gpu(d) for d in diagnoses if d.xid and d.xid.get("code") not in not_faults}
    out = []
    for d in diagnoses:
        code = (d.xid or {}).get("code")
        change = changes.get(gpu(d))
        if code in catalog.recovery_changes and gpu(d) in faults:
            d = replace(d, downstream_of_found=(d.symptom,),
                        notes=d.notes + ("follows the Xid logged before it on the same GPU",))
        elif (change is not None and code is not None and code not in not_faults
              and action_rank(change.action) > action_rank(d.action)):
            d = replace(d, action=change.action,
                        notes=d.notes + (f"Xid {change.xid['code']} on the same GPU asks for {change.action}",))
        out.append(d)
    return out


# ---------------------------------------------------------------- Xid events of the facts

def with_verdicts(facts: Mapping | None) -> Mapping | None:
    """`facts` with each Xid event's verdict fields computed from its code and line, whatever the
    event carried (a snapshot written by an older probe holds verdicts of its own): a copy when
    there are events, `facts` itself otherwise."""
    kernel = facts.get("kernel") if isinstance(facts, Mapping) else None
    events = kernel.get("xid_events") if isinstance(kernel, Mapping) else None
    if not isinstance(events, list) or not events:
        return facts
    try:
        catalog = load_catalog()
    except TroubleshootError:
        catalog = None  # a broken catalog loses the verdicts, never the facts
    return {**facts, "kernel": {**kernel, "xid_events": [_event_with_verdict(e, catalog) for e in events]}}


def _event_with_verdict(event: object, catalog: Catalog | None) -> object:
    if not isinstance(event, Mapping):
        return event
    code = event.get("code")
    known = catalog is not None and isinstance(code, int) and not isinstance(code, bool)
    v = verdict(code, str(event.get("line") or ""), catalog=catalog) if known else None
    return {**event, "symptom": v.symptom if v else None, "action": v.action if v else None}


# ---------------------------------------------------------------- line decoding

_RECOVERY_CHANGE = re.compile(r"[Rr]ecovery action changed from \S+(?: \([^)]*\))? to (?P<code>0x[0-9a-fA-F]+|\d+)"
                              r"(?: \((?P<name>[^)]*)\))?")
_NVLINK5 = re.compile(r"\b(?P<unit>[A-Z][A-Z0-9_]*(?:/[A-Z0-9_]+)?)\s+(?P<sev>Nonfatal|Non-fatal|Fatal)\s+XC\d\s+i\d+\s+Link\s+-?\d+"
                      r"(?:\s+\((?P<intr>0x[0-9a-fA-F]+)\s+(?P<status>0x[0-9a-fA-F]+))?")


def _decode_nvlink5(catalog: Catalog, code: int, text: str, action: str, severity: str) -> tuple[str, str, str]:
    """(action, severity, how) for an NVLink5 line, as the catalog's "Xid 144-150 Decode" sheet does."""
    m = _NVLINK5.search(text)
    if not m:
        return action, severity, ""
    unit, fatal = m.group("unit"), m.group("sev").lower().startswith("fatal")
    if m.group("intr"):
        intr, status = int(m.group("intr"), 16), int(m.group("status"), 16)
        for row in catalog.nvlink5:
            if (row.xid == code and row.error_status == status and _unit_matches(row.units, unit)
                    and any(_bits_match(p, intr) for p in row.intrinfo)):
                act = catalog.buckets.get(row.bucket, "contact-support")
                sev = "info" if act == "ignore" else ("error" if "fatal" in row.severity.lower().replace("non-fatal", "") else "warning")
                return act, sev, f"decoded {unit} status {status:#x}: {row.bucket} ({row.severity})"
    # Not in the decode table (or no register words): the line's own Fatal/Nonfatal decides.
    if fatal:
        return "reset-gpu", "error", f"{unit} Fatal (not in the decode table)"
    return "ignore", "warning", f"{unit} Nonfatal (not in the decode table)"


def _norm(unit: str) -> str:
    return re.sub(r"[^A-Z0-9_]", "", unit.upper().replace("-", "_"))


def _unit_matches(units: tuple[str, ...], logged: str) -> bool:
    got = _norm(logged)
    return any(_norm(u) == got for u in units)


def _bits_match(pattern: str, value: int) -> bool:
    if len(pattern) != 32:
        return False
    for i, ch in enumerate(pattern):
        bit = (value >> (31 - i)) & 1
        if (ch == "1" and not bit) or (ch == "0" and bit):
            return False
    return True
