"""NVIDIA's CUDA Toolkit headers: every error code of the runtime API (cuda-runtime: the
`cudaError` enum of driver_types.h, what cudaGetLastError and friends return as cudaError_t) and
of the driver API (cuda-driver: the `cudaError_enum` of cuda.h, returned as CUresult), each with
its value and the header's own doc comment.

The tree is a toolkit's root (include/...), the include folder itself, or an unpacked
nvidia-cuda-runtime wheel (nvidia/cu13/include/...), which ships both headers and libcudart.

The text a program prints for a runtime error (cudaGetErrorString: "an illegal memory access
was encountered") is in no header: it is read from the tree's own libcudart.so, the same
release as the headers, by calling cudaGetErrorString for each code (no GPU or driver needed).
An excerpt of the tree, which cannot carry the library, carries what it said instead:
cudart-error-strings.tsv, written by `python -m tools.catalogs.src_cuda TREE OUT`.
The driver API's texts (cuGetErrorString) live in libcuda.so, part of the driver rather than
the toolkit, so cuda-driver entries have no message.
"""

from __future__ import annotations

import ctypes
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from tools.catalogs.common import CatalogError, Entry

SOURCE = "NVIDIA CUDA Toolkit headers: include/driver_types.h (cudaError_t), include/cuda.h (CUresult)"
NAMES = ("cuda-runtime", "cuda-driver")
LICENSE = "NVIDIA CUDA Toolkit EULA (LicenseRef-NVIDIA-Proprietary)"
STRINGS_FILE = "cudart-error-strings.tsv"
# What cudaGetErrorString answers for a code it has no text for: not a message.
UNRECOGNIZED = "unrecognized error code"
# Doc comments are long; the first sentences say what the code means.
DOC_SENTENCES = 3


@dataclass(frozen=True)
class Spec:
    """Where one catalog's enum lives and how to recognise it."""

    title: str
    header: str          # file under include/
    start: str           # regex of the enum's opening line
    key: str             # regex of an enumerator's name
    version_files: tuple[tuple[str, str], ...]   # (file, macro) holding the release, first found wins
    docs: str


SPECS = {
    "cuda-runtime": Spec(
        title="CUDA Runtime API error codes (cudaError_t)",
        header="driver_types.h",
        start=r"^\s*enum\s+(?:__device_builtin__\s+)?cudaError\s*$",
        key=r"cuda(?:Success|Error\w+)",
        version_files=(("cuda_runtime_api.h", "CUDART_VERSION"), ("cuda.h", "CUDA_VERSION")),
        docs="https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html"),
    "cuda-driver": Spec(
        title="CUDA Driver API error codes (CUresult)",
        header="cuda.h",
        start=r"^\s*typedef\s+enum\s+cudaError_enum\s*\{?\s*$",
        key=r"CUDA_(?:SUCCESS|ERROR_\w+)",
        version_files=(("cuda.h", "CUDA_VERSION"),),
        docs="https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__TYPES.html"),
}


def parse(name: str, tree: Path, version: str | None) -> tuple[dict, list[Entry]]:
    spec = SPECS.get(name)
    if spec is None:
        raise CatalogError(f"src_cuda makes no catalog named {name!r}")
    include = find_include(tree, spec.header)
    entries = read_enum(include / spec.header, spec)
    if name == "cuda-runtime":
        add_messages(tree, entries)
    return header(spec, tree, include, entries, version), entries


def find_include(tree: Path, header_file: str) -> Path:
    """The folder holding CUDA's headers, wherever this kind of tree keeps it."""
    candidates = [tree / "include", *sorted(tree.glob("nvidia/cu*/include")),
                  *sorted(tree.glob("nvidia/cuda_runtime/include")),
                  *sorted(tree.glob("targets/*/include")), tree]
    for inc in candidates:
        if (inc / header_file).is_file():
            return inc
    raise CatalogError(f"{tree}: no include/{header_file} here (not a CUDA toolkit, its include folder, "
                       "or an unpacked nvidia-cuda-runtime wheel)")


