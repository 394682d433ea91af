"""Host identity and the job's environment variables that matter on GPU machines."""

from __future__ import annotations

import getpass
import platform
import re
import socket

from troubleshoot.probes.base import ProbeContext

ENV_NAMES = (
    "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "CUDA_DEVICE_ORDER",
    "CUDA_LAUNCH_BLOCKING", "CUDA_MODULE_LOADING", "CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH",
    "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "OMP_NUM_THREADS", "MASTER_ADDR", "MASTER_PORT",
    "WORLD_SIZE", "RANK", "LOCAL_RANK", "XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION",
    "TF_FORCE_GPU_ALLOW_GROWTH", "SLURM_JOB_ID", "SLURM_NODELIST",
)
ENV_PREFIXES = ("NCCL_", "TORCH_NCCL_", "TORCH_DISTRIBUTED_", "CUDNN_")


def os_release_fields(text: str) -> dict[str, str]:
    """ID, ID_LIKE, VERSION_ID and PRETTY_NAME of an /etc/os-release text (quotes dropped)."""
    return {k: v for k, v in re.findall(r'^(ID|ID_LIKE|VERSION_ID|PRETTY_NAME)=["\']?([^"\'\n]*)', text, re.M)}


def host(ctx: ProbeContext) -> dict:
    os_release = ctx.read("/etc/os-release") or ""
    m = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', os_release, re.M)  # may hold an apostrophe
    fields = os_release_fields(os_release)
    try:
        user = getpass.getuser()
    except Exception:
        user = None
    return {
        "available": True,
        "hostname": socket.gethostname(),
        "os": m.group(1) if m else platform.system(),
        # The fixers pick a package manager from these (never from the machine that runs them).
        "os_id": fields.get("ID") or None,
        "os_id_like": fields.get("ID_LIKE") or None,
        "os_version_id": fields.get("VERSION_ID") or None,
        "kernel_release": (ctx.read("/proc/sys/kernel/osrelease") or platform.release()).strip(),
        "arch": platform.machine(),
        "user": user,
        "home": ctx.env.get("HOME"),
        "uptime_s": _uptime(ctx.read("/proc/uptime")),
    }


def _uptime(text: str | None) -> float | None:
    """Seconds since boot: a node check's grace window after a reboot reads it."""
    try:
        return round(float((text or "").split()[0]), 1)
    except (IndexError, ValueError):
        return None


def env(ctx: ProbeContext) -> dict:
    return {k: v for k, v in sorted(ctx.env.items()) if k in ENV_NAMES or k.startswith(ENV_PREFIXES)}
