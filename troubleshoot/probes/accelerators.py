"""Accelerators that are not NVIDIA GPUs (a TPU, an AMD GPU, an FPGA, Trainium, Gaudi), found by
PCI ids in /sys/bus/pci/devices (no lspci needed) and by their device nodes: troubleshoot
diagnoses NVIDIA GPUs only, and a machine whose accelerator is another one is told so. The
vendor table is data: troubleshoot/data/accelerators.json (with its sources)."""

from __future__ import annotations

import functools
import os
from pathlib import Path

from troubleshoot.probes.base import ProbeContext

PCI = "/sys/bus/pci/devices"
DEVICE_NODES = ("accel", "neuron")  # /dev/accel* (the kernel's accel class, TPUs), /dev/neuron*
# JSON, not YAML: a probe of every `diagnose` would otherwise import PyYAML (30-50 ms), which a
# start with the rule set cached never needs.
TABLE = Path(__file__).resolve().parent.parent / "data" / "accelerators.json"


@functools.lru_cache(maxsize=1)
def table() -> dict:
    import json

    return json.loads(TABLE.read_text(encoding="utf-8"))


def family(vendor: str, device: str, klass: str, known: dict | None = None) -> str | None:
    """The accelerator family of one PCI function (ids as sysfs writes them: `0x1ae0`), or None."""
    entry = (known or table())["vendors"].get(vendor)
    if entry is None:
        return None
    if "devices" in entry and device not in entry["devices"]:
        return None
    if "classes" in entry and klass[:6] not in entry["classes"]:
        return None
    return entry["name"]


def probe(ctx: ProbeContext) -> dict:
    out: dict = {"available": True, "error": None, "nvidia_gpus": 0, "devices": [], "families": [],
                 "device_nodes": [], "summary": None}
    known = table()
    try:
        names = sorted(os.listdir(ctx.path(PCI)))
    except OSError as exc:
        return {**out, "available": False, "error": f"{PCI}: {exc.strerror or exc}"}
    for name in names:
        ids = [(ctx.read(f"{PCI}/{name}/{f}", limit=64) or "").strip().lower() for f in ("vendor", "device", "class")]
        vendor, device, klass = ids
        if vendor == known["nvidia_vendor"] and klass[:6] in known["nvidia_gpu_classes"]:
            out["nvidia_gpus"] += 1
            continue
        found = family(vendor, device, klass, known)
        if found:
            out["devices"].append({"pci": name, "vendor_id": vendor, "device_id": device, "class": klass,
                                   "family": found})
    try:
        out["device_nodes"] = sorted(n for n in os.listdir(ctx.path("/dev")) if n.startswith(DEVICE_NODES))
    except OSError:
        pass
    out["families"] = sorted({d["family"] for d in out["devices"]})
    out["summary"] = summary(out["devices"], known) if out["devices"] else None
    return out


def summary(devices: list[dict], known: dict) -> str:
    """Each family with its count and the vendor's own tool, for a reader: `Google TPU (4
    devices): tpu-info ...`."""
    tools = {e["name"]: e["tool"] for e in known["vendors"].values()}
    counts: dict[str, int] = {}
    for d in devices:
        counts[d["family"]] = counts.get(d["family"], 0) + 1
    return "; ".join(f"{f} ({n} PCI device{'s' if n != 1 else ''}): {tools[f]}" for f, n in sorted(counts.items()))
