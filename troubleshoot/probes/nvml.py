"""NVML through pynvml (nvidia-ml-py): driver, CUDA driver version and every GPU's state.

Each NVML call is tried on its own: a call that fails (NotSupported on a consumer card, a
permission problem) loses that one field, recorded under the GPU's `errors`, never the GPU.
"""

from __future__ import annotations

from typing import Any, Callable

from troubleshoot.probes.base import ProbeContext

# NVML clock-event (throttle) reason bits, by the names rules use.
THROTTLE_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
COMPUTE_MODES = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def probe(ctx: ProbeContext) -> dict:
    nv = ctx.nvml
    if nv is None:
        try:
            import pynvml as nv  # noqa: N813 - the module's own name
        except ImportError as exc:
            return {"available": False, "error": f"pynvml not installed: {exc}", "gpus": []}
    try:
        nv.nvmlInit()
    except Exception as exc:
        return {"available": False, "error": f"nvmlInit failed: {_err(exc)}", "gpus": []}
    try:
        out: dict[str, Any] = {"available": True, "error": None}
        errors: dict[str, str] = {}
        out["driver_version"] = _call(errors, "driver_version", lambda: _text(nv.nvmlSystemGetDriverVersion()))
        cuda = _call(errors, "cuda_driver_version", nv.nvmlSystemGetCudaDriverVersion)
        out["cuda_driver_version"] = f"{cuda // 1000}.{cuda % 1000 // 10}" if isinstance(cuda, int) else None
        out["nvml_version"] = _call(errors, "nvml_version", lambda: _text(nv.nvmlSystemGetNVMLVersion()))
        count = _call(errors, "device_count", nv.nvmlDeviceGetCount)
        out["gpus"] = [_gpu(nv, i, ctx) for i in range(count or 0)]
        out["topology"] = _topology(nv, count or 0)
        if errors:
            out["errors"] = errors
        return out
    finally:
        try:
            nv.nvmlShutdown()
        except Exception:
            pass


def _err(exc: Exception) -> str:
    return str(exc) or type(exc).__name__


def _call(errors: dict, field: str, fn: Callable, *args):
    try:
        return fn(*args)
    except Exception as exc:
        errors[field] = _err(exc)
        return None


def _gpu(nv, index: int, ctx: ProbeContext) -> dict:
    errors: dict[str, str] = {}
    g: dict[str, Any] = {"index": index}
    try:
        h = nv.nvmlDeviceGetHandleByIndex(index)
    except Exception as exc:
        return {"index": index, "available": False, "error": f"cannot get a handle: {_err(exc)}"}

    def get(field: str, fn: Callable, *args):
        return _call(errors, field, fn, h, *args)

    g["name"] = _maybe(get("name", nv.nvmlDeviceGetName), _text)
    g["uuid"] = _maybe(get("uuid", nv.nvmlDeviceGetUUID), _text)
    pci = get("pci_bus_id", nv.nvmlDeviceGetPciInfo)
    g["pci_bus_id"] = _text(pci.busId) if pci is not None else None
    cc = get("compute_capability", nv.nvmlDeviceGetCudaComputeCapability)
    g["compute_capability"] = f"{cc[0]}.{cc[1]}" if cc else None
    mem = get("memory", nv.nvmlDeviceGetMemoryInfo)
    g["memory_total_mib"] = mem.total // (1 << 20) if mem is not None else None
    g["memory_used_mib"] = mem.used // (1 << 20) if mem is not None else None
    util = get("utilization", nv.nvmlDeviceGetUtilizationRates)
    g["utilization_gpu"] = util.gpu if util is not None else None
    g["utilization_memory"] = util.memory if util is not None else None
    g["temperature_c"] = get("temperature_c", nv.nvmlDeviceGetTemperature, 0)  # NVML_TEMPERATURE_GPU
    # NVML_TEMPERATURE_THRESHOLD_SHUTDOWN = 0, _SLOWDOWN = 1: where the driver turns off / slows the GPU
    g["temperature_slowdown_c"] = get("temperature_slowdown_c", nv.nvmlDeviceGetTemperatureThreshold, 1)
    g["temperature_shutdown_c"] = get("temperature_shutdown_c", nv.nvmlDeviceGetTemperatureThreshold, 0)
    power = get("power_w", nv.nvmlDeviceGetPowerUsage)
    g["power_w"] = round(power / 1000, 1) if power is not None else None
    limit = get("power_limit_w", nv.nvmlDeviceGetEnforcedPowerLimit)
    g["power_limit_w"] = round(limit / 1000, 1) if limit is not None else None
    reasons_fn = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or nv.nvmlDeviceGetCurrentClocksThrottleReasons
    mask = get("throttle_reasons", reasons_fn)
    g["throttle_reasons"] = [name for bit, name in THROTTLE_REASONS.items() if mask & bit] if mask is not None else None
    g["pcie_gen_current"] = get("pcie_gen_current", nv.nvmlDeviceGetCurrPcieLinkGeneration)
    g["pcie_gen_max"] = get("pcie_gen_max", nv.nvmlDeviceGetMaxPcieLinkGeneration)
    g["pcie_width_current"] = get("pcie_width_current", nv.nvmlDeviceGetCurrPcieLinkWidth)
    g["pcie_width_max"] = get("pcie_width_max", nv.nvmlDeviceGetMaxPcieLinkWidth)
    # NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1, NVML_VOLATILE_ECC = 0
    g["ecc_uncorrected_volatile"] = get("ecc_uncorrected_volatile", nv.nvmlDeviceGetTotalEccErrors, 1, 0)
    rows = get("remapped_rows", nv.nvmlDeviceGetRemappedRows)
    if rows is not None:
        g["remapped_rows_correctable"], g["remapped_rows_uncorrectable"] = rows[0], rows[1]
        g["remapped_rows_pending"], g["remapped_rows_failure"] = bool(rows[2]), bool(rows[3])
    else:
        g["remapped_rows_pending"] = g["remapped_rows_failure"] = None
    pending = get("retired_pages_pending", nv.nvmlDeviceGetRetiredPagesPendingStatus)
    g["retired_pages_pending"] = bool(pending) if pending is not None else None
    mig = get("mig_mode", nv.nvmlDeviceGetMigMode)
    g["mig_mode"] = bool(mig[0]) if mig is not None else None
    mode = get("compute_mode", nv.nvmlDeviceGetComputeMode)
    g["compute_mode"] = COMPUTE_MODES.get(mode, str(mode)) if mode is not None else None
    pm = get("persistence_mode", nv.nvmlDeviceGetPersistenceMode)
    g["persistence_mode"] = bool(pm) if pm is not None else None
    procs = get("processes", nv.nvmlDeviceGetComputeRunningProcesses)
    g["processes"] = [_process(p, ctx) for p in procs] if procs is not None else None
    g["recovery_action"] = _recovery_action(nv, h, errors)
    if errors:
        g["errors"] = errors
    return g


