"""Parsers for the state dumps users paste next to an error: each turns its lines into the facts
the probe of that area produces (for the machine the log came from) plus, per fact path, the
line that showed it.

Every parser takes the log's lines and returns a `Found` or None. They reuse the probes' own
parsing where it exists (ldconfig -p, docker info, the NVML probe replayed over `nvidia-smi -q`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from troubleshoot.paste.parsers import PASTED_ENV

# The probe modules these parsers reuse are imported by the parser that needs them: a log
# without that dump (most logs) does not pay for loading the probe layer.


@dataclass
class Found:
    """Facts for some areas, and for each fact path (lists as `[]`) the 0-based line that showed it."""

    facts: dict = field(default_factory=dict)
    lines: dict = field(default_factory=dict)
    # Raw samples of a monitoring dump (troubleshoot.paste.monitor.Readings): they become run
    # facts only together, once every dump of the paste is read.
    readings: object = None

    def put(self, area: str, key: str, value, line: int) -> None:
        self.facts.setdefault(area, {"available": True})[key] = value
        self.lines.setdefault(f"{area}.{key}", line)


# ------------------------------------------------------------------------ lsmod (and grep of it)

_LSMOD_HEADER = re.compile(r"^\s*Module\s+Size\s+Used by\s*$")
_LSMOD_LINE = re.compile(r"^[>\s]*(?P<name>[a-z0-9_]+)\s+(?P<size>\d{4,})\s+(?P<used>\d+|-)(?:\s+(?P<users>\S+))?\s*$")


def lsmod(lines: list[str]) -> Found | None:
    from troubleshoot.probes.kernel import MODULES

    header = next((i for i, t in enumerate(lines) if _LSMOD_HEADER.match(t)), None)
    loaded: dict[str, int] = {}
    start = header + 1 if header is not None else 0
    for i in range(start, len(lines)):
        m = _LSMOD_LINE.match(lines[i])
        if m:
            # a module named as another's user is loaded too ("mxm_wmi  16384  1 nouveau")
            for name in [m.group("name"), *(m.group("users") or "").strip(",").split(",")]:
                if name:
                    loaded.setdefault(name, i)
        elif header is not None and lines[i].strip() and i > header + 1 and not loaded:
            break
    gpu = {m: i for m, i in loaded.items() if m in MODULES}
    if not gpu:
        return None
    found = Found()
    # A full listing says what is absent too; `lsmod | grep nvidia` only what is there.
    modules = {m: m in gpu for m in MODULES} if header is not None else {m: True for m in gpu}
    found.facts["kernel"] = {"available": True, "modules": modules}
    for m, i in gpu.items():
        found.lines[f"kernel.modules.{m}"] = i
    if header is not None:
        for m in MODULES:
            found.lines.setdefault(f"kernel.modules.{m}", header)
    return found


# ------------------------------------------------------------------------ lspci -vv

_LSPCI_DEVICE = re.compile(r"^(?:\S.*?:\s*)??(?P<bus>(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]) (?P<cls>[^:]+): (?P<name>.*)$")
_LNK = re.compile(r"^\s*(?P<kind>LnkCap|LnkSta):\s.*?Speed (?P<speed>[\d.]+)GT/s[^,]*, Width x(?P<width>\d+)")
_DRIVER_IN_USE = re.compile(r"^\s*Kernel driver in use:\s*(?P<driver>\S+)")
GEN_BY_SPEED = {"2.5": 1, "5": 2, "8": 3, "16": 4, "32": 5, "64": 6}


def lspci(lines: list[str]) -> Found | None:
    gpus: list[dict] = []
    where: list[dict] = []
    current = None
    for i, text in enumerate(lines):
        m = _LSPCI_DEVICE.match(text)
        if m:
            is_gpu = "NVIDIA" in m.group("name") and re.search(r"VGA|3D controller|Display", m.group("cls"))
            current = None
            if is_gpu:
                bus = m.group("bus")
                current = {"index": len(gpus), "name": m.group("name").split(":", 1)[-1].strip(),
                           "pci_bus_id": bus if bus.count(":") == 2 else f"00000000:{bus}"}
                gpus.append(current)
                where.append({"gpu": i})
            continue
        dm = _DRIVER_IN_USE.match(text) if current is not None else None
        if dm:
            current["_driver"] = (dm.group("driver"), i)
            continue
        lm = _LNK.match(text) if current is not None else None
        if lm:
            suffix = "max" if lm.group("kind") == "LnkCap" else "current"
            gen = GEN_BY_SPEED.get(lm.group("speed"))
            current[f"pcie_gen_{suffix}"] = gen
            current[f"pcie_width_{suffix}"] = int(lm.group("width"))
            where[-1][suffix] = i
    found = Found()
    bound = [g.pop("_driver") for g in gpus if "_driver" in g]
    if any(driver == "nouveau" for driver, _ in bound):
        found.facts["kernel"] = {"available": True, "modules": {"nouveau": True}}
        found.lines["kernel.modules.nouveau"] = next(i for driver, i in bound if driver == "nouveau")
    linked = [g for g in gpus if "pcie_width_current" in g and "pcie_width_max" in g]
    if not linked:
        return found if found.facts else None
    found.facts["nvml"] = {"available": True, "gpus": linked}
    first = next(w for w in where if "current" in w)
    found.lines["nvml.gpus"] = first["gpu"]
    for key in ("pcie_gen_current", "pcie_width_current"):
        found.lines[f"nvml.gpus[].{key}"] = first["current"]
    for key in ("pcie_gen_max", "pcie_width_max"):
        found.lines[f"nvml.gpus[].{key}"] = first["max"]
    return found


# ------------------------------------------------------------------------ ldconfig -p

def ldconfig(lines: list[str]) -> Found | None:
    from troubleshoot.probes import cuda as cuda_probe

    libs, seen = [], {}
    for filename, path, i in cuda_probe.parse_ldconfig("\n".join(lines)):
        entry = cuda_probe.library(filename, path, "ldconfig")
        if entry and not any(lib["path"] == path for lib in libs):
            libs.append(entry)
            seen.setdefault(entry["name"], i)
    if not libs:
        return None
    found = Found(facts={"cuda": {"available": True, "libraries": libs, "conflicts": cuda_probe.conflicts(libs),
                                  "versions": cuda_probe.versions(libs)}})
    first = min(seen.values())
    found.lines["cuda.libraries"] = first
    for name, i in seen.items():
        found.lines[f"cuda.versions.{name}"] = i
    found.lines["cuda.conflicts"] = first
    found.lines["cuda.versions"] = first
    return found


# ------------------------------------------------------------------------ docker info (text form)

_DOCKER_KEYS = {"Server Version": "ServerVersion", "Runtimes": "Runtimes", "Default Runtime": "DefaultRuntime",
                "Cgroup Driver": "CgroupDriver"}
_DOCKER_LINE = re.compile(r"^\s*(?P<key>Server Version|Runtimes|Default Runtime|Cgroup Driver):\s*(?P<value>\S.*?)\s*$")


def docker_info(lines: list[str]) -> Found | None:
    from troubleshoot.probes import docker as docker_probe

    info: dict = {}
    at: dict[str, int] = {}
    for i, text in enumerate(lines):
        m = _DOCKER_LINE.match(text)
        if m and m.group("key") not in at:
            key = _DOCKER_KEYS[m.group("key")]
            value = m.group("value")
            info[key] = {name: {} for name in value.split()} if key == "Runtimes" else value
            at[m.group("key")] = i
    if "Runtimes" not in info or "ServerVersion" not in info:
        return None  # a lone "Runtimes:" line is not a `docker info`
    facts = {k: v for k, v in docker_probe.facts_from_info(info).items() if k not in ("cdi_spec_dirs", "rootless")}
    found = Found(facts={"docker": {"available": True, "installed": True, **facts}})
    for key, fact in (("Runtimes", "runtimes"), ("Runtimes", "nvidia_runtime"), ("Default Runtime", "default_runtime"),
                      ("Server Version", "server_version"), ("Cgroup Driver", "cgroup_driver")):
        if key in at:
            found.lines[f"docker.{fact}"] = at[key]
    return found


# ------------------------------------------------------------------------ pip list / conda list / collect_env

# The CUDA that a plain `pip install torch==X.Y` wheel on Linux x86_64 is built for (PyPI default).
TORCH_DEFAULT_CUDA = {"1.13": "11.7", "2.0": "11.7", "2.1": "12.1", "2.2": "12.1", "2.3": "12.1", "2.4": "12.1",
                      "2.5": "12.4", "2.6": "12.4", "2.7": "12.6", "2.8": "12.8", "2.9": "12.8"}
# `pip list`/`conda list` rows, and the same rows as collect_env prints them: "[pip3] torch==1.5.0",
# "[conda] pytorch 1.5.0 py3.7_cuda10.2.89_cudnn7.6.5_0 pytorch".
_PKG = re.compile(r"^\s*(?:\[(?:pip3?|conda)\]\s+)?(?P<name>torch|pytorch|tensorflow(?:-gpu)?|jax|jaxlib|nvidia-cuda-runtime-cu1[12]|pytorch-cuda|"
                  r"cudatoolkit|cuda-version|cuda-runtime)(?:\s+|==)(?P<version>\d+(?:\.\d+)+[\w.+-]*)(?:\s+(?P<build>\S+))?"
                  r"(?:\s+(?P<channel>\S+))?\s*$")
_COLLECT_ENV = re.compile(r"^(?P<key>PyTorch version|CUDA used to build PyTorch|Nvidia driver version|"
                          r"Is CUDA available|CUDA runtime version)(?::\s*|\s+(?=\d))(?P<value>.+?)\s*$")


def cuda_of_tag(version: str) -> str | None:
    """The CUDA a torch wheel's local tag names: `2.1.2+cu121` -> 12.1; None without one."""
    m = re.search(r"\+cu(\d+?)(\d)$", version)
    return f"{m.group(1)}.{m.group(2)}" if m else None


