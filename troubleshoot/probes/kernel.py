"""Kernel: GPU modules loaded, nouveau blacklisting, NVIDIA module version, Xid events in time.

Each Xid event is what the kernel logged: the code, the GPU's PCI address, the process, the text
after the code and the whole line, when it happened (seconds since boot, and wall time when the
log or the boot time gives it), and whether it is `current`: logged after the last driver load
and after the GPU was last (re)initialised, so a fault fixed yesterday stops driving diagnoses
today. What an event means and what to do about it is the engine's (engine/gpufaults.py), from
the code and the line.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from troubleshoot.probes.base import ProbeContext

MODULES = ("nvidia", "nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia_peermem", "nouveau")
MODPROBE_DIRS = ("/etc/modprobe.d", "/lib/modprobe.d", "/usr/lib/modprobe.d", "/run/modprobe.d")
XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?|[0-9A-Fa-f:.]+)"
    r"(?: GPU-I:\w+)?\): (?P<code>\d+)(?:, pid=(?P<pid>\d+|'?<unknown>'?))?(?:, name=(?P<name>[^,]*))?"
    r"(?:, (?P<message>.*))?")
UPTIME = re.compile(r"^\s*(?:<\d+>)?\[\s*(\d+\.\d+)\]")
DMESG_T = re.compile(r"^\s*\[([A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4})\]")
ISO = re.compile(r"^\s*(\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)")
DRIVER_LOAD = re.compile(r"NVRM: loading NVIDIA UNIX")
GPU_INIT = re.compile(r"NVRM: GPU at PCI:(?P<pci>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})")
GPU_MENTION = re.compile(r"NVRM: (?:The NVIDIA )?GPU (?:at )?(?:PCI:)?(?P<pci>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?)")
MAX_XID_EVENTS = 200
KERNEL_LOG_BYTES = 8 << 20


def probe(ctx: ProbeContext) -> dict:
    out: dict = {"available": True}
    modules_text = ctx.read("/proc/modules")
    if modules_text is None:
        out["modules"] = None
        out["error"] = "cannot read /proc/modules"
    else:
        loaded = {line.split()[0] for line in modules_text.splitlines() if line.strip()}
        out["modules"] = {m: m in loaded for m in MODULES}
    out["nouveau_blacklisted"], out["nouveau_blacklist_files"] = _nouveau_blacklist(ctx)
    version = ctx.read("/proc/driver/nvidia/version")
    out["nvidia_module_version"] = _module_version(version) if version else None
    out["nvidia_module_version_text"] = version.strip().splitlines()[0] if version else None
    log, source, error = _kernel_log(ctx)
    out["kernel_log_source"] = source
    out["kernel_log_error"] = error
    boot = _boot_time(ctx.read("/proc/stat")) if source == "dmesg" else None
    out["xid_events"] = parse_xids(log, boot) if log else ([] if source else None)
    out["driver_loads"] = len(DRIVER_LOAD.findall(log)) if log else None
    return out


def _boot_time(stat: str | None) -> datetime | None:
    m = re.search(r"^btime (\d+)", stat or "", re.M)
    return datetime.fromtimestamp(int(m.group(1)), timezone.utc) if m else None


def _when(line: str, boot: datetime | None) -> tuple[float | None, str | None]:
    """(seconds since boot, ISO wall time) of a kernel log line, where the line or the boot time says."""
    up = UPTIME.match(line)
    uptime = float(up.group(1)) if up else None
    wall = None
    m = DMESG_T.match(line)
    if m:
        try:
            wall = datetime.strptime(" ".join(m.group(1).split()), "%a %b %d %H:%M:%S %Y").isoformat()
        except ValueError:
            wall = None
    if wall is None:
        m = ISO.match(line)
        if m:
            try:
                wall = datetime.fromisoformat(m.group(1).replace(",", ".").replace(" ", "T")).isoformat()
            except ValueError:
                wall = None
    if wall is None and uptime is not None and boot is not None:
        wall = (boot + timedelta(seconds=uptime)).isoformat(timespec="seconds")
    return uptime, wall


def _module_version(text: str) -> str | None:
    # "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023"
    # "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.124.06  Release Build ..."
    m = re.search(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)", text)
    return m.group(1) if m else None


def _nouveau_blacklist(ctx: ProbeContext) -> tuple[bool, list[str]]:
    files = []
    for d in MODPROBE_DIRS:
        folder = ctx.path(d)
        try:
            entries = sorted(folder.iterdir())
        except OSError:
            continue
        for f in entries:
            if f.suffix != ".conf":
                continue
            text = ctx.read(f"{d}/{f.name}") or ""
            for line in text.splitlines():
                words = line.split("#", 1)[0].split()
                if words[:2] == ["blacklist", "nouveau"] or (words[:2] == ["options", "nouveau"] and "modeset=0" in words):
                    files.append(f"{d}/{f.name}")
                    break
    cmdline = ctx.read("/proc/cmdline") or ""
    if re.search(r"(?:modprobe|rd\.driver)\.blacklist=\S*nouveau|nouveau\.modeset=0", cmdline):
        files.append("/proc/cmdline")
    return bool(files), files


def _kernel_log(ctx: ProbeContext) -> tuple[str | None, str | None, str | None]:
    """The kernel ring buffer (dmesg), else the journal's kernel messages, else kern.log."""
    errors = []
    r = ctx.run(["dmesg", "--nopager"], timeout=5) if ctx.which("dmesg") else None
    if r is not None and r.ok:
        return r.stdout[-KERNEL_LOG_BYTES:], "dmesg", None
    if r is not None:
        errors.append(f"dmesg: {r.error or r.stderr.strip()[:200] or f'exit {r.returncode}'}")
    if ctx.which("journalctl"):
        r = ctx.run(["journalctl", "-k", "-b", "--no-pager", "-o", "short-iso", "-n", "20000"], timeout=5)
        if r.ok and r.stdout.strip() and "No entries" not in r.stdout[:200]:
            return r.stdout[-KERNEL_LOG_BYTES:], "journalctl", None
        errors.append(f"journalctl: {r.error or r.stderr.strip()[:200] or 'no kernel entries'}")
    for path in ("/var/log/kern.log", "/var/log/messages"):
        text = ctx.read(path, limit=KERNEL_LOG_BYTES)
        if text is not None:
            return text, path, None
    return None, None, "; ".join(errors) or "no kernel log is readable"


