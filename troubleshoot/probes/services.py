"""Services around the GPUs: Fabric Manager (HGX/DGX NVSwitch systems), the daemons that hold
GPUs open, and whether this machine is a Slurm or Kubernetes node (fixers drain it first)."""

from __future__ import annotations

import os
import re
import socket

from troubleshoot.probes.base import ProbeContext
from troubleshoot.schemas.nodenames import valid_node_name

GPU_SERVICES = ("nvidia-persistenced", "nvidia-dcgm", "dcgm", "nvidia-fabricmanager", "nvidia-imex")
FM_UNIT = "nvidia-fabricmanager"


# systemd's ActiveState words; its LoadState words ("loaded", "not-found", "masked"...) are none
# of them, so each value is known by itself: `systemctl show -p A,B --value` prints the values in
# its D-Bus table's order (LoadState first), not in the order asked (systemd/systemd#4907, #28205).
ACTIVE_STATES = frozenset(("active", "reloading", "inactive", "failed", "activating", "deactivating",
                           "maintenance", "refreshing"))


def _unit_state(ctx: ProbeContext, unit: str) -> str | None:
    """systemd's ActiveState ("active", "failed", "inactive"...), None when systemd cannot say."""
    if not ctx.which("systemctl"):
        return None
    r = ctx.run(["systemctl", "show", "--property=ActiveState,LoadState", "--value", unit], timeout=3)
    if not r.ok:
        return None
    values = r.stdout.split()
    if "not-found" in values:
        return None
    return next((v for v in values if v in ACTIVE_STATES), None)


def _version(text: str | None) -> str | None:
    m = re.search(r"(\d{3}\.\d+(?:\.\d+)?)", text or "")
    return m.group(1) if m else None


def _dpkg_version(ctx: ProbeContext, driver: str | None) -> str | None:
    """The installed Fabric Manager package's version. The package is named by its branch
    (nvidia-fabricmanager-550), so a driver upgrade to another branch leaves the old one known
    to dpkg with its version, removed (`rc`: its configuration kept) or not installed at all:
    only an installed one (`ii`) counts, the one at the driver's version first."""
    r = ctx.run(["dpkg-query", "-W", "-f", "${db:Status-Abbrev} ${Package} ${Version}\\n",
                 "nvidia-fabricmanager*"], timeout=3)
    if not r.ok:
        return None
    found = []
    for ln in r.stdout.splitlines():
        fields = ln.split()
        if len(fields) == 3 and fields[0] == "ii" and not fields[1].startswith("nvidia-fabricmanager-dev"):
            found.append(_version(fields[2]))
    found = [v for v in found if v]
    return driver if driver in found else (found[0] if found else None)


def fabric_manager(ctx: ProbeContext) -> dict:
    out: dict = {"available": True}
    switches = ctx.path("/proc/driver/nvidia-nvswitch/devices")
    try:
        out["nvswitch_count"] = sum(1 for _ in switches.iterdir()) if switches.is_dir() else 0
    except OSError:
        out["nvswitch_count"] = None
    driver = _version(ctx.read("/proc/driver/nvidia/version"))
    out["driver_version"] = driver
    version = None
    if ctx.which("nv-fabricmanager"):
        r = ctx.run(["nv-fabricmanager", "--version"], timeout=3)
        version = _version(r.stdout + r.stderr) if r.ok else None
    if version is None and ctx.which("dpkg-query"):
        version = _dpkg_version(ctx, driver)
    if version is None and ctx.which("rpm"):
        r = ctx.run(["rpm", "-q", "--qf", "%{VERSION}\\n", "nvidia-fabric-manager"], timeout=3)
        version = _version(r.stdout) if r.ok else None
    out["version"] = version
    out["installed"] = version is not None or ctx.which("nv-fabricmanager") is not None
    out["state"] = _unit_state(ctx, FM_UNIT)
    out["active"] = None if out["state"] is None else out["state"] == "active"
    out["version_matches"] = None if not (version and driver) else version == driver
    return out


def _process_running(ctx: ProbeContext, name: str) -> bool:
    """Whether a process whose command name is `name` runs (read from /proc under ctx.root)."""
    try:
        with os.scandir(ctx.path("/proc")) as it:
            entries = [e for e in it if e.name.isdigit()]
    except OSError:
        return False
    for e in entries:
        comm = ctx.read(f"/proc/{e.name}/comm", limit=64)
        if comm is not None and comm.strip() == name:
            return True
    return False


def node(ctx: ProbeContext) -> dict:
    out: dict = {"available": True, "hostname": socket.gethostname()}
    out["gpu_services"] = {u: _unit_state(ctx, u) for u in GPU_SERVICES}
    slurm = None
    # scontrol waits for its controller (4 s here) when none answers, as on a machine that only
    # has Slurm's client installed; a Slurm node runs slurmd, and a job's step names its node.
    if ctx.which("scontrol") and (ctx.env.get("SLURMD_NODENAME") or ctx.env.get("SLURM_JOB_ID")
                                  or _process_running(ctx, "slurmd")):
        short = out["hostname"].split(".")[0]
        # A host name that could read as an option is never handed to scontrol.
        r = ctx.run(["scontrol", "show", "node", short], timeout=4) if valid_node_name(short) else None
        m = re.search(r"NodeName=(\S+)", r.stdout) if r is not None and r.ok else None
        if m:
            slurm = m.group(1)
            state = re.search(r"\bState=(\S+)", r.stdout)
            out["slurm_state"] = state.group(1) if state else None
    slurm = slurm or ctx.env.get("SLURMD_NODENAME") or None
    # Fixers pass these to scontrol and kubectl: a name that is not one is not recorded.
    out["slurm_node"] = slurm if valid_node_name(slurm) else None
    out.setdefault("slurm_state", None)
    k8s = None
    if ctx.env.get("KUBERNETES_SERVICE_HOST") or ctx.path("/var/lib/kubelet/config.yaml").exists():
        k8s = ctx.env.get("NODE_NAME") or ctx.env.get("KUBE_NODE_NAME") or out["hostname"]
    out["kubernetes_node"] = k8s if valid_node_name(k8s) else None
    return out
