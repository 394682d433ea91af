"""NCCL's messages, read from NVIDIA/nccl's own source.

`nccl`: every ncclResult_t (src/nccl.h.in) with the text ncclGetErrorString returns for it
(src/init.cc) and the user guide's description of it (docs/userguide/source/api/types.rst).

`nccl-warn`: every WARN("...") format under src/. NCCL prints them as
"HOST:PID:TID [DEV] FILE:LINE NCCL WARN <text>"; the pattern is for <text>. The key is the
file's name (with its folder when it is not directly under src/) and a slug of the format's
words, so it survives the line moving; `where` keeps the line of this release.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from tools.catalogs.common import CatalogError, Entry, printf_pattern

SOURCE = "github.com/NVIDIA/nccl: src/nccl.h.in, src/init.cc (ncclGetErrorString), WARN() across src/"
NAMES = ("nccl", "nccl-warn")
REPO_URL = "https://github.com/NVIDIA/nccl"
LICENSE = "Apache-2.0 (some files BSD-3-Clause; see the tree's LICENSE.txt)"

HEADER = "src/nccl.h.in"
ERRSTR = "src/init.cc"
TYPES_DOC = "docs/userguide/source/api/types.rst"
VERSION_MK = "makefiles/version.mk"

# A format whose literal text is shorter than this matches ordinary log lines.
MIN_LITERAL = 12
SLUG_WORDS = 6
SOURCE_SUFFIXES = (".cc", ".c", ".cpp", ".cu", ".h", ".hpp", ".cuh")
# <inttypes.h> macros spliced into formats ("%" PRIu64): the conversion they stand for.
PRI_MACROS = {"PRIu64": "lu", "PRId64": "ld", "PRIi64": "li", "PRIx64": "lx", "PRIX64": "lX",
              "PRIu32": "u", "PRId32": "d", "PRIx32": "x", "PRIX32": "X", "PRIu16": "u",
              "PRIu8": "u", "PRIuPTR": "lu", "PRIxPTR": "lx", "PRIdPTR": "ld"}
CONVERSION = re.compile(r"%[-+ #0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|q|j|z|Z|t)?[diouxXeEfFgGaAcspn%]")


def parse(name: str, tree: Path, version: str | None) -> tuple[dict, list[Entry]]:
    if name == "nccl":
        return _header(tree, version, "ncclResult_t and ncclGetErrorString", HEADER), _results(tree)
    if name == "nccl-warn":
        entries = _warn_entries(tree)
        return _header(tree, version, "NCCL WARN messages", "src/"), entries
    raise CatalogError(f"{name}: not a catalog of this generator")


def _header(tree: Path, version: str | None, title: str, path: str) -> dict:
    """The release comes from makefiles/version.mk (what the tree says it is); the version
    argument, a tag or commit, pins the URL to exactly the tree that was read."""
    release = _release(tree)
    ref = version or (f"v{release}" if release else "master")
    head = {"name": f"NCCL: {title}", "source": f"NVIDIA/nccl {path}", "version": ref,
            "url": f"{REPO_URL}/{'tree' if path.endswith('/') else 'blob'}/{ref}/{path}",
            "license": LICENSE}
    if release:
        head["release"] = release
    return head


def _release(tree: Path) -> str | None:
    try:
        text = (tree / VERSION_MK).read_text(encoding="utf-8")
    except OSError:
        return None
    vals = dict(re.findall(r"^(NCCL_\w+|PKG_REVISION)[ \t]*:=[ \t]*(\S*)", text, re.M))
    if not {"NCCL_MAJOR", "NCCL_MINOR", "NCCL_PATCH"} <= set(vals):
        return None
    rel = f"{vals['NCCL_MAJOR']}.{vals['NCCL_MINOR']}.{vals['NCCL_PATCH']}{vals.get('NCCL_SUFFIX', '')}"
    return f"{rel}-{vals['PKG_REVISION']}" if vals.get("PKG_REVISION") else rel


def _read(tree: Path, rel: str) -> str | None:
    try:
        return (tree / rel).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


# --- nccl: ncclResult_t -------------------------------------------------------------------

def _results(tree: Path) -> list[Entry]:
    text = _read(tree, HEADER)
    if text is None:
        raise CatalogError(f"{tree}: no {HEADER}: not an NCCL source tree")
    m = re.search(r"typedef\s+enum\s*\{(.*?)\}\s*ncclResult_t\s*;", text, re.S)
    if not m:
        raise CatalogError(f"{tree / HEADER}: no ncclResult_t enum")
    strings = _error_strings(_read(tree, ERRSTR) or "")
    docs = _type_docs(_read(tree, TYPES_DOC) or "")
    entries = []
    for em in re.finditer(r"\b(nccl\w+)\s*=\s*(-?\d+)", m.group(1)):
        key = em.group(1)
        # ncclNumResults counts the codes; no call returns it.
        if key == "ncclNumResults":
            continue
        line = text.count("\n", 0, m.start(1) + em.start()) + 1
        entries.append(Entry(key=key, code=int(em.group(2)), message=strings.get(key),
                             doc=docs.get(key), where=f"{HEADER}:{line}"))
    return entries


def _error_strings(text: str) -> dict[str, str]:
    """`case ncclX: return "...";` inside ncclGetErrorString's body."""
    m = re.search(r"const\s+char\s*\*\s*ncclGetErrorString\s*\([^)]*\)\s*\{(.*?)\n\}", text, re.S)
    if not m:
        return {}
    return {k: _unescape(v) for k, v in
            re.findall(r'case\s+(nccl\w+)\s*:\s*return\s+"((?:[^"\\]|\\.)*)"\s*;', m.group(1))}