_ENUMERATOR = r"^\s*,?\s*({key})\s*=\s*(-?(?:0[xX][0-9a-fA-F]+|\d+))\s*,?\s*(?:/\*\*<(.*?)\*/)?\s*$"


def read_enum(path: Path, spec: Spec) -> list[Entry]:
    """Every enumerator of the enum with its value, its doc comment (the /** ... */ block above
    it, or a /**< ... */ after it) and its line."""
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    start = next((i for i, ln in enumerate(lines) if re.match(spec.start, ln)), None)
    if start is None:
        raise CatalogError(f"{path}: the error enum ({spec.title}) is not in this file")
    item = re.compile(_ENUMERATOR.format(key=spec.key))
    out: list[Entry] = []
    doc: list[str] | None = None
    pending = ""
    for i in range(start + 1, len(lines)):
        ln = lines[i]
        if doc is not None:
            doc.append(ln)
            if "*/" in ln:
                pending, doc = " ".join(doc), None
            continue
        if ln.strip().startswith("/**"):
            doc = [ln]
            if "*/" in ln:
                pending, doc = ln, None
            continue
        m = item.match(ln)
        if m:
            out.append(_entry(m, pending, f"include/{spec.header}:{i + 1}"))
            pending = ""
        elif re.match(r"^\s*}", ln):
            break
    if not out:
        raise CatalogError(f"{path}: the error enum ({spec.title}) has no entries")
    return out


def _entry(m: re.Match, comment: str, where: str) -> Entry:
    text = m.group(3) or comment
    doc, deprecated = clean_doc(text)
    return Entry(key=m.group(1), code=int(m.group(2), 0), doc=doc or None, where=where,
                 extra={"deprecated": True} if deprecated else {})


def clean_doc(comment: str) -> tuple[str, bool]:
    """The doc comment as prose (Doxygen's markup dropped, whitespace collapsed), cut to its
    first sentences, and whether it marks the entry deprecated."""
    text = re.sub(r"/\*\*<?|\*/", " ", comment)
    text = re.sub(r"(?m)^\s*\*", " ", text)
    text = re.sub(r"\s\*\s", " ", text)
    deprecated = "\\deprecated" in text
    text = text.replace("\\deprecated", " ")
    text = re.sub(r'\\ref\s+[\w:]+\s+"([^"]*)"', r"\1", text)
    text = re.sub(r"\\(?:ref|p|e|c|b|link|note)\s+", "", text)
    text = re.sub(r"::(?=\w)", "", text)
    text = " ".join(text.split())
    sentences: list[str] = []
    for piece in re.split(r"(?<=[.!?])\s+(?=[A-Z(])", text):
        # "Common causes are - a. Certain ... b. ...": a list's letter ends no sentence.
        if sentences and re.search(r"(?:^|\s)[a-z]\.$", sentences[-1]):
            sentences[-1] += " " + piece
        else:
            sentences.append(piece)
    return " ".join(sentences[:DOC_SENTENCES]), deprecated


def release_of(include: Path, spec: Spec) -> str | None:
    """The toolkit release the headers declare: 13050 is 13.5."""
    for file, macro in spec.version_files:
        try:
            text = (include / file).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        m = re.search(rf"^\s*#\s*define\s+{macro}\s+(\d+)\s*$", text, re.M)
        if m:
            n = int(m.group(1))
            return f"{n // 1000}.{n % 1000 // 10}"
    return None


def wheel_of(tree: Path) -> tuple[str, str, str] | None:
    """(package, version, license) of an unpacked wheel's METADATA, where the tree is one."""
    for meta in sorted(tree.glob("*.dist-info/METADATA")):
        fields = dict(re.findall(r"(?m)^(Name|Version|License-Expression):\s*(.+?)\s*$",
                                 meta.read_text(encoding="utf-8", errors="replace")))
        if "Version" in fields:
            name = fields.get("Name") or meta.parent.name.split("-")[0].replace("_", "-")
            return name, fields["Version"], fields.get("License-Expression", "")
    return None


