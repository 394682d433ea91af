"""cuDNN's and cuBLAS's status codes, read from NVIDIA's headers or NVIDIA's bindings.

`cudnn`: every cudnnStatus_t in cuDNN's own header (cudnn_graph.h since cuDNN 9, with a doc
comment on each code and the 9.x sub-codes; cudnn_ops_infer.h or cudnn.h before), as NVIDIA
ships it in the nvidia-cudnn-cuXX wheel (nvidia/cudnn/include/) or the toolkit (include/).
cudnnGetErrorString prints the code's name, so the key is what a log shows.

`cublas`: every cublasStatus_t, from cublas_api.h where the tree has it (the toolkit or the
nvidia-cublas wheel), else from NVIDIA/nvmath-python's bindings (nvmath/bindings/cycublas.pxd,
generated from cublas_api.h). cuBLASLt returns the same enum, so one catalog serves both.
"""

from __future__ import annotations

import re
from pathlib import Path

from tools.catalogs.common import CatalogError, Entry

SOURCE = ("cuDNN: cudnn_graph.h (nvidia-cudnn wheel or CUDA toolkit include/); "
          "cuBLAS: cublas_api.h or github.com/NVIDIA/nvmath-python nvmath/bindings/cycublas.pxd")
NAMES = ("cudnn", "cublas")

# Where each library's header sits in a toolkit, a wheel or a bare include folder: the first
# that exists is read.
INCLUDE_ROOTS = ("include", "nvidia/cudnn/include", "nvidia/cu13/include", "nvidia/cublas/include", "")
CUDNN_HEADERS = ("cudnn_graph.h", "cudnn_ops_infer.h", "cudnn.h")
CUBLAS_HEADER = "cublas_api.h"
NVMATH_PXD = "nvmath/bindings/cycublas.pxd"
NVMATH_URL = "https://github.com/NVIDIA/nvmath-python"
CUDNN_LICENSE = "NVIDIA cuDNN Software License Agreement (headers distributable with applications)"
CUBLAS_LICENSE = "NVIDIA CUDA Toolkit EULA"


def parse(name: str, tree: Path, version: str | None) -> tuple[dict, list[Entry]]:
    if name == "cudnn":
        return _cudnn(tree, version)
    if name == "cublas":
        return _cublas(tree, version)
    raise CatalogError(f"{name}: not a catalog of this generator")


def _find(tree: Path, names: tuple[str, ...]) -> str | None:
    """The first header of `names` (in order of preference) under any include root."""
    for header in names:
        for root in INCLUDE_ROOTS:
            rel = f"{root}/{header}" if root else header
            if (tree / rel).is_file():
                return rel
    return None


def _read(tree: Path, rel: str) -> str:
    try:
        return (tree / rel).read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise CatalogError(f"{tree / rel}: {e}") from None


def _enum_block(text: str, typename: str, path: str) -> tuple[str, int]:
    """The body of `typedef enum { ... } typename;` and the offset where it starts."""
    m = re.search(r"typedef\s+enum\s*(?:\w+\s*)?\{(.*?)\}\s*" + typename + r"\s*;", text, re.S)
    if not m:
        raise CatalogError(f"{path}: no {typename} enum")
    return m.group(1), m.start(1)


def _doc(raw: str) -> tuple[str | None, dict]:
    """A Doxygen trailing comment's text, whitespace collapsed, with @since and @deprecated
    kept as data rather than prose."""
    extra: dict = {}
    text = " ".join(raw.split())
    since = re.search(r"@since\s+cuDNN\s+([\d.]+)", text)
    if since:
        extra["since"] = since.group(1)
        text = text[:since.start()] + text[since.end():]
    dep = re.search(r"@deprecated\s*", text)
    if dep:
        extra["deprecated"] = True
        text = text[:dep.start()] + "Deprecated. " + text[dep.end():]
    text = " ".join(text.split()).strip()
    return (text or None), extra


# --- cudnn --------------------------------------------------------------------------------

ENUM_ITEM = re.compile(r"^[ \t]*(CUDNN_STATUS_\w+)\b[^=,\n]*=", re.M)


def _cudnn(tree: Path, version: str | None) -> tuple[dict, list[Entry]]:
    rel = _find(tree, CUDNN_HEADERS)
    if rel is None:
        raise CatalogError(f"{tree}: no {', '.join(CUDNN_HEADERS)}: not a cuDNN include tree")
    text = _read(tree, rel)
    block, base = _enum_block(text, "cudnnStatus_t", rel)
    items = list(ENUM_ITEM.finditer(block))
    values: dict[str, int] = {}
    entries = []
    for i, m in enumerate(items):
        end = items[i + 1].start() if i + 1 < len(items) else len(block)
        body = block[m.end():end]
        key = m.group(1)
        code = _value(body, values, rel, key)
        values[key] = code
        doc_m = re.search(r"/\*\*<(.*?)\*/|///<([^\n]*)", body, re.S)
        # A plain comment beside a deprecated code ("please transition to ...") is all the
        # older headers say about it.
        note_m = re.search(r"/\*(?![*!]<)(.*?)\*/", body, re.S)
        raw = (doc_m.group(1) or doc_m.group(2)) if doc_m else (note_m.group(1) if note_m else "")
        doc, extra = _doc(raw)
        if "CUDNN_DEPRECATED_ENUM" in text[base + m.start():base + m.end()]:
            extra["deprecated"] = True
        alias = re.match(r"\s*(CUDNN_STATUS_\w+)", body)
        if alias:
            extra["alias_of"] = alias.group(1)
        line = text.count("\n", 0, base + m.start(1)) + 1
        entries.append(Entry(key=key, code=code, doc=doc, where=f"{rel}:{line}", extra=extra))
    if not entries:
        raise CatalogError(f"{rel}: cudnnStatus_t has no codes")
    return _cudnn_header(tree, rel, version), entries


