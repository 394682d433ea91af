"""`nvidia-smi -q` as NVML: the dump parsed, and replayed through the pynvml calls the NVML probe
makes, so that a dump yields exactly the facts the probe would have read on that machine.

`nvidia-smi -q` prints what NVML returns, field by field. Used for dumps users paste into a log
(troubleshoot.paste) and, in tests, for recorded dumps of real machines. Fields the dump shows as
N/A or [Not Supported], or does not show, raise NVMLError_NotSupported, as NVML itself does.
"""

from __future__ import annotations

import re
from collections import namedtuple
from pathlib import Path

import pynvml

Memory = namedtuple("Memory", "total free used")
Util = namedtuple("Util", "gpu memory")
Pci = namedtuple("Pci", "busId")
Proc = namedtuple("Proc", "pid usedGpuMemory")

_MISSING = ("N/A", "[Not Supported]", "Not Supported", "[N/A]", "Unknown Error", "[Unknown Error]")


def parse(text: str) -> dict:
    """{'driver': ..., 'cuda': ..., 'gpus': [ {path tuple: value} ]} from `nvidia-smi -q` text."""
    top: dict = {}
    gpus: list[dict] = []
    stack: list[tuple[int, str]] = []
    current: dict | None = None
    for raw in text.splitlines():
        if not raw.strip() or raw.startswith("="):
            continue
        m = re.match(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)\s*$", raw)
        if m:
            current = {("Bus Id",): m.group(1)}
            gpus.append(current)
            stack = []
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        key, sep, value = raw.strip().partition(":")
        key, value = key.strip(), value.strip()
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = tuple(k for _, k in stack) + (key,)
        if current is None:
            top[key] = value
        else:
            current.setdefault(path, value)
            if key == "Process ID":
                current.setdefault("_procs", []).append({"pid": value})
            elif key == "Used GPU Memory" and current.get("_procs"):
                current["_procs"][-1]["mem"] = value
        if not sep or not value:
            stack.append((indent, key))
        else:
            stack.append((indent, key))  # a valued key may still have nested children (HW Slowdown)
    return {"driver": top.get("Driver Version"), "cuda": top.get("CUDA Version"), "gpus": gpus}


def _find(gpu: dict, *suffix: str):
    for path, value in gpu.items():
        if isinstance(path, tuple) and len(path) >= len(suffix) and path[-len(suffix):] == suffix:
            return value
    return None


def _need(value):
    if value is None or value in _MISSING or value == "":
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
    return value


def _num(value) -> float:
    return float(str(_need(value)).split()[0].rstrip("x%"))


