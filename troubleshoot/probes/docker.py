"""Docker and the NVIDIA container runtime: is the GPU reachable from containers?"""

from __future__ import annotations

import json
import os
import re

from troubleshoot.probes.base import ProbeContext

DAEMON_JSON = "/etc/docker/daemon.json"


def probe(ctx: ProbeContext) -> dict:
    out: dict = {"available": True}
    out["in_container"], out["container_hint"] = in_container(ctx)
    out["cgroup_version"] = 2 if ctx.path("/sys/fs/cgroup/cgroup.controllers").exists() else 1
    out["nvidia_ctk_version"] = _version(ctx, ["nvidia-ctk", "--version"])
    out["nvidia_container_cli_version"] = _version(ctx, ["nvidia-container-cli", "--version"])
    out.update(_daemon_json(ctx))
    out["toolkit_apt_sources"] = toolkit_apt_sources(ctx)
    docker = ctx.which("docker")
    out["installed"] = bool(docker)
    out.update(server_version=None, runtimes=None, default_runtime=None, nvidia_runtime=None, server_error=None,
               containers_running=None)
    if not docker:
        out["error"] = "docker: command not found"
        return out
    r = ctx.run([docker, "info", "--format", "{{json .}}"], timeout=6)
    if r.error:
        out["server_error"] = r.error
        return out
    try:
        info = json.loads(r.stdout.strip().splitlines()[-1]) if r.stdout.strip() else {}
    except (ValueError, IndexError):
        info = {}
    out["client_version"] = (info.get("ClientInfo") or {}).get("Version")
    if not info.get("ServerVersion"):
        errors = info.get("ServerErrors") or [r.stderr.strip()[:300] or f"docker info exited {r.returncode}"]
        out["server_error"] = "; ".join(str(e) for e in errors)
        return out
    out.update(facts_from_info(info))
    out["containers_running"] = running_containers(ctx, docker)
    return out


def running_containers(ctx: ProbeContext, docker: str | None = None) -> list[dict] | None:
    """What `systemctl restart docker` would stop; None when Docker could not be asked."""
    docker = docker or ctx.which("docker")
    if not docker:
        return None
    r = ctx.run([docker, "ps", "--format", "{{.ID}}\t{{.Names}}\t{{.Image}}"], timeout=5)
    if r.error or r.returncode != 0:
        return None
    out = []
    for line in r.stdout.splitlines()[:500]:
        parts = line.split("\t")
        if len(parts) == 3:
            out.append({"id": parts[0][:12], "name": parts[1], "image": parts[2]})
    return out


TOOLKIT_REPOS = re.compile(r"nvidia\.github\.io/(?:nvidia-docker|libnvidia-container|nvidia-container-runtime)")
TOOLKIT_LIST = "/etc/apt/sources.list.d/nvidia-container-toolkit.list"


def toolkit_apt_sources(ctx: ProbeContext) -> list[dict] | None:
    """apt lines for NVIDIA's container repositories outside the toolkit's own list: old
    nvidia-docker.list files make apt fail with "Conflicting values set for option Signed-By"."""
    folder = ctx.path("/etc/apt/sources.list.d")
    if not folder.is_dir():
        return None
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".list"))[:200]
    except OSError:
        return None
    out = []
    for path in ["/etc/apt/sources.list"] + [f"/etc/apt/sources.list.d/{n}" for n in names]:
        if path == TOOLKIT_LIST:
            continue
        for line in (ctx.read(path) or "").splitlines():
            if not line.lstrip().startswith("#") and TOOLKIT_REPOS.search(line):
                out.append({"path": path, "line": line})
    return out


def facts_from_info(info: dict) -> dict:
    runtimes = sorted((info.get("Runtimes") or {}).keys())
    cdi = info.get("CDISpecDirs")
    return {
        "server_version": info.get("ServerVersion"),
        "runtimes": runtimes,
        "default_runtime": info.get("DefaultRuntime"),
        "nvidia_runtime": "nvidia" in runtimes or info.get("DefaultRuntime") == "nvidia",
        "cgroup_driver": info.get("CgroupDriver"),
        "cdi_spec_dirs": cdi if isinstance(cdi, list) else None,
        "rootless": any("rootless" in str(o) for o in info.get("SecurityOptions") or []),
        "server_error": None,
    }


def in_container(ctx: ProbeContext) -> tuple[bool, str | None]:
    for marker in ("/.dockerenv", "/run/.containerenv"):
        if ctx.path(marker).exists():
            return True, marker
    cgroup = ctx.read("/proc/1/cgroup") or ""
    m = re.search(r"(docker|kubepods|containerd|libpod|lxc)", cgroup)
    if m:
        return True, f"/proc/1/cgroup mentions {m.group(1)}"
    if ctx.env.get("KUBERNETES_SERVICE_HOST"):
        return True, "KUBERNETES_SERVICE_HOST is set"
    return False, None


def _version(ctx: ProbeContext, argv: list[str]) -> str | None:
    if not ctx.which(argv[0]):
        return None
    r = ctx.run(argv, timeout=5)
    m = re.search(r"(\d+\.\d+\.\d+)", r.stdout + r.stderr)
    return m.group(1) if m else None


def _daemon_json(ctx: ProbeContext) -> dict:
    text = ctx.read(DAEMON_JSON)
    if text is None:
        return {"daemon_json": None, "daemon_json_error": None, "daemon_json_nvidia_runtime": None}
    try:
        data = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        return {"daemon_json": None, "daemon_json_error": f"{DAEMON_JSON} is not valid JSON: {exc}",
                "daemon_json_nvidia_runtime": None}
    runtimes = data.get("runtimes") if isinstance(data, dict) else None
    return {"daemon_json": data, "daemon_json_error": None,
            "daemon_json_nvidia_runtime": isinstance(runtimes, dict) and "nvidia" in runtimes}
