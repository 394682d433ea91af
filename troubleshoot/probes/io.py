"""System and IO: CPUs, memory and its cgroup limit, open-files limit, /dev/shm, tmpfs, and IO
pressure from the kernel's averages (/proc/pressure/io); where the kernel has none, iowait and
per-disk throughput sampled over a short window instead."""

from __future__ import annotations

import os
import resource

from troubleshoot.probes.base import ProbeContext


def probe(ctx: ProbeContext) -> dict:
    out: dict = {"available": True}
    out["cpu_count"] = os.cpu_count()
    try:
        out["cpu_affinity"] = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        out["cpu_affinity"] = None
    mem = _meminfo(ctx)
    out["mem_total_mib"] = mem.get("MemTotal")
    out["mem_available_mib"] = mem.get("MemAvailable")
    out["swap_total_mib"] = mem.get("SwapTotal")
    out["cgroup_memory_limit_mib"] = _cgroup_limit(ctx)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    out["nofile_soft"] = None if soft == resource.RLIM_INFINITY else soft
    out["nofile_hard"] = None if hard == resource.RLIM_INFINITY else hard
    mounts = _mounts(ctx)
    out["tmpfs_mounts"] = [m for m in mounts if m["fstype"] == "tmpfs"]
    shm = next((m for m in mounts if m["mountpoint"] == "/dev/shm"), None)
    out["shm_size_mib"], out["shm_used_mib"] = _fs_size(ctx, "/dev/shm") if shm or ctx.path("/dev/shm").exists() else (None, None)

    psi = ctx.read("/proc/pressure/io")
    pressure = _pressure(psi)
    out["pressure_some_avg10"] = pressure.get("some")
    out["pressure_full_avg10"] = pressure.get("full")
    if pressure:
        # The kernel already averages IO stalls over 10 s: no need to sleep for a sample (which
        # would be most of a probe's time), so no sampled iowait or disk throughput either.
        out["iowait_pct"] = out["sample_seconds"] = out["disks"] = None
        return out
    stat0, disk0 = ctx.read("/proc/stat"), _diskstats(ctx)
    ctx.sleep(ctx.sample_seconds)
    stat1, disk1 = ctx.read("/proc/stat"), _diskstats(ctx)
    out["iowait_pct"] = _iowait(stat0, stat1)
    out["sample_seconds"] = ctx.sample_seconds
    out["disks"] = _throughput(disk0, disk1, ctx.sample_seconds)
    return out


def _meminfo(ctx: ProbeContext) -> dict[str, int]:
    out = {}
    for line in (ctx.read("/proc/meminfo") or "").splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            out[key] = int(parts[0]) // 1024  # kB -> MiB
    return out


def _cgroup_limit(ctx: ProbeContext) -> int | None:
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        text = (ctx.read(path) or "").strip()
        if text.isdigit():
            value = int(text)
            return None if value >= 1 << 60 else value // (1 << 20)  # "no limit" is a huge number
    return None


def _mounts(ctx: ProbeContext) -> list[dict]:
    out = []
    for line in (ctx.read("/proc/mounts") or "").splitlines():
        parts = line.split()
        if len(parts) >= 4:
            out.append({"device": parts[0], "mountpoint": parts[1].replace("\\040", " "), "fstype": parts[2],
                        "options": parts[3]})
    return out


def _fs_size(ctx: ProbeContext, mountpoint: str) -> tuple[int | None, int | None]:
    try:
        st = os.statvfs(ctx.path(mountpoint))
    except OSError:
        return None, None
    total = st.f_blocks * st.f_frsize
    free = st.f_bfree * st.f_frsize
    return total // (1 << 20), (total - free) // (1 << 20)


def _cpu_times(text: str | None) -> list[int] | None:
    for line in (text or "").splitlines():
        if line.startswith("cpu "):
            return [int(x) for x in line.split()[1:]]
    return None


def _iowait(a: str | None, b: str | None) -> float | None:
    t0, t1 = _cpu_times(a), _cpu_times(b)
    if not t0 or not t1 or len(t0) < 5:
        return None
    total = sum(t1) - sum(t0)
    if total <= 0:
        return 0.0
    return round(100.0 * (t1[4] - t0[4]) / total, 1)


def _diskstats(ctx: ProbeContext) -> dict[str, tuple[int, int]]:
    out = {}
    for line in (ctx.read("/proc/diskstats") or "").splitlines():
        f = line.split()
        if len(f) >= 10 and not f[2].startswith(("loop", "ram", "dm-")):
            out[f[2]] = (int(f[5]), int(f[9]))  # sectors read, sectors written
    return out


def _throughput(a: dict, b: dict, seconds: float) -> list[dict]:
    out = []
    for name, (r1, w1) in b.items():
        if name not in a or seconds <= 0:
            continue
        r0, w0 = a[name]
        out.append({"name": name, "read_mb_s": round((r1 - r0) * 512 / 1e6 / seconds, 2),
                    "write_mb_s": round((w1 - w0) * 512 / 1e6 / seconds, 2)})
    return out


def _pressure(text: str | None) -> dict[str, float]:
    out = {}
    for line in (text or "").splitlines():
        kind, _, rest = line.partition(" ")
        for item in rest.split():
            k, _, v = item.partition("=")
            if k == "avg10":
                try:
                    out[kind] = float(v)
                except ValueError:
                    pass
    return out
