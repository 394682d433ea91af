"""CUDA stack: nvcc, the CUDA libraries the loader can find, LD_LIBRARY_PATH, conda env."""

from __future__ import annotations

import os
import re
from pathlib import Path

from troubleshoot.probes.base import ProbeContext

LIBS = ("libcudart", "libcublas", "libcublasLt", "libcudnn", "libnccl", "libcuda", "libnvidia-ml",
        "libnvJitLink", "libcusparse", "libcufft", "libcurand")
_SONAME = re.compile(r"^(?P<name>lib[A-Za-z_+-]+?)\.so(?:\.(?P<version>[0-9][0-9.]*))?$")
# What the snapshot schema accepts as cuda.libraries[].version (its `pattern`): numbers short
# enough to compare as integers; anything else is no version at all.
VERSION = re.compile(r"[0-9]{1,9}(?:\.[0-9]{1,9}){0,7}")
MAX_DIR_FILES = 5000


def probe(ctx: ProbeContext) -> dict:
    out: dict = {"available": True}
    nvcc = ctx.which("nvcc") or _first_existing(ctx, ["/usr/local/cuda/bin/nvcc"])
    out["nvcc_path"] = nvcc
    out["nvcc_version"] = None
    if nvcc:
        r = ctx.run([nvcc, "--version"], timeout=5)
        m = re.search(r"release (\d+\.\d+)", r.stdout) if r.ok else None
        out["nvcc_version"] = m.group(1) if m else None
        if not r.ok:
            out["nvcc_error"] = r.error or r.stderr.strip()[:200]
    ld = ctx.env.get("LD_LIBRARY_PATH", "")
    out["ld_library_path"] = [p for p in ld.split(":") if p]
    out["cuda_home"] = ctx.env.get("CUDA_HOME") or ctx.env.get("CUDA_PATH")
    prefix = ctx.env.get("CONDA_PREFIX")
    out["conda_env"] = {"name": ctx.env.get("CONDA_DEFAULT_ENV"), "prefix": prefix} if prefix else None

    libs: list[dict] = []
    r = ctx.run(["ldconfig", "-p"], timeout=5) if ctx.which("ldconfig") or ctx.path("/sbin/ldconfig").exists() else None
    if r is not None and r.ok:
        for filename, path, _ in parse_ldconfig(r.stdout):
            _add(libs, filename, path, "ldconfig", ctx)
    elif r is not None:
        out["ldconfig_error"] = r.error or r.stderr.strip()[:200]
    dirs = [(d, "LD_LIBRARY_PATH") for d in out["ld_library_path"]]
    if prefix:
        dirs.append((os.path.join(prefix, "lib"), "conda"))
    for d, source in dirs:
        try:
            entries = sorted(ctx.path(d).iterdir())[:MAX_DIR_FILES]
        except OSError:
            continue
        for f in entries:
            _add(libs, f.name, os.path.join(d, f.name), source, ctx)
    out["libraries"] = libs
    out["conflicts"] = conflicts(libs)
    out["versions"] = versions(libs)
    return out


_LDCONFIG_LINE = re.compile(r"^\s*(?P<file>lib\S+)\s+\([^)]*\)\s+=>\s+(?P<path>\S+)")


def parse_ldconfig(text: str) -> list[tuple[str, str, int]]:
    """(file name, path, line index) of every entry of `ldconfig -p` output (or a grep of it).

    "	libcudart.so.12 (libc6,x86-64) => /usr/local/cuda/lib64/libcudart.so.12"
    """
    out = []
    for i, line in enumerate(text.split("\n")):
        m = _LDCONFIG_LINE.match(line)
        if m:
            out.append((m.group("file"), m.group("path"), i))
    return out


def library(filename: str, path: str, source: str) -> dict | None:
    """A `libraries[]` entry for a CUDA library file name, None for other libraries."""
    m = _SONAME.match(filename)
    if not m or m.group("name") not in LIBS:
        return None
    return {"name": m.group("name"), "version": _version(m.group("version")), "path": path, "source": source}


def _version(text: str | None) -> str | None:
    return text if isinstance(text, str) and VERSION.fullmatch(text) else None


def _first_existing(ctx: ProbeContext, paths: list[str]) -> str | None:
    return next((p for p in paths if ctx.path(p).exists()), None)


def _add(libs: list[dict], filename: str, path: str, source: str, ctx: ProbeContext) -> None:
    entry = library(filename, path, source)
    if entry is None or any(lib["path"] == path for lib in libs):
        return
    version = entry["version"]
    try:  # a bare "libcudart.so" symlink names its version in its target
        target = Path(os.path.realpath(ctx.path(path))).name
        tm = _SONAME.match(target)
        if tm and _version(tm.group("version")) and len(tm.group("version")) > len(version or ""):
            version = tm.group("version")
    except OSError:
        pass
    libs.append({**entry, "version": version})


def versions(libs: list[dict]) -> dict[str, list[str]]:
    """Distinct versions of each library, a soname version ("12") folded into a fuller one
    of the same release ("12.1.105") so that one install counts once. Entries without a name
    or a well-formed version (a snapshot from elsewhere) are left out."""
    found: dict[str, set[str]] = {}
    for lib in _well_formed(libs):
        found.setdefault(lib["name"], set()).add(lib["version"])
    out = {}
    for name, vs in sorted(found.items()):
        keep = [v for v in vs if not any(o != v and o.startswith(v + ".") for o in vs)]
        out[name] = sorted(keep, key=lambda v: [int(x) for x in v.split(".")])
    return out


def _well_formed(libs: list) -> list[dict]:
    return [lib for lib in libs if isinstance(lib, dict) and isinstance(lib.get("name"), str)
            and _version(lib.get("version"))]


def conflicts(libs: list[dict]) -> list[dict]:
    """Libraries found with different major versions on the loader path (a classic skew)."""
    majors: dict[str, set[str]] = {}
    for lib in _well_formed(libs):
        majors.setdefault(lib["name"], set()).add(lib["version"].split(".")[0])
    return [{"name": n, "majors": sorted(v)} for n, v in sorted(majors.items()) if len(v) > 1]
