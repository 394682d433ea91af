"""NVML's return codes, read from NVIDIA's published nvml.h.

Every nvmlReturn_t with the header's own `//!<` comment, from gen/nvml/nvml.h of
NVIDIA/go-nvml (the header NVIDIA syncs there from each CUDA release). The text nvmlErrorString
prints ("GPU is lost", "Driver/library version mismatch") is not in nvml.h; NVIDIA lists it in
DCGM's sdk/nvidia/nvml/nvml_error_strings.h, which DCGM's NVML loader returns from
nvmlErrorString. The tree may hold both files at those paths (the two repositories' trees laid
over each other: the paths do not collide); without the second, entries carry no message.
"""

from __future__ import annotations

import re
from pathlib import Path

from tools.catalogs.common import CatalogError, Entry

SOURCE = ("github.com/NVIDIA/go-nvml gen/nvml/nvml.h (nvmlReturn_t) + "
          "github.com/NVIDIA/DCGM sdk/nvidia/nvml/nvml_error_strings.h (nvmlErrorString's text)")
NAMES = ("nvml",)

# Where each repository keeps the file; the first that exists is read.
HEADERS = ("gen/nvml/nvml.h", "pkg/nvml/nvml.h", "sdk/nvidia/nvml/dcgm_nvml.h", "nvml.h")
STRINGS = "sdk/nvidia/nvml/nvml_error_strings.h"
REPOS = {"go-nvml": "https://github.com/NVIDIA/go-nvml", "DCGM": "https://github.com/NVIDIA/DCGM"}
LICENSE = ("nvml.h: NVIDIA's header notice (nonexclusive, royalty-free use); go-nvml and DCGM: "
           "Apache-2.0")


def parse(name: str, tree: Path, version: str | None) -> tuple[dict, list[Entry]]:
    if name != "nvml":
        raise CatalogError(f"{name}: not a catalog of this generator")
    rel = next((h for h in HEADERS if (tree / h).is_file()), None)
    if rel is None:
        raise CatalogError(f"{tree}: no nvml.h at {', '.join(HEADERS)}: not an NVML source tree")
    text = (tree / rel).read_text(encoding="utf-8", errors="replace")
    strings = _error_strings(tree / STRINGS)
    entries = _returns(text, rel, strings)
    return _header(text, rel, version, bool(strings)), entries


def _refs(version: str | None) -> dict[str, str]:
    """`--version` names what was read: one ref (the header's repository), or
    `go-nvml=REF,DCGM=REF` when the tree joins both."""
    if not version:
        return {}
    if "=" not in version:
        return {"go-nvml": version}
    pairs = (p.split("=", 1) for p in version.split(",") if "=" in p)
    return {k.strip(): v.strip() for k, v in pairs}


def _header(text: str, rel: str, version: str | None, has_strings: bool) -> dict:
    api = re.search(r"#define\s+NVML_API_VERSION\s+(\d+)", text)
    refs = _refs(version)
    repo = "DCGM" if rel.startswith("sdk/") else "go-nvml"
    ref = refs.get(repo, "main")
    head = {"name": "NVML: nvmlReturn_t", "source": f"NVIDIA/{repo} {rel}",
            "version": version or (f"NVML API {api.group(1)}" if api else "unknown"),
            "url": f"{REPOS[repo]}/blob/{ref}/{rel}", "license": LICENSE}
    if api:
        head["nvml_api_version"] = int(api.group(1))
    if has_strings:
        head["messages_source"] = f"NVIDIA/DCGM {STRINGS}"
        head["messages_url"] = f"{REPOS['DCGM']}/blob/{refs.get('DCGM', 'master')}/{STRINGS}"
    return head


def _returns(text: str, rel: str, strings: dict[str, str]) -> list[Entry]:
    m = re.search(r"typedef\s+enum\s+nvmlReturn_enum\s*\{(.*?)\}\s*nvmlReturn_t\s*;", text, re.S)
    if not m:
        raise CatalogError(f"{rel}: no nvmlReturn_t enum")
    body_start = m.start(1)
    lines = m.group(1).split("\n")
    entries: list[Entry] = []
    offset = text.count("\n", 0, body_start)
    for i, ln in enumerate(lines):
        em = re.match(r"\s*(NVML_\w+)\s*=\s*(-?\d+)\s*,?\s*(?://!<\s*(.*))?$", ln)
        if not em:
            # A `//!<` line under an entry continues that entry's comment.
            cont = re.match(r"\s*//!<\s*(.*)$", ln)
            if cont and entries and entries[-1].doc is not None:
                entries[-1].doc = _collapse(f"{entries[-1].doc} {cont.group(1)}")
            continue
        key, code, doc = em.group(1), int(em.group(2)), em.group(3)
        entries.append(Entry(key=key, code=code, message=strings.get(key),
                             doc=_collapse(doc) if doc else None,
                             where=f"{rel}:{offset + i + 1}"))
    if not entries:
        raise CatalogError(f"{rel}: nvmlReturn_t has no entries")
    return entries


def _collapse(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


def _error_strings(path: Path) -> dict[str, str]:
    """`case NVML_X: return "...";`; the switch's default (0, "the caller handles it") is no
    entry's text."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    return dict(re.findall(r'case\s+(NVML_\w+)\s*:\s*return\s+"((?:[^"\\]|\\.)*)"\s*;', text))
