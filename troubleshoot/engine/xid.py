"""NVIDIA's Xid catalog (rules/xid-catalog.yaml) and what it says about one Xid line.

The catalog is data shipped with the rules; this module reads it once and answers, for a code
and the text of its kernel line, the symptom, severity and recovery action. Two codes need the
line itself: 144-150 (NVLink5) are decoded by unit, error status and IntrInfo bits as the
catalog's "Xid 144-150 Decode" sheet does, and 154 names its recovery action in the text.
Pure functions apart from reading the shipped file.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from troubleshoot.errors import TroubleshootError

CATALOG_FILE = "xid-catalog.yaml"
# What a `catalog: xid` rule's title, explain and fix params may use besides its captures.
CATALOG_WORDS = ("action", "action_text", "xid_name", "xid_description", "xid_class")
SEVERITIES = ("error", "warning", "info")


@dataclass(frozen=True)
class XidEntry:
    code: int
    name: str
    cls: str
    immediate: str
    investigatory: str
    severity: str
    description: str


@dataclass(frozen=True)
class NvlinkRow:
    xid: int
    units: tuple[str, ...]
    error_status: int
    intrinfo: tuple[str, ...]  # bit patterns (< R575, >= R575), '-' = any bit
    bucket: str
    investigatory: str
    severity: str


@dataclass(frozen=True)
class Verdict:
    """What the catalog says about one Xid event."""

    code: int
    name: str
    cls: str
    symptom: str
    severity: str
    action: str
    detail: str = ""  # how the action was decided when the line mattered (decode, 154, solo 45)


@dataclass(frozen=True)
class Catalog:
    version: str
    url: str
    source: str
    actions: Mapping[str, str]  # action id -> words for users
    buckets: Mapping[str, str]  # catalog bucket -> action id
    recovery: Mapping[int, tuple[str, str]]  # recovery action number -> (name, action id)
    classes: Mapping[str, str]  # class -> symptom
    xids: Mapping[int, XidEntry]
    nvlink5: tuple[NvlinkRow, ...]

    def action_text(self, action: str | None) -> str:
        return self.actions.get(action or "", "") if action else ""

    def entry(self, code: int) -> XidEntry | None:
        return self.xids.get(code)

    def verdict(self, code: int, text: str = "", others: tuple[int, ...] = (), nvswitch: bool = False) -> Verdict | None:
        """The catalog's answer for Xid `code` seen in `text`; `others` are the other Xid codes in
        the same log (Xid 45 follows them), `nvswitch` whether the machine has an NVSwitch fabric."""
        e = self.xids.get(code)
        if e is None:
            return None
        action = self.buckets.get(e.immediate, "contact-support")
        severity, detail = e.severity, ""
        if 144 <= code <= 150:
            action, severity, detail = self._nvlink5(code, text, action, severity)
        elif code == 154:
            named = self.recovery_from_154(text)
            if named:
                action, detail = named[1], f"recovery action {named[0]!r} named in the line"
                severity = "info" if action == "ignore" else "error"
        elif code == 45:
            previous = re.search(r"caused by previous Xid (\d+)", text)
            cause = int(previous.group(1)) if previous else None
            if cause is not None and cause not in others and cause != 45 and cause in self.xids:
                # the Xid that caused it is not in this log: the catalog says follow it
                v = self.verdict(cause, "", others, nvswitch)
                return Verdict(code=code, name=e.name, cls=v.cls, symptom=v.symptom, severity=v.severity,
                               action=v.action, detail=f"caused by Xid {cause} (not in this log): its action")
            if previous or [c for c in others if c != 45]:
                detail = "follows another Xid" + (f" ({previous.group(1)})" if previous else "")
            elif nvswitch:
                action, severity, detail = "restart-fabric-manager", "warning", "solo Xid 45 on an NVSwitch system"
        return Verdict(code=code, name=e.name, cls=e.cls, symptom=self.classes[e.cls], severity=severity,
                       action=action, detail=detail)

    def recovery_from_154(self, text: str) -> tuple[str, str] | None:
        """(name, action) of the recovery action an Xid 154 line changes to."""
        m = _XID154.search(text)
        if not m:
            return None
        name = (m.group("name") or "").strip().lower()
        for number, (known, action) in self.recovery.items():
            if name and known.lower() == name:
                return known, action
        number = int(m.group("code"), 16)
        return self.recovery.get(number)

    def recovery_action(self, number: int | None) -> tuple[str, str] | None:
        """(name, action) of NVML's nvmlDeviceGetGpuRecoveryAction value."""
        return None if number is None else self.recovery.get(int(number))

    def _nvlink5(self, code: int, text: str, action: str, severity: str) -> tuple[str, str, str]:
        m = _NVLINK5.search(text)
        if not m:
            return action, severity, ""
        unit, fatal = m.group("unit"), m.group("sev").lower().startswith("fatal")
        if m.group("intr"):
            intr, status = int(m.group("intr"), 16), int(m.group("status"), 16)
            for row in self.nvlink5:
                if (row.xid == code and row.error_status == status and _unit_matches(row.units, unit)
                        and any(_bits_match(p, intr) for p in row.intrinfo)):
                    act = self.buckets.get(row.bucket, "contact-support")
                    sev = "info" if act == "ignore" else ("error" if "fatal" in row.severity.lower().replace("non-fatal", "") else "warning")
                    return act, sev, f"decoded {unit} status {status:#x}: {row.bucket} ({row.severity})"
        # Not in the decode table (or no register words): the line's own Fatal/Nonfatal decides.
        if fatal:
            return "reset-gpu", "error", f"{unit} Fatal (not in the decode table)"
        return "ignore", "warning", f"{unit} Nonfatal (not in the decode table)"