def _type_docs(text: str) -> dict[str, str]:
    """The user guide's `.. c:macro:: ncclX` blocks: a "(``N``)" line, then the description."""
    out: dict[str, str] = {}
    blocks = re.split(r"^\s*\.\. c:macro::\s*", text, flags=re.M)
    for block in blocks[1:]:
        name, _, body = block.partition("\n")
        lines = []
        for ln in body.splitlines():
            s = ln.strip()
            if s.startswith(".. ") or (not s and lines):
                break
            if s and not re.fullmatch(r"\(``-?\d+``\)", s):
                lines.append(s)
        if lines and name.strip().startswith("nccl"):
            out[name.strip()] = _sentences(" ".join(lines))
    return out


def _sentences(text: str, n: int = 3) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    parts = re.split(r"(?<=[.!?])\s+(?=[A-Z(])", text)
    return " ".join(parts[:n])


def _unescape(s: str) -> str:
    table = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "'": "'", "r": "\r", "0": "\0"}
    return re.sub(r"\\(.)", lambda m: table.get(m.group(1), m.group(1)), s)


# --- nccl-warn: WARN("...") formats ----------------------------------------------------------

def _warn_entries(tree: Path) -> list[Entry]:
    src = tree / "src"
    if not src.is_dir():
        raise CatalogError(f"{tree}: no src/ folder: not an NCCL source tree")
    files = sorted(p for p in src.rglob("*") if p.suffix in SOURCE_SUFFIXES and p.is_file())
    entries: list[Entry] = []
    for path in files:
        rel = path.relative_to(tree).as_posix()
        text = path.read_text(encoding="utf-8", errors="replace")
        entries.extend(_file_entries(rel, text))
    if not entries:
        raise CatalogError(f"{src}: no WARN() formats found: not an NCCL source tree")
    return entries


def _scope(rel: str) -> str:
    """src/init.cc -> init, src/misc/socket.cc -> misc.socket: the folder keeps
    src/transport/p2p.cc and src/transport/net_ib/p2p.cc apart; a header keeps its suffix so
    xml.h and xml.cc do not collide."""
    p = Path(rel)
    stem = p.stem + ("_h" if p.suffix in (".h", ".hpp", ".cuh") else "")
    parent = p.parent.name
    return stem if parent == "src" else f"{parent}.{stem}"


