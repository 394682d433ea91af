"""NVIDIA's Xid catalog (rules/xid-catalog.yaml) as data.

The catalog is shipped with the rules; this module reads and checks it once and answers lookups:
a code's entry, the action a resolution bucket or an NVML recovery action number maps to, the
words for an action, and which codes need their line or the rest of the log (named from the
catalog's own buckets and decode sheet). What a fault means and what to do about it is decided
in engine/gpufaults.py.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from troubleshoot.engine.shipped import shipped_rules_dir
from troubleshoot.errors import TroubleshootError
from troubleshoot.model import SEVERITIES

CATALOG_FILE = "xid-catalog.yaml"
# What a `catalog: xid` rule's title, explain and fix params may use besides its captures.
CATALOG_WORDS = ("action", "action_text", "xid_name", "xid_description", "xid_class")
# The catalog's buckets for codes that are about another Xid: "follow the other Xid" (45) and
# "the recovery action changed" (154, whose line names the new action).
FOLLOW_OTHER_BUCKET = "WORKFLOW_XID_45"
RECOVERY_CHANGE_BUCKET = "XID_154"


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
    decoded: frozenset[int]  # codes the NVLink5 decode sheet covers
    follows_other: frozenset[int]  # codes whose action is the other Xid's
    recovery_changes: frozenset[int]  # codes whose line names a new recovery action

    def action_text(self, action: str | None) -> str:
        return self.actions.get(action or "", "") if action else ""

    def entry(self, code: int) -> XidEntry | None:
        return self.xids.get(code)

    def recovery_action(self, number: int | None) -> tuple[str, str] | None:
        """(name, action) of NVML's nvmlDeviceGetGpuRecoveryAction value."""
        return None if number is None else self.recovery.get(int(number))


def _codes_in(xids: Mapping[int, XidEntry], bucket: str) -> frozenset[int]:
    return frozenset(code for code, e in xids.items() if e.immediate == bucket)


def catalog_path() -> Path:
    """The shipped catalog, beside the shipped rules (importlib.resources would cost a rule-set
    build its import, and tempfile's with it, to find the same folder)."""
    return shipped_rules_dir() / CATALOG_FILE


@functools.lru_cache(maxsize=4)
def load_catalog(path: str | None = None) -> Catalog:
    """Parse and check the catalog; a broken shipped catalog is a one-line error naming the line."""
    from troubleshoot.engine.documents import load_data_file

    p = Path(path) if path else catalog_path()
    data = load_data_file(p, "Xid catalog")

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
                   actions=actions, buckets=buckets, recovery=recovery, classes=classes, xids=xids, nvlink5=tuple(rows),
                   decoded=frozenset(r.xid for r in rows), follows_other=_codes_in(xids, FOLLOW_OTHER_BUCKET),
                   recovery_changes=_codes_in(xids, RECOVERY_CHANGE_BUCKET))


def actions() -> Mapping[str, str]:
    return load_catalog().actions
