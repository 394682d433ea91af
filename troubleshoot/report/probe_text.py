"""A readable summary of a snapshot, to paste into an issue or a chat.

Every value is data from a machine (or from a snapshot of one): shown on one line, its control
characters made visible, whatever its type; a part of unexpected shape is shown as far as it goes."""

from __future__ import annotations

from typing import Any

from troubleshoot.report.shapes import items, mapping
from troubleshoot.textsafe import terminal_safe


def _s(value: Any) -> str:
    return terminal_safe(str(value), keep_newlines=False)


def _v(value: Any, unit: str = "") -> str:
    if value is None:
        return "?"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return f"{_s(value)}{unit}"


def render(snap: dict) -> str:
    snap = mapping(snap)
    out = [f"troubleshoot snapshot (schema {_s(snap.get('schema'))}, {_s(snap.get('collected_at', '?'))})"
           + (" [redacted]" if snap.get("redacted") else "")]
    host = mapping(snap.get("host"))
    out.append(f"host:       {_v(host.get('hostname'))} · {_v(host.get('os'))} · kernel {_v(host.get('kernel_release'))}"
               f" · {_v(host.get('arch'))}")
    out += _nvml(mapping(snap.get("nvml")))
    out += _kernel(mapping(snap.get("kernel")))
    out += _cuda(mapping(snap.get("cuda")))
    out.append(_frameworks(mapping(snap.get("frameworks"))))
    out += _docker(mapping(snap.get("docker")))
    out += _system(mapping(snap.get("io")))
    acc = mapping(snap.get("accelerators"))
    if acc.get("families"):  # said only where there is one: most machines have none
        out.append(f"other accelerators: {_s(acc.get('summary') or ', '.join(map(_s, acc['families'])))}")
    env = mapping(snap.get("env"))
    if env:
        out.append("env:        " + " ".join(f"{_s(k)}={_s(v)}" for k, v in env.items()))
    bad = [f"{_s(n)}: {_s(p.get('status'))} ({_s(p.get('error'))})"
           for n, p in ((n, mapping(p)) for n, p in mapping(snap.get("probes")).items())
           if p.get("status") in ("error", "timeout")]
    if bad:
        out.append("probe problems: " + "; ".join(bad))
    return "\n".join(out) + "\n"


def _nvml(nv: dict) -> list[str]:
    if not nv.get("available"):
        return [f"nvml:       unavailable: {_v(nv.get('error'))}"]
    gpus = items(nv.get("gpus"))
    out = [f"driver:     {_v(nv.get('driver_version'))} (supports CUDA {_v(nv.get('cuda_driver_version'))})",
           f"gpus:       {len(gpus)}"]
    for g in map(mapping, gpus):
        out.append(
            f"  [{_s(g.get('index'))}] {_v(g.get('name'))} cc {_v(g.get('compute_capability'))} · "
            f"mem {_v(g.get('memory_used_mib'))}/{_v(g.get('memory_total_mib'))} MiB · "
            f"util {_v(g.get('utilization_gpu'), '%')} · "
            f"{_v(g.get('temperature_c'), '°C')} · {_v(g.get('power_w'), 'W')}/{_v(g.get('power_limit_w'), 'W')} · "
            f"PCIe gen{_v(g.get('pcie_gen_current'))}/{_v(g.get('pcie_gen_max'))} x{_v(g.get('pcie_width_current'))}/"
            f"{_v(g.get('pcie_width_max'))}")
        flags = _gpu_flags(g)
        if flags:
            out.append("      " + " · ".join(flags))
    return out


def _gpu_flags(g: dict) -> list[str]:
    flags = []
    reasons = [_s(r) for r in items(g.get("throttle_reasons")) if r != "gpu_idle"]
    if reasons:
        flags.append("throttled: " + ", ".join(reasons))
    if g.get("ecc_uncorrected_volatile"):
        flags.append(f"uncorrected ECC: {_s(g['ecc_uncorrected_volatile'])}")
    if g.get("remapped_rows_failure"):
        flags.append("ROW REMAP FAILURE")
    if g.get("remapped_rows_pending"):
        flags.append("row remap pending")
    if g.get("compute_mode") not in (None, "Default"):
        flags.append(f"compute mode {_s(g['compute_mode'])}")
    procs = [mapping(p) for p in items(g.get("processes"))]
    if procs:
        flags.append("processes: " + ", ".join(f"{_s(p.get('pid'))} {_s(p.get('name') or '?')} "
                                               f"{_v(p.get('used_memory_mib'), ' MiB')}" for p in procs[:4]))
    return flags