def _cuda_of_torch(version: str, build: str | None) -> str | None:
    tagged = cuda_of_tag(version)
    if tagged:
        return tagged
    if version.endswith("+cpu") or (build and build.startswith("cpu")):
        return None
    m = re.search(r"cuda(\d+\.\d+)", build or "")
    if m:
        return m.group(1)
    return TORCH_DEFAULT_CUDA.get(".".join(version.split("+")[0].split(".")[:2]))


def packages(lines: list[str]) -> Found | None:
    pkgs: dict[str, tuple[str, str | None, int]] = {}
    env: dict[str, tuple[str, int]] = {}
    for i, text in enumerate(lines):
        m = _PKG.match(text)
        if m:
            pkgs.setdefault(m.group("name"), (m.group("version"), m.group("build"), i))
            continue
        m = _COLLECT_ENV.match(text.strip())
        if m:
            env.setdefault(m.group("key"), (m.group("value"), i))
    found = Found()
    torch = pkgs.get("torch") or pkgs.get("pytorch")
    if "PyTorch version" in env:
        version, i = env["PyTorch version"]
        built = env.get("CUDA used to build PyTorch", ("", i))[0]
        cuda = None if built in ("None", "N/A", "Could not collect") else (re.match(r"\d+\.\d+", built) or [None])[0]
        found.put("frameworks", "torch", {"version": version, "cuda": cuda}, i)
        found.lines["frameworks.torch.version"] = i
        found.lines["frameworks.torch.cuda"] = env.get("CUDA used to build PyTorch", (None, i))[1]
    elif torch:
        version, build, i = torch
        cuda = _cuda_of_torch(version, build)
        runtime = pkgs.get("pytorch-cuda") or pkgs.get("nvidia-cuda-runtime-cu12") or pkgs.get("nvidia-cuda-runtime-cu11")
        if "+" not in version and runtime and not (build or "").startswith("cpu"):
            cuda = ".".join(runtime[0].split(".")[:2])
        found.put("frameworks", "torch", {"version": version, "cuda": cuda}, i)
        found.lines["frameworks.torch.version"] = found.lines["frameworks.torch.cuda"] = i
    for name in ("tensorflow", "tensorflow-gpu"):
        if name in pkgs:
            found.put("frameworks", "tensorflow", {"version": pkgs[name][0]}, pkgs[name][2])
            found.lines["frameworks.tensorflow.version"] = pkgs[name][2]
            break
    if "jax" in pkgs:
        found.put("frameworks", "jax", {"version": pkgs["jax"][0],
                                        "jaxlib": pkgs["jaxlib"][0] if "jaxlib" in pkgs else None}, pkgs["jax"][2])
    if "Nvidia driver version" in env:
        value, i = env["Nvidia driver version"]
        if re.fullmatch(r"\d+\.\d+(?:\.\d+)?", value):
            found.put("nvml", "driver_version", value, i)
    return found if found.facts else None


# ------------------------------------------------------------------------ env (printenv, export, VAR=... cmd)

# The device-selection variables rules read (PASTED_ENV); a pasted `env | grep CUDA`, an `export`
# line or a command run as `CUDA_VISIBLE_DEVICES=0 python train.py`, after an optional shell prompt.
_ENV_LINE = re.compile(r"^(?:.*\S[$#]\s+|\$\s+)?(?:export\s+)?(?P<name>" + "|".join(PASTED_ENV) +
                       r")=(?P<value>\"[^\"]*\"|'[^']*'|[^\s;&|]*)")


def environment(lines: list[str]) -> Found | None:
    found = Found()
    env: dict[str, str] = {}
    for i, text in enumerate(lines):
        m = _ENV_LINE.match(text.strip()) if "VISIBLE_DEVICES=" in text else None
        if m and m.group("name") not in env:
            env[m.group("name")] = m.group("value").strip("\"'")
            found.lines[f"env.{m.group('name')}"] = i
    if not env:
        return None
    found.facts["env"] = env  # the env area has no "available" key: its keys are variable names
    return found