def _file_entries(rel: str, text: str) -> list[Entry]:
    """One entry per distinct format in the file (the first line it appears on); two formats
    whose slugs collide each get a short hash of their format."""
    found: dict[str, tuple[int, str, str | None]] = {}
    for line, fmt, doc in _warn_calls(text):
        if _literal_len(fmt) < MIN_LITERAL or fmt in found:
            continue
        found[fmt] = (line, fmt, doc)
    scope = _scope(rel)
    slugs = {fmt: _slug(fmt) for fmt in found}
    counts: dict[str, int] = {}
    for s in slugs.values():
        counts[s] = counts.get(s, 0) + 1
    out = []
    for fmt, (line, _, doc) in found.items():
        slug = slugs[fmt]
        if counts[slug] > 1:
            slug = f"{slug}-{hashlib.sha1(fmt.encode()).hexdigest()[:6]}"
        out.append(Entry(key=f"{scope}.{slug}", pattern=_pattern(fmt), doc=doc,
                         where=f"{rel}:{line}", extra={"format": fmt.strip()}))
    return out


def _pattern(fmt: str) -> str:
    """The first line of the message only: NCCL prints a format's embedded newline as a new
    log line that carries no "NCCL WARN" prefix. glibc's %m prints strerror(errno)."""
    first = fmt.strip().split("\n", 1)[0]
    return printf_pattern(first.replace("%m", "%s"))


def _literal_len(fmt: str) -> int:
    return len(re.sub(r"\s+", "", CONVERSION.sub("", fmt)))


def _slug(fmt: str) -> str:
    words = re.findall(r"[a-z0-9]+", CONVERSION.sub(" ", fmt).lower())
    return "-".join(words[:SLUG_WORDS]) or "format"


def _warn_calls(text: str):
    """(line, format, comment) for each WARN( whose first argument is built from string
    literals (with macro names spliced in); a call whose format is a variable is skipped.
    Comments and strings are stepped over so that a WARN( inside them is not a call."""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            i = _line_end(text, i)
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif c in "\"'":
            i = _skip_quoted(text, i)
        elif c.isalpha() or c == "_":
            j = i
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            if text[i:j] == "WARN":
                k = j
                while k < n and text[k] in " \t\r\n":
                    k += 1
                if k < n and text[k] == "(":
                    fmt = _format_arg(text, k + 1)
                    if fmt is not None:
                        yield text.count("\n", 0, i) + 1, fmt, _comment_above(text, i)
            i = j
        else:
            i += 1


def _line_end(text: str, i: int) -> int:
    j = text.find("\n", i)
    return len(text) if j < 0 else j


def _skip_quoted(text: str, i: int) -> int:
    q, j = text[i], i + 1
    while j < len(text) and text[j] != q:
        if text[j] == "\\":
            j += 1
        elif text[j] == "\n":
            break
        j += 1
    return j + 1


_TOKEN = re.compile(r'\s*(?:\\\n\s*)*(?:"((?:[^"\\\n]|\\.)*)"|(#?\s*[A-Za-z_]\w*)|([,)]))')


def _format_arg(text: str, i: int) -> str | None:
    """The first argument of a call as a printf format, or None when it is not made of string
    literals. A macro parameter or other name spliced between literals prints something we
    cannot know: it becomes %s, a wildcard."""
    parts: list[str] = []
    has_literal = False
    while True:
        m = _TOKEN.match(text, i)
        if not m:
            return None
        i = m.end()
        lit, name, end = m.groups()
        if end is not None:
            return "".join(parts) if has_literal else None
        if lit is not None:
            parts.append(_unescape(lit))
            has_literal = True
        else:
            name = name.lstrip("#").strip()
            parts.append(PRI_MACROS.get(name, "%s"))


def _comment_above(text: str, i: int) -> str | None:
    """The `//` comment lines directly above the statement, if any: NCCL's only explanation
    of a warning where it gives one."""
    start = text.rfind("\n", 0, i) + 1
    lines: list[str] = []
    pos = start
    while pos > 0:
        prev_start = text.rfind("\n", 0, pos - 1) + 1
        prev = text[prev_start:pos - 1].strip().rstrip("\\").strip()
        if not prev.startswith("//"):
            break
        lines.insert(0, prev.lstrip("/").strip())
        pos = prev_start
    # A tool's annotation (coverity[...]) or a note on the surrounding code ("the above ...")
    # says nothing about the message.
    lines = [ln for ln in lines if not re.match(r"(coverity\[|NOLINT|cppcheck)", ln)]
    if not lines or lines[0].lower().startswith("the above"):
        return None
    return _sentences(" ".join(lines)) or None