def _recovery_action(nv, handle, errors: dict) -> int | None:
    """NVML's GPU recovery action (0 none, 1 GPU reset, 2 node reboot, 3 drain P2P, 4 drain and
    reset...): nvmlDeviceGetGpuRecoveryAction where the bindings have it, else the field value
    NVML_FI_DEV_GET_GPU_RECOVERY_ACTION; None on drivers without it (before R570)."""
    fn = getattr(nv, "nvmlDeviceGetGpuRecoveryAction", None)
    if fn is not None:
        value = _call(errors, "recovery_action", fn, handle)
        return int(value) if value is not None else None
    field_id = getattr(nv, "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION", None)
    get_fields = getattr(nv, "nvmlDeviceGetFieldValues", None)
    if field_id is None or get_fields is None:
        return None
    values = _call(errors, "recovery_action", get_fields, handle, [field_id])
    try:
        v = values[0]
        return None if getattr(v, "nvmlReturn", 0) != 0 else int(v.value.uiVal)
    except (TypeError, IndexError, AttributeError, ValueError):
        return None


def _maybe(value, fn):
    return fn(value) if value is not None else None


def _process(p, ctx: ProbeContext) -> dict:
    used = getattr(p, "usedGpuMemory", None)
    comm = ctx.read(f"/proc/{p.pid}/comm")
    return {"pid": p.pid, "name": comm.strip() if comm else None,
            "used_memory_mib": used // (1 << 20) if isinstance(used, int) else None}


# nvmlGpuTopologyLevel_t -> the link names of `nvidia-smi topo -m`
TOPOLOGY_LEVELS = {0: "X", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
MAX_NVLINKS = 18


def _topology(nv, count: int) -> list[dict] | None:
    """How each GPU pair talks: NV (NVLink), or the PCIe path (PIX ... SYS), as `topo -m` shows."""
    if count < 2:
        return [] if count else None
    try:
        handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        buses = [_text(nv.nvmlDeviceGetPciInfo(h).busId).lower()[-12:] for h in handles]
    except Exception:
        return None
    nvlinked: set[tuple[int, int]] = set()
    for a, h in enumerate(handles):
        for link in range(MAX_NVLINKS):
            try:
                if not nv.nvmlDeviceGetNvLinkState(h, link):
                    continue
                remote = _text(nv.nvmlDeviceGetNvLinkRemotePciInfo(h, link).busId).lower()[-12:]
            except Exception:
                break  # no NVLink on this GPU (NotSupported), or no more links
            if remote in buses:
                nvlinked.add(tuple(sorted((a, buses.index(remote)))))
    pairs = []
    for a in range(count):
        for b in range(a + 1, count):
            if (a, b) in nvlinked:
                pairs.append({"gpu_a": a, "gpu_b": b, "link": "NV", "text": "NV"})
                continue
            try:
                level = nv.nvmlDeviceGetTopologyCommonAncestor(handles[a], handles[b])
            except Exception:
                return None
            name = TOPOLOGY_LEVELS.get(int(level), str(level))
            pairs.append({"gpu_a": a, "gpu_b": b, "link": name, "text": name})
    return pairs
