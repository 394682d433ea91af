"""The environment a job printed about itself, read as facts of the machine it ran on:

- OpenMMLab's `collect_env` (mmengine/utils/dl_utils/collect_env.py, mmcv's additions): one
  `Key: value` line each, `PyTorch: 2.1.2+cu121`, `NVCC: Cuda compilation tools, release 11.3,
  V11.3.109`, `MMCV: 1.7.1`, `MMCV CUDA Compiler: 11.3`, `GPU 0,1: NVIDIA A100-SXM4-80GB`;
- detectron2's `collect_env_info` (detectron2/utils/collect_env.py): a tabulate table,
  `PyTorch   1.10.1+cu113 @/path`, `detectron2   0.6 @/path`, `CUDA compiler   CUDA 11.3`,
  `Driver version   470.82.01`, `GPU 0   NVIDIA GeForce RTX 3090 (arch=8.6)`;
- `torch.__config__.show()`, which both end with: `  - CUDA Runtime 11.3`, `CUDA_VERSION=11.3`;
- `nvcc --version`: `Cuda compilation tools, release 11.8, V11.8.89`;
- NCCL's own banner, `NCCL version 2.18.1+cuda12.1`;
- the kernel's line at the driver's load: `NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.104.05 ...`.

Facts land where the probes put theirs (frameworks.torch, cuda.nvcc_version, nvml, kernel),
the extensions' own builds under frameworks.mmcv and frameworks.detectron2.
"""

from __future__ import annotations

import re

from troubleshoot.paste.dumps import Found, cuda_of_tag

# `Key: value` (OpenMMLab) or `Key    value` (tabulate, two spaces or more), one per line.
_KEY_VALUE = re.compile(r"^\s*(?P<key>[A-Za-z][\w .,()$-]*?)(?::\s+|\s{2,})(?P<value>\S.*?)\s*$")
_VERSION = re.compile(r"\d+\.\d+(?:\.\d+)?")
_NVCC = re.compile(r"Cuda compilation tools, release (?P<v>\d+\.\d+)")
_NVCC_BUILD = re.compile(r"Build cuda_(?P<v>\d+\.\d+)\.")
_RUNTIME = re.compile(r"^\s*-\s*CUDA Runtime (?P<v>\d+\.\d+)")
_BUILD_SETTINGS = re.compile(r"\bCUDA_VERSION=(?P<v>\d+\.\d+)")
_NCCL = re.compile(r"\bNCCL version (?P<v>\d+\.\d+\.\d+)(?:\+cuda(?P<cuda>\d+\.\d+))?")
_NVRM = re.compile(r"NVRM: loading NVIDIA UNIX [\w-]+ Kernel Module\s+(?P<v>\d{3,4}\.\d{1,3}(?:\.\d{1,3})?)")
_GPU_ARCH = re.compile(r"\(arch=(?P<cc>\d+\.\d+)\)")

# Keys of the blocks, lower-cased, and what each is.
_EXTENSIONS = {"mmcv": ("mmcv", "mmcv cuda compiler"), "detectron2": ("detectron2", "detectron2 cuda compiler")}


def envblock(lines: list[str]) -> Found | None:
    found = Found()
    keys: dict[str, tuple[str, int]] = {}
    for i, text in enumerate(lines):
        _one_line(found, text, i)
        m = _KEY_VALUE.match(text)
        if m:
            keys.setdefault(m.group("key").strip().lower(), (m.group("value"), i))
    _torch(found, keys)
    _extensions(found, keys)
    _machine(found, keys)
    return found if found.facts else None


def _one_line(found: Found, text: str, i: int) -> None:
    """Lines that say one thing wherever they stand."""
    for pattern, area, key in ((_NVCC, "cuda", "nvcc_version"), (_NVRM, "kernel", "nvidia_module_version")):
        m = pattern.search(text)
        if m and f"{area}.{key}" not in found.lines:
            found.put(area, key, m.group("v"), i)
    m = _NCCL.search(text)
    if m and "frameworks.torch.nccl" not in found.lines:
        torch = found.facts.setdefault("frameworks", {"available": True}).setdefault("torch", {})
        torch["nccl"] = m.group("v")
        found.lines["frameworks.torch.nccl"] = i
    for pattern in (_RUNTIME, _BUILD_SETTINGS):  # torch.__config__.show(): the CUDA torch was built with
        m = pattern.search(text)
        if m and "frameworks.torch.cuda" not in found.lines:
            found.facts.setdefault("frameworks", {"available": True}).setdefault("torch", {})["cuda"] = m.group("v")
            found.lines["frameworks.torch.cuda"] = i


def _torch(found: Found, keys: dict) -> None:
    value, i = keys.get("pytorch", (None, 0))
    if not value:
        return
    version = value.split(" @", 1)[0].strip()
    if not _VERSION.match(version):
        return
    torch = found.facts.setdefault("frameworks", {"available": True}).setdefault("torch", {})
    torch["version"] = version
    found.lines["frameworks.torch.version"] = i
    cuda = cuda_of_tag(version)
    if cuda and "frameworks.torch.cuda" not in found.lines:
        torch["cuda"] = cuda
        found.lines["frameworks.torch.cuda"] = i


def _extensions(found: Found, keys: dict) -> None:
    for name, (version_key, cuda_key) in _EXTENSIONS.items():
        version, vi = keys.get(version_key, (None, 0))
        cuda, ci = keys.get(cuda_key, (None, 0))
        if cuda is None and name == "detectron2" and version:
            cuda, ci = keys.get("cuda compiler", (None, 0))  # detectron2 >= 0.6 names it so
        facts = {}
        if version and _VERSION.match(version.split(" @", 1)[0].strip()):
            facts["version"] = version.split(" @", 1)[0].strip()
            found.lines[f"frameworks.{name}.version"] = vi
        cuda_version = _cuda_in(cuda) if cuda else None
        if cuda_version:
            facts["cuda"] = cuda_version
            found.lines[f"frameworks.{name}.cuda"] = ci
        if facts:
            found.facts.setdefault("frameworks", {"available": True})[name] = facts


def _cuda_in(text: str) -> str | None:
    """`11.3`, `CUDA 11.3`, `Build cuda_11.3.r11.3/compiler.29920130_0`; `not available` -> None."""
    m = _NVCC_BUILD.search(text) or re.match(r"^(?:CUDA\s+)?(?P<v>\d+\.\d+)\b", text.strip())
    return m.group("v") if m else None


def _machine(found: Found, keys: dict) -> None:
    value, i = keys.get("driver version", (None, 0))
    if value and re.fullmatch(r"\d{3,4}\.\d{1,3}(?:\.\d{1,3})?", value.strip()):
        found.put("nvml", "driver_version", value.strip(), i)
    gpus = []
    for key, (value, i) in keys.items():
        m = re.fullmatch(r"gpu (\d+(?:,\d+)*)", key)
        if not m:
            continue
        cc = _GPU_ARCH.search(value)
        name = _GPU_ARCH.sub("", value).strip()
        for index in m.group(1).split(","):
            gpu = {"index": int(index), "name": name}
            if cc:
                gpu["compute_capability"] = cc.group("cc")
            gpus.append(gpu)
        found.lines.setdefault("nvml.gpus", i)
    if gpus:
        found.facts.setdefault("nvml", {"available": True})["gpus"] = sorted(gpus, key=lambda g: g["index"])