def header(spec: Spec, tree: Path, include: Path, entries: list[Entry], version: str | None) -> dict:
    release = release_of(include, spec)
    head = {"name": spec.title, "source": f"NVIDIA CUDA Toolkit include/{spec.header}",
            "version": release or version or "unknown", "url": spec.docs, "docs": spec.docs,
            "license": LICENSE}
    if version and version != head["version"]:
        head["release"] = version
    wheel = wheel_of(tree)
    if wheel:
        pkg, ver, lic = wheel
        head["source"] += f" (PyPI {pkg} {ver})"
        head["url"] = f"https://pypi.org/project/{pkg}/{ver}/"
        head["license"] = f"NVIDIA CUDA Toolkit EULA ({lic})" if lic else LICENSE
    if any(e.message for e in entries):
        head["messages"] = "cudaGetErrorString of the same release's libcudart"
    return head


# ---------------------------------------------------------------- printed messages (runtime)

def find_cudart(tree: Path) -> Path | None:
    for pattern in ("lib/libcudart.so*", "lib64/libcudart.so*", "nvidia/cu*/lib/libcudart.so*",
                    "nvidia/cuda_runtime/lib/libcudart.so*", "targets/*/lib/libcudart.so*"):
        found = sorted(p for p in tree.glob(pattern) if p.is_file() and not p.is_symlink())
        if found:
            return found[0]
    return None


def cudart_strings(lib: Path, codes: list[int]) -> dict[int, str]:
    """What the library's cudaGetErrorString prints for each code: a table lookup inside
    libcudart, which needs neither a GPU nor the driver."""
    try:
        cudart = ctypes.CDLL(str(lib))
        fn = cudart.cudaGetErrorString
    except (OSError, AttributeError) as e:
        raise CatalogError(f"{lib}: cannot be loaded to read its error strings ({e})") from None
    fn.restype, fn.argtypes = ctypes.c_char_p, [ctypes.c_int]
    out = {}
    for code in codes:
        raw = fn(code)
        text = raw.decode("utf-8", "replace").strip() if raw else ""
        if text and text != UNRECOGNIZED:
            out[code] = text
    return out


def read_strings(path: Path) -> dict[int, str]:
    out = {}
    for n, ln in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not ln.strip() or ln.startswith("#"):
            continue
        code, sep, text = ln.partition("\t")
        if not sep or not code.strip().lstrip("-").isdigit():
            raise CatalogError(f"{path}:{n}: expected CODE<TAB>TEXT")
        out[int(code)] = text
    return out


def add_messages(tree: Path, entries: list[Entry]) -> None:
    lib = find_cudart(tree)
    if lib is not None:
        strings = cudart_strings(lib, [e.code for e in entries if e.code is not None])
    elif (tree / STRINGS_FILE).is_file():
        strings = read_strings(tree / STRINGS_FILE)
    else:
        return
    for e in entries:
        if e.code in strings:
            e.message = strings[e.code]


def write_strings(tree: Path, out: Path) -> int:
    """CODE<TAB>TEXT for every runtime error of the tree, from its libcudart: what an excerpt
    of the tree carries in place of the library."""
    lib = find_cudart(tree)
    if lib is None:
        raise CatalogError(f"{tree}: no libcudart.so in this tree")
    entries = read_enum(find_include(tree, "driver_types.h") / "driver_types.h", SPECS["cuda-runtime"])
    strings = cudart_strings(lib, [e.code for e in entries if e.code is not None])
    wheel = wheel_of(tree)
    origin = f"{lib.relative_to(tree)}" + (f" of {wheel[0]} {wheel[1]}" if wheel else "")
    lines = [f"# cudaGetErrorString(code) of {origin}"]
    lines += [f"{code}\t{strings[code]}" for code in sorted(strings)]
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(strings)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m tools.catalogs.src_cuda TREE OUT.tsv", file=sys.stderr)
        return 2
    try:
        n = write_strings(Path(argv[0]), Path(argv[1]))
    except (CatalogError, OSError) as e:
        print(f"tools.catalogs.src_cuda: error: {e}", file=sys.stderr)
        return 2
    print(f"{argv[1]}: {n} strings")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