def _value(body: str, values: dict[str, int], rel: str, key: str) -> int:
    """An enumerator's value: a number, or an earlier code it aliases."""
    m = re.match(r"\s*(-?(?:0[xX][0-9a-fA-F]+|\d+))", body)
    if m:
        return int(m.group(1), 0)
    m = re.match(r"\s*(CUDNN_STATUS_\w+)", body)
    if m and m.group(1) in values:
        return values[m.group(1)]
    raise CatalogError(f"{rel}: {key}: a value this parser cannot read")


def _cudnn_header(tree: Path, rel: str, version: str | None) -> dict:
    release = None
    vrel = _find(tree, ("cudnn_version.h",))
    if vrel:
        v = dict(re.findall(r"#define\s+CUDNN_(MAJOR|MINOR|PATCHLEVEL)\s+(\d+)", _read(tree, vrel)))
        if len(v) == 3:
            release = f"{v['MAJOR']}.{v['MINOR']}.{v['PATCHLEVEL']}"
    head = {"name": "cuDNN: cudnnStatus_t", "source": f"NVIDIA cuDNN {rel}",
            "version": release or version or "unknown",
            "url": "https://docs.nvidia.com/deeplearning/cudnn/backend/latest/api/cudnn-graph-library.html",
            "license": CUDNN_LICENSE,
            "printed_as": "cudnnGetErrorString returns the code's name (CUDNN_STATUS_X)"}
    if version and version != head["version"]:
        head["package"] = version
    return head


# --- cublas -------------------------------------------------------------------------------

def _cublas(tree: Path, version: str | None) -> tuple[dict, list[Entry]]:
    rel = _find(tree, (CUBLAS_HEADER,))
    if rel is not None:
        return _cublas_header(tree, rel, version)
    if (tree / NVMATH_PXD).is_file():
        return _cublas_nvmath(tree, version)
    raise CatalogError(f"{tree}: no {CUBLAS_HEADER} and no {NVMATH_PXD}: not a cuBLAS source")


def _pxd_enum_block(text: str, typename: str, path: str) -> tuple[str, int]:
    """Cython's `ctypedef enum typename "typename":` and its indented members."""
    m = re.search(r"^ctypedef\s+enum\s+" + typename + r"\b[^\n]*:\n((?:[ \t]+\S[^\n]*\n)+)", text, re.M)
    if not m:
        raise CatalogError(f"{path}: no {typename} enum")
    return m.group(1), m.start(1)


def _cublas_entries(text: str, rel: str, item: str) -> list[Entry]:
    block, base = (_pxd_enum_block if rel.endswith(".pxd") else _enum_block)(text, "cublasStatus_t", rel)
    entries = []
    for m in re.finditer(item, block):
        # nvmath's own sentinel for a library that failed to load is not a cuBLAS code.
        if m.group(1).startswith("_"):
            continue
        line = text.count("\n", 0, base + m.start(1)) + 1
        entries.append(Entry(key=m.group(1), code=int(m.group(2)), where=f"{rel}:{line}"))
    if not entries:
        raise CatalogError(f"{rel}: cublasStatus_t has no codes")
    return entries


def _cublas_header(tree: Path, rel: str, version: str | None) -> tuple[dict, list[Entry]]:
    text = _read(tree, rel)
    entries = _cublas_entries(text, rel, r"\b(CUBLAS_STATUS_\w+)\s*=\s*(-?\d+)")
    v = dict(re.findall(r"#define\s+CUBLAS_VER_(MAJOR|MINOR|PATCH|BUILD)\s+(\d+)", text))
    release = ".".join(v[k] for k in ("MAJOR", "MINOR", "PATCH", "BUILD") if k in v) or None
    head = {"name": "cuBLAS: cublasStatus_t (also cuBLASLt's)", "source": f"NVIDIA cuBLAS {rel}",
            "version": release or version or "unknown",
            "url": "https://docs.nvidia.com/cuda/cublas/#cublasstatus-t", "license": CUBLAS_LICENSE}
    return head, entries


def _cublas_nvmath(tree: Path, version: str | None) -> tuple[dict, list[Entry]]:
    text = _read(tree, NVMATH_PXD)
    entries = _cublas_entries(text, NVMATH_PXD, r'\b(_?CUBLAS\w*STATUS\w*)\s+"[^"]*"\s*=\s*(-?\d+)')
    span = re.search(r"generated across versions from (\d+(?:\.\d+)*) to (\d+(?:\.\d+)*)", text)
    ref = version or "main"
    head = {"name": "cuBLAS: cublasStatus_t (also cuBLASLt's)",
            "source": f"NVIDIA/nvmath-python {NVMATH_PXD}", "version": ref,
            "url": f"{NVMATH_URL}/blob/{ref}/{NVMATH_PXD}", "license": "Apache-2.0",
            "docs": "https://docs.nvidia.com/cuda/cublas/#cublasstatus-t"}
    if span:
        head["cuda_versions"] = f"{span.group(1)}-{span.group(2)}"
    return head, entries
