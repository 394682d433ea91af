"""Recorded node snapshots for the admin loop's tests: the healthy fixture snapshot
(tests/fixtures/snapshots/base.json) with a kernel event or an NVML reading from the recorded
machines in tests/fixtures/machines added (each source noted there)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from conftest import REPO

BASE = json.loads((REPO / "tests" / "fixtures" / "snapshots" / "base.json").read_text())
MACHINES = REPO / "tests" / "fixtures" / "machines"
# journalctl -k, tests/fixtures/machines/xid-79/dmesg.txt (GPU 0000:03:00)
XID79_LINE = (MACHINES / "xid-79" / "dmesg.txt").read_text().splitlines()[1].split("kernel: ", 1)[1]
# The Xid 48 (double-bit ECC) wording of NVIDIA's Xid catalog, on the same GPU address form.
XID48_LINE = ("NVRM: Xid (PCI:0000:3b:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error "
              "(DBE) has been detected on GPU in the framebuffer at partition 2, subpartition 1.")


def healthy() -> dict:
    return copy.deepcopy(BASE)


def with_xid(code: int, time: str | None = None) -> dict:
    snap = healthy()
    line, pci, message = (XID79_LINE, "0000:03:00", "GPU has fallen off the bus.") if code == 79 else \
        (XID48_LINE, "0000:3b:00", "An uncorrectable double bit error (DBE) has been detected on GPU in the "
                                   "framebuffer at partition 2, subpartition 1.")
    snap["kernel"]["xid_events"] = [{"code": code, "pci": pci, "pid": None, "process": None, "message": message,
                                     "line": line, "time": time, "current": True}]
    return snap


def throttled() -> dict:
    """NVML's throttle reasons as tests/fixtures/machines/throttled/nvidia-smi-q-excerpt.txt records
    them (HW Slowdown and HW Power Brake Slowdown active on a V100)."""
    snap = healthy()
    snap["nvml"]["gpus"][0]["throttle_reasons"] = ["hw_slowdown", "hw_power_brake_slowdown"]
    return snap


def nvml_hung() -> dict:
    snap = healthy()
    snap["nvml"] = {"available": False, "error": "timed out after 4s"}
    snap["probes"] = {"nvml": {"status": "timeout", "seconds": 4.0, "error": "timed out after 4s"}}
    return snap


def write(path: Path, snap: dict) -> Path:
    path.write_text(json.dumps(snap))
    return path