def _same_device(a: str, b: str) -> bool:
    norm = lambda p: p.lower().split(".")[0].removeprefix("0000:")  # noqa: E731
    return norm(a) == norm(b)


def parse_xids(text: str, boot: datetime | None = None) -> list[dict]:
    """Xid events from kernel log text, in order: code, PCI address, process and message, the
    line, when, and whether current.

    "fallen off the bus" without an Xid line (newer drivers print it over several lines,
    naming the GPU on the first) counts as Xid 79 on the GPU last named."""
    events: list[dict] = []
    last_pci = None
    for line in text.splitlines():
        if DRIVER_LOAD.search(line):
            for e in events:
                e["current"] = False  # the driver was loaded again after it
            continue
        init = GPU_INIT.search(line)
        if init:
            for e in events:
                if e["pci"] and _same_device(e["pci"], init.group("pci")):
                    e["current"] = False  # that GPU was initialised again (reset) after it
        m = XID.search(line)
        if m:
            pid = m.group("pid")
            code = int(m.group("code"))
            uptime, wall = _when(line, boot)
            events.append({
                "code": code,
                "pci": m.group("pci"),
                "pid": int(pid) if pid and pid.isdigit() else None,
                "process": (m.group("name") or "").strip() or None,
                "message": (m.group("message") or "").strip(),
                "line": line.strip()[:300],
                "uptime_s": uptime,
                "time": wall,
                "current": True,
            })
            last_pci = m.group("pci")
            continue
        g = GPU_MENTION.search(line)
        if g:
            last_pci = g.group("pci")
        if "fallen off the bus" in line and ("NVRM" in line or last_pci):
            pci = g.group("pci") if g else last_pci
            prev = events[-1] if events else None
            if prev and prev["code"] == 79 and pci and _same_device(prev["pci"], pci):
                continue  # the driver's second line about the same Xid 79
            uptime, wall = _when(line, boot)
            events.append({"code": 79, "pci": pci, "pid": None, "process": None,
                           "message": "GPU has fallen off the bus", "line": line.strip()[:300],
                           "uptime_s": uptime, "time": wall, "current": True})
    return events[-MAX_XID_EVENTS:]