_XID154 = re.compile(r"[Rr]ecovery action changed from \S+(?: \([^)]*\))? to (?P<code>0x[0-9a-fA-F]+|\d+)(?: \((?P<name>[^)]*)\))?")
_NVLINK5 = re.compile(r"\b(?P<unit>[A-Z][A-Z0-9_]*(?:/[A-Z0-9_]+)?)\s+(?P<sev>Nonfatal|Non-fatal|Fatal)\s+XC\d\s+i\d+\s+Link\s+-?\d+"
                      r"(?:\s+\((?P<intr>0x[0-9a-fA-F]+)\s+(?P<status>0x[0-9a-fA-F]+))?")


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


def catalog_path() -> Path:
    """The shipped catalog, found the way the symptom taxonomy is (the rules package)."""
    try:
        from importlib.resources import files

        return Path(str(files("troubleshoot_rules") / CATALOG_FILE))
    except (ImportError, ModuleNotFoundError, TypeError):
        return Path(__file__).resolve().parents[2] / "rules" / CATALOG_FILE


@functools.lru_cache(maxsize=4)
def load_catalog(path: str | None = None) -> Catalog:
    """Parse and check the catalog; a broken shipped catalog is a one-line error naming the line."""
    from troubleshoot.engine import yamldoc

    p = Path(path) if path else catalog_path()
    data = yamldoc.load_data_file(p, "Xid catalog")

    def fail(where, msg: str):
        line = where if isinstance(where, int) else getattr(where, "line", None)
        raise TroubleshootError(f"{p}:{line or 1}: {msg}")

    if not isinstance(data, dict):
        fail(1, "expected a mapping")
    for key in ("catalog", "actions", "buckets", "recovery_actions", "classes", "xids", "nvlink5"):
        if key not in data:
            fail(data, f"missing {key!r}")
    actions = {str(k): str(v) for k, v in data["actions"].items()}
    buckets = {}
    for b, a in data["buckets"].items():
        if a not in actions:
            fail(data["buckets"].line_of(b), f"bucket {b}: unknown action {a!r}")
        buckets[str(b)] = a
    recovery = {}
    for n, v in data["recovery_actions"].items():
        if not (isinstance(v, list) and len(v) == 2 and v[1] in actions):
            fail(data["recovery_actions"].line_of(n), "expected [name, action]")
        recovery[int(n)] = (str(v[0]), str(v[1]))
    classes = {str(k): str(v) for k, v in data["classes"].items()}
    xids = {}
    for code, row in data["xids"].items():
        ln = data["xids"].line_of(code)
        if not (isinstance(code, int) and isinstance(row, list) and len(row) == 6):
            fail(ln, "expected CODE: [mnemonic, class, immediate, investigatory, severity, description]")
        name, cls, imm, inv, sev, desc = (str(x) for x in row)
        if cls not in classes:
            fail(ln, f"Xid {code}: unknown class {cls!r}")
        if imm not in buckets:
            fail(ln, f"Xid {code}: bucket {imm!r} has no action under 'buckets'")
        if sev not in SEVERITIES:
            fail(ln, f"Xid {code}: severity must be one of {', '.join(SEVERITIES)}")
        xids[code] = XidEntry(code, name, cls, imm, inv, sev, desc)
    rows = []
    for i, row in enumerate(data["nvlink5"]):
        ln = data["nvlink5"].line_of(i)
        if not (isinstance(row, list) and len(row) == 8):
            fail(ln, "expected [xid, unit, error status, intrinfo < R575, intrinfo >= R575, bucket, investigatory, severity]")
        xid, unit, status, v1, v2, bucket, inv, sev = row
        if bucket not in buckets:
            fail(ln, f"bucket {bucket!r} has no action under 'buckets'")
        units = tuple(u for u in re.split(r"[/, ()]+", str(unit)) if u) + (str(unit),)
        rows.append(NvlinkRow(int(xid), units, int(str(status), 16), (str(v1), str(v2)), str(bucket), str(inv), str(sev)))
    meta = data["catalog"]
    return Catalog(version=str(meta.get("version", "")), url=str(meta.get("url", "")), source=str(meta.get("taken_from", "")),
                   actions=actions, buckets=buckets, recovery=recovery, classes=classes, xids=xids, nvlink5=tuple(rows))


def actions() -> Mapping[str, str]:
    return load_catalog().actions