def _kernel(k: dict) -> list[str]:
    mods = k.get("modules")
    if mods is None:
        loaded = f"? ({_v(k.get('error'))})"
    elif isinstance(mods, dict):
        loaded = ", ".join(_s(m) for m, on in mods.items() if on) or "none of nvidia*/nouveau"
    else:
        loaded = ", ".join(map(_s, items(mods))) or _s(mods)
    out = [f"kernel:     modules {loaded} · nvidia module {_v(k.get('nvidia_module_version'))} · "
           f"nouveau blacklisted {_v(k.get('nouveau_blacklisted'))}"]
    xids = k.get("xid_events")
    if isinstance(xids, list) and xids:
        codes: dict[tuple[str, str], int] = {}
        for x in map(mapping, xids):
            key = (_s(x.get("code")), _s(x.get("pci")))
            codes[key] = codes.get(key, 0) + 1
        out.append("xid:        " + ", ".join(f"Xid {c} on {p} ×{n}" for (c, p), n in codes.items()))
    elif xids is None:
        out.append(f"xid:        kernel log not readable ({_v(k.get('kernel_log_error'))})")
    return out


def _library(lib: Any) -> str:
    if not isinstance(lib, dict):
        return _v(lib)
    return f"{_v(lib.get('name'))} {_s(lib.get('version') or '?')}"


def _cuda(c: dict) -> list[str]:
    libs = ", ".join(sorted({_library(lib) for lib in items(c.get("libraries"))}))
    out = [f"cuda:       nvcc {_v(c.get('nvcc_version'))} · libraries: {libs or 'none found'}"]
    for conflict in map(mapping, items(c.get("conflicts"))):
        majors = conflict.get("majors")
        majors = ", ".join(map(_s, majors)) if isinstance(majors, list) else _v(majors)
        out.append(f"            conflict: {_v(conflict.get('name'))} majors {majors}")
    return out


def _frameworks(fw: dict) -> str:
    parts = []
    for name in ("torch", "tensorflow", "jax"):
        if fw.get(name) is None:
            continue
        f = mapping(fw[name])
        if f.get("import_error"):
            parts.append(f"{name} import failed: {_s(f['import_error'])[:80]}")
        else:
            cuda = f"CUDA {_s(f['cuda'])}" if f.get("cuda") else "CPU-only build"
            parts.append(f"{name} {_v(f.get('version'))} ({cuda}, GPU usable {_v(f.get('cuda_available'))})")
    return (f"frameworks: {'; '.join(parts) if parts else ('none installed' if fw.get('available') else _v(fw.get('error')))}"
            f"  [{_v(fw.get('python'))}]")


def _docker(d: dict) -> list[str]:
    if not d.get("installed"):
        line = "docker:     not installed"
    elif d.get("server_version"):
        runtimes = ", ".join(map(_s, items(d.get("runtimes")))) or "?"
        line = (f"docker:     {_s(d['server_version'])} · runtimes {runtimes} · default {_v(d.get('default_runtime'))} · "
                f"nvidia runtime {_v(d.get('nvidia_runtime'))}")
    else:
        line = f"docker:     client only ({_v(d.get('server_error'))})"
    return [line, f"container:  {'yes (' + _v(d.get('container_hint')) + ')' if d.get('in_container') else 'no'}"]


def _system(io: dict) -> list[str]:
    limit = _v(io.get("cgroup_memory_limit_mib"), " MiB") if io.get("cgroup_memory_limit_mib") else "none"
    iowait = f"iowait {_v(io.get('iowait_pct'), '%')} · " if io.get("iowait_pct") is not None else ""
    return [f"system:     {_v(io.get('cpu_count'))} CPUs · RAM {_v(io.get('mem_available_mib'))}/{_v(io.get('mem_total_mib'))}"
            f" MiB free · cgroup limit {limit} · /dev/shm {_v(io.get('shm_size_mib'), ' MiB')} · open files "
            f"{_v(io.get('nofile_soft'))}",
            f"io:         {iowait}IO pressure (some, 10 s) {_v(io.get('pressure_some_avg10'), '%')}"]
