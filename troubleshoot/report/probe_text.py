"""A readable summary of a snapshot, to paste into an issue or a chat."""

from __future__ import annotations


def _v(value, unit: str = "") -> str:
    if value is None:
        return "?"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return f"{value}{unit}"


def render(snap: dict) -> str:
    out: list[str] = []
    host = snap.get("host") or {}
    out.append(f"troubleshoot snapshot (schema {snap.get('schema')}, {snap.get('collected_at', '?')})"
               + (" [redacted]" if snap.get("redacted") else ""))
    out.append(f"host:       {_v(host.get('hostname'))} · {_v(host.get('os'))} · kernel {_v(host.get('kernel_release'))}"
               f" · {_v(host.get('arch'))}")

    nv = snap.get("nvml") or {}
    if nv.get("available"):
        out.append(f"driver:     {_v(nv.get('driver_version'))} (supports CUDA {_v(nv.get('cuda_driver_version'))})")
        gpus = nv.get("gpus") or []
        out.append(f"gpus:       {len(gpus)}")
        for g in gpus:
            reasons = [r for r in (g.get("throttle_reasons") or []) if r != "gpu_idle"]
            out.append(
                f"  [{g.get('index')}] {_v(g.get('name'))} cc {_v(g.get('compute_capability'))} · "
                f"mem {_v(g.get('memory_used_mib'))}/{_v(g.get('memory_total_mib'))} MiB · util {_v(g.get('utilization_gpu'), '%')} · "
                f"{_v(g.get('temperature_c'), '°C')} · {_v(g.get('power_w'), 'W')}/{_v(g.get('power_limit_w'), 'W')} · "
                f"PCIe gen{_v(g.get('pcie_gen_current'))}/{_v(g.get('pcie_gen_max'))} x{_v(g.get('pcie_width_current'))}/"
                f"{_v(g.get('pcie_width_max'))}")
            flags = []
            if reasons:
                flags.append("throttled: " + ", ".join(reasons))
            if g.get("ecc_uncorrected_volatile"):
                flags.append(f"uncorrected ECC: {g['ecc_uncorrected_volatile']}")
            if g.get("remapped_rows_failure"):
                flags.append("ROW REMAP FAILURE")
            if g.get("remapped_rows_pending"):
                flags.append("row remap pending")
            if g.get("compute_mode") not in (None, "Default"):
                flags.append(f"compute mode {g['compute_mode']}")
            procs = g.get("processes") or []
            if procs:
                flags.append("processes: " + ", ".join(f"{p.get('pid')} {p.get('name') or '?'} {_v(p.get('used_memory_mib'), ' MiB')}"
                                                       for p in procs[:4]))
            if flags:
                out.append("      " + " · ".join(flags))
    else:
        out.append(f"nvml:       unavailable: {_v(nv.get('error'))}")

    k = snap.get("kernel") or {}
    mods = k.get("modules")
    loaded = ", ".join(m for m, on in (mods or {}).items() if on) or "none of nvidia*/nouveau"
    out.append(f"kernel:     modules {loaded if mods is not None else '? (' + _v(k.get('error')) + ')'} · "
               f"nvidia module {_v(k.get('nvidia_module_version'))} · nouveau blacklisted {_v(k.get('nouveau_blacklisted'))}")
    xids = k.get("xid_events")
    if xids:
        codes: dict = {}
        for x in xids:
            codes.setdefault((x.get("code"), x.get("pci")), 0)
            codes[(x.get("code"), x.get("pci"))] += 1
        out.append("xid:        " + ", ".join(f"Xid {c} on {p} ×{n}" for (c, p), n in codes.items()))
    elif xids is None:
        out.append(f"xid:        kernel log not readable ({_v(k.get('kernel_log_error'))})")

    c = snap.get("cuda") or {}
    libs = ", ".join(sorted({f"{lib['name']} {lib.get('version') or '?'}" for lib in c.get("libraries") or []}))
    out.append(f"cuda:       nvcc {_v(c.get('nvcc_version'))} · libraries: {libs or 'none found'}")
    for conflict in c.get("conflicts") or []:
        out.append(f"            conflict: {conflict['name']} majors {', '.join(conflict['majors'])}")

    fw = snap.get("frameworks") or {}
    parts = []
    for name in ("torch", "tensorflow", "jax"):
        f = fw.get(name)
        if f is None:
            continue
        if f.get("import_error"):
            parts.append(f"{name} import failed: {f['import_error'][:80]}")
        else:
            cuda = f"CUDA {f['cuda']}" if f.get("cuda") else "CPU-only build"
            parts.append(f"{name} {_v(f.get('version'))} ({cuda}, GPU usable {_v(f.get('cuda_available'))})")
    out.append(f"frameworks: {'; '.join(parts) if parts else ('none installed' if fw.get('available') else _v(fw.get('error')))}"
               f"  [{_v(fw.get('python'))}]")

    d = snap.get("docker") or {}
    if d.get("installed"):
        if d.get("server_version"):
            out.append(f"docker:     {d['server_version']} · runtimes {', '.join(d.get('runtimes') or []) or '?'} · "
                       f"default {_v(d.get('default_runtime'))} · nvidia runtime {_v(d.get('nvidia_runtime'))}")
        else:
            out.append(f"docker:     client only ({_v(d.get('server_error'))})")
    else:
        out.append("docker:     not installed")
    out.append(f"container:  {'yes (' + _v(d.get('container_hint')) + ')' if d.get('in_container') else 'no'}")

    io = snap.get("io") or {}
    out.append(f"system:     {_v(io.get('cpu_count'))} CPUs · RAM {_v(io.get('mem_available_mib'))}/{_v(io.get('mem_total_mib'))} MiB free"
               f" · cgroup limit {_v(io.get('cgroup_memory_limit_mib'), ' MiB') if io.get('cgroup_memory_limit_mib') else 'none'}"
               f" · /dev/shm {_v(io.get('shm_size_mib'), ' MiB')} · open files {_v(io.get('nofile_soft'))}")
    iowait = f"iowait {_v(io.get('iowait_pct'), '%')} · " if io.get("iowait_pct") is not None else ""
    out.append(f"io:         {iowait}IO pressure (some, 10 s) {_v(io.get('pressure_some_avg10'), '%')}")
    env = snap.get("env") or {}
    if env:
        out.append("env:        " + " ".join(f"{k}={v}" for k, v in env.items()))
    probes = snap.get("probes") or {}
    bad = [f"{n}: {p.get('status')} ({p.get('error')})" for n, p in probes.items() if p.get("status") in ("error", "timeout")]
    if bad:
        out.append("probe problems: " + "; ".join(bad))
    return "\n".join(out) + "\n"