class ReplayNVML:
    """The subset of pynvml the probe calls, answering from a parsed dump."""

    NVMLError = pynvml.NVMLError

    def __init__(self, dump: dict | str | Path, init_error: int | None = None):
        if isinstance(dump, Path) or (isinstance(dump, str) and "\n" not in dump and len(dump) < 4096
                                      and Path(dump).exists()):
            dump = parse(Path(dump).read_text())
        elif isinstance(dump, str):
            dump = parse(dump)
        self.dump = dump
        self.init_error = init_error

    def nvmlInit(self):
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)

    def nvmlShutdown(self):
        pass

    def nvmlSystemGetDriverVersion(self):
        return _need(self.dump["driver"])

    def nvmlSystemGetCudaDriverVersion(self):
        major, _, minor = _need(self.dump["cuda"]).partition(".")
        return int(major) * 1000 + int(minor or 0) * 10

    def nvmlSystemGetNVMLVersion(self):
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)

    def nvmlDeviceGetCount(self):
        return len(self.dump["gpus"])

    def nvmlDeviceGetHandleByIndex(self, i):
        return self.dump["gpus"][i]

    def nvmlDeviceGetName(self, g):
        return _need(_find(g, "Product Name"))

    def nvmlDeviceGetUUID(self, g):
        return _need(_find(g, "GPU UUID"))

    def nvmlDeviceGetPciInfo(self, g):
        return Pci(_need(_find(g, "Bus Id")))

    def nvmlDeviceGetCudaComputeCapability(self, g):
        major, _, minor = str(_need(_find(g, "CUDA Compute Capability") or _find(g, "Compute Capability"))).partition(".")
        return int(major), int(minor or 0)

    def nvmlDeviceGetMemoryInfo(self, g):
        total = int(_num(_find(g, "FB Memory Usage", "Total"))) << 20
        used = int(_num(_find(g, "FB Memory Usage", "Used"))) << 20
        return Memory(total, total - used, used)

    def nvmlDeviceGetUtilizationRates(self, g):
        return Util(int(_num(_find(g, "Utilization", "Gpu"))), int(_num(_find(g, "Utilization", "Memory"))))

    def nvmlDeviceGetTemperature(self, g, sensor):
        return int(_num(_find(g, "Temperature", "GPU Current Temp")))

    def nvmlDeviceGetTemperatureThreshold(self, g, which):
        key = {0: "GPU Shutdown Temp", 1: "GPU Slowdown Temp"}.get(which)
        if key is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return int(_num(_find(g, "Temperature", key)))

    def nvmlDeviceGetPowerUsage(self, g):
        v = _find(g, "GPU Power Readings", "Power Draw") or _find(g, "Power Readings", "Power Draw")
        return int(_num(v) * 1000)

    def nvmlDeviceGetEnforcedPowerLimit(self, g):
        v = (_find(g, "GPU Power Readings", "Current Power Limit") or _find(g, "Power Readings", "Enforced Power Limit")
             or _find(g, "Power Readings", "Power Limit"))
        return int(_num(v) * 1000)

    def nvmlDeviceGetCurrentClocksEventReasons(self, g):
        names = {"Idle": 0x1, "Applications Clocks Setting": 0x2, "SW Power Cap": 0x4, "HW Slowdown": 0x8,
                 "Sync Boost": 0x10, "SW Thermal Slowdown": 0x20, "HW Thermal Slowdown": 0x40,
                 "HW Power Brake Slowdown": 0x80, "Display Clock Setting": 0x100}
        mask, seen = 0, False
        for path, value in g.items():
            if isinstance(path, tuple) and path[0] in ("Clocks Event Reasons", "Clocks Throttle Reasons") and path[-1] in names:
                seen = True
                if value == "Active":
                    mask |= names[path[-1]]
        if not seen:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return mask

    def nvmlDeviceGetCurrPcieLinkGeneration(self, g):
        return int(_num(_find(g, "PCIe Generation", "Current")))

    def nvmlDeviceGetMaxPcieLinkGeneration(self, g):
        return int(_num(_find(g, "PCIe Generation", "Max")))

    def nvmlDeviceGetCurrPcieLinkWidth(self, g):
        return int(_num(_find(g, "Link Width", "Current")))

    def nvmlDeviceGetMaxPcieLinkWidth(self, g):
        return int(_num(_find(g, "Link Width", "Max")))

    def nvmlDeviceGetTotalEccErrors(self, g, error_type, counter):
        v = _find(g, "ECC Errors", "Volatile", "DRAM Uncorrectable")
        if v is None:
            v = _find(g, "ECC Errors", "Volatile", "Double Bit", "Total")
        return int(_num(v))

    def nvmlDeviceGetRemappedRows(self, g):
        pending = _need(_find(g, "Remapped Rows", "Pending"))
        failure = _need(_find(g, "Remapped Rows", "Remapping Failure Occurred"))
        corr = int(_num(_find(g, "Remapped Rows", "Correctable Error")))
        unc = int(_num(_find(g, "Remapped Rows", "Uncorrectable Error")))
        return corr, unc, pending == "Yes", failure == "Yes"

    def nvmlDeviceGetRetiredPagesPendingStatus(self, g):
        v = _need(_find(g, "Retired Pages", "Pending Page Blacklist") or _find(g, "Retired Pages", "Pending"))
        return 1 if v == "Yes" else 0

    def nvmlDeviceGetMigMode(self, g):
        v = _need(_find(g, "MIG Mode", "Current"))
        return (1 if v == "Enabled" else 0, 0)

    def nvmlDeviceGetComputeMode(self, g):
        v = _need(_find(g, "Compute Mode"))
        return {"Default": 0, "Exclusive_Thread": 1, "Prohibited": 2, "Exclusive_Process": 3}[v]

    # "GPU Recovery Action" as nvidia-smi -q prints it (R570+), back to NVML's enum
    RECOVERY = {"none": 0, "gpu reset required": 1, "reset": 1, "node reboot required": 2, "reboot": 2,
                "drain p2p": 3, "drain and reset": 4}

    def nvmlDeviceGetGpuRecoveryAction(self, g):
        v = _need(_find(g, "GPU Recovery Action"))
        if v.lower() not in self.RECOVERY:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return self.RECOVERY[v.lower()]

    def nvmlDeviceGetPersistenceMode(self, g):
        return 1 if _need(_find(g, "Persistence Mode")) == "Enabled" else 0

    def nvmlDeviceGetComputeRunningProcesses(self, g):
        procs = g.get("_procs", [])
        out = []
        for p in procs:
            mem = p.get("mem")
            out.append(Proc(int(p["pid"]), int(_num(mem)) << 20 if mem and mem not in _MISSING else None))
        return out
