"""NVIDIA's open GPU kernel modules (github.com/NVIDIA/open-gpu-kernel-modules): the driver's
status codes (nv-status) and the kernel-log messages it prints that are not Xid lines (nvrm).

nv-status reads every NV_STATUS_CODE(name, value, "text") of nvstatuscodes.h; the driver prints
these as names, as "status 0x000000NN" and as the text itself.

nvrm reads the print calls of the paths a user of a datacenter GPU sees in dmesg: the Linux
interface layer (kernel-open/nvidia and the OS glue under src/nvidia/arch/nvalloc/unix, which
print at NV_DBG_ERRORS/NV_DBG_WARNINGS, both shown at the default debug level) and the error
prints (NV_PRINTF at LEVEL_ERROR, portDbgPrintf "NVRM: ...") of the GSP, RPC, CrashCat and
robust-channel paths. Xid lines are left to the Xid catalog.

The C scanning helpers here are shared with src_persistenced.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tools.catalogs.common import CatalogError, Entry, printf_pattern, split_args

SOURCE = "github.com/NVIDIA/open-gpu-kernel-modules (nvstatuscodes.h; kernel-open/, src/nvidia/)"
NAMES = ("nv-status", "nvrm")
REPO_URL = "https://github.com/NVIDIA/open-gpu-kernel-modules"
STATUS_H = "src/common/sdk/nvidia/inc/nvstatuscodes.h"

# Shortest literal text (conversions and the "NVRM:" prefix removed) that still identifies a
# message: shorter formats ("%s: failed") would match ordinary log lines.
MIN_LITERAL = 12
# A multi-line message's first line identifies it when it has this much literal text.
FIRST_LINE_ENOUGH = 30


# ---------------------------------------------------------------- C scanning (shared)

@dataclass
class Call:
    """One call of a print function: its name, its raw top-level arguments, its line."""

    name: str
    args: list[str]
    line: int


_TOKEN = re.compile(r'\s*(?:("(?:\\.|[^"\\\n])*")|([A-Za-z_]\w*))')
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "'": "'", "a": "", "0": ""}


def blank_comments(text: str) -> str:
    """The text with every comment's characters turned into spaces (newlines kept), so that
    offsets and line numbers still hold and a print inside a comment is not taken for code."""
    out, i, n = list(text), 0, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out[i:j] = " " * (j - i)
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out[i:j] = [ch if ch == "\n" else " " for ch in text[i:j]]
            i = j
        else:
            i += 1
    return "".join(out)


def _call_args(code: str, start: int) -> list[str] | None:
    """The stripped top-level arguments of the call whose "(" ends just before `start`; None
    when unbalanced or when a statement ends inside it (a macro's body cut by the preprocessor's
    lines, not a call)."""
    args = split_args(code, start)
    if args is None or any(_top_level_semicolon(_STRINGS.sub("", a)) for a in args):
        return None
    return [a.strip() for a in args]


_STRINGS = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'')


def _top_level_semicolon(arg: str) -> bool:
    depth = 0
    for c in arg:
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == ";" and depth == 0:
            return True
    return False


def c_calls(text: str, names: tuple[str, ...]) -> list[Call]:
    """Every call of the named functions or macros outside comments, with its arguments."""
    code = blank_comments(text)
    rx = re.compile(r"(?<![\w.>])(" + "|".join(map(re.escape, names)) + r")\s*\(")
    calls = []
    for m in rx.finditer(code):
        line_start = code.rfind("\n", 0, m.start()) + 1
        if code[line_start:m.start()].lstrip().startswith("#"):
            continue  # the macro's own #define
        args = _call_args(code, m.end())
        if args is not None:
            calls.append(Call(m.group(1), args, code.count("\n", 0, m.start()) + 1))
    return calls


def _unescape(body: str) -> str:
    def one(m: re.Match) -> str:
        s = m.group(1)
        if s[0] in "01234567" and len(s) > 1:
            return chr(int(s, 8))
        if s[0] == "x":
            return chr(int(s[1:], 16))
        return _ESCAPES.get(s, s)
    return re.sub(r"\\([0-7]{1,3}|x[0-9a-fA-F]+|.)", one, body)


def c_format(arg: str, macros: dict[str, str]) -> str | None:
    """The text of a format argument made of adjacent string literals and string macros
    (NvU64_fmtx, NV_PCI_DEV_FMT ...); an unknown macro is a string ("%s"). None when the
    argument is anything else (a variable, a ternary): its text is not in the source."""
    out, pos, literal = [], 0, False
    while arg[pos:].strip():
        m = _TOKEN.match(arg, pos)
        if not m:
            return None
        literal = literal or bool(m.group(1))
        if m.group(1):
            out.append(_unescape(m.group(1)[1:-1]))
        else:
            # An unknown macro right after "%" is a conversion's tail (PRIx64); elsewhere a string.
            tail = "".join(out).endswith("%")
            out.append(macros.get(m.group(2), "llx" if m.group(2).startswith("PRI") else "s" if tail else "%s"))
        pos = m.end()
    return "".join(out) if literal else None


def doc_above(lines: list[str], line: int) -> str | None:
    """The comment block ending on the line just above `line` (1-based), its first sentences:
    the emitter's own note on why it prints the message."""
    i, block = line - 2, []
    while i >= 0 and re.match(r"\s*(//|/?\*)", lines[i]):
        block.insert(0, lines[i])
        i -= 1
    text = " ".join(re.sub(r"^\s*(//+|/\*+|\*+/?)|\*+/\s*$", "", ln).strip() for ln in block)
    return first_sentences(text)


def first_sentences(text: str, n: int = 3) -> str | None:
    text = re.sub(r"\s+", " ", text).strip()
    if not text:
        return None
    parts = re.split(r"(?<=[.!?])\s+(?=[A-Z])", text)
    return " ".join(parts[:n])


def literal_text(fmt: str) -> str:
    """What a format prints for certain: its conversions removed, whitespace collapsed."""
    text = re.sub(r"%[-+ #0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|q|j|z|Z|t)?[a-zA-Z%]", " ", fmt)
    return re.sub(r"\s+", " ", text).strip()


def slug(text: str, words: int = 8) -> str:
    parts = [p for p in re.findall(r"[a-z0-9]+", text.lower()) if p != "0x"]
    return "-".join(parts[:words]) or "message"


def unique_keys(items: list[tuple[str, object]]) -> list[tuple[str, object]]:
    """Keys made unique in source order: the second of two equal keys gets "-2", and so on."""
    seen: dict[str, int] = {}
    out = []
    for key, item in items:
        seen[key] = seen.get(key, 0) + 1
        out.append((key if seen[key] == 1 else f"{key}-{seen[key]}", item))
    return out


def read_text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def make_version(tree: Path, version: str | None) -> str:
    """The release in the tree's version.mk (NVIDIA_VERSION = ...), else the caller's."""
    mk = tree / "version.mk"
    if mk.is_file():
        m = re.search(r"^NVIDIA_VERSION\s*=\s*(\S+)", read_text(mk), re.M)
        if m:
            return m.group(1)
    if version:
        return version
    raise CatalogError(f"{tree}: no version.mk and no --version")


def spdx(path: Path) -> str | None:
    m = re.search(r"SPDX-License-Identifier:\s*(.+?)\s*(?:\*/)?$", read_text(path), re.M)
    return m.group(1) if m else None


# ---------------------------------------------------------------- nv-status

_STATUS = re.compile(r'^NV_STATUS_CODE\(\s*(NV_\w+)\s*,\s*(0x[0-9A-Fa-f]+)\s*,\s*"((?:\\.|[^"\\])*)"\s*\)'
                     r'[ \t]*(?://[ \t]*(.*))?$', re.M)


def parse_status(tree: Path) -> list[Entry]:
    """Every NV_STATUS_CODE of nvstatuscodes.h; its trailing comment, where there is one, is
    the header's only note on the code."""
    path = tree / STATUS_H
    if not path.is_file():
        return []
    text = read_text(path)
    out = []
    for m in _STATUS.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        out.append(Entry(key=m.group(1), code=int(m.group(2), 16), message=_unescape(m.group(3)),
                         doc=first_sentences(m.group(4) or ""), where=f"{STATUS_H}:{line}"))
    return out


# ---------------------------------------------------------------- nvrm

# The interface layer prints with nv_printf/NV_DEV_PRINTF; the Tegra SoC display and platform
# files below kernel-open/nvidia serve no discrete GPU, so their messages never reach a
# training node's log.
IFACE_GLOBS = ("kernel-open/nvidia/*.c", "src/nvidia/arch/nvalloc/unix/src/*.c")
IFACE_SKIP = re.compile(r"/nv-(platform|dsi|clk|gpio|i2c|imp|bpmp|backlight|soc)[^/]*\.c$"
                        r"|/power-management-tegra\.c$")
# Resource-manager paths whose LEVEL_ERROR prints users paste: GSP boot and RPC, CrashCat
# reports, robust-channel recovery and the watchdog, and the adapter's init and teardown.
RM_GLOBS = ("src/nvidia/src/kernel/gpu/gsp/**/*.c", "src/nvidia/src/kernel/vgpu/rpc.c",
            "src/nvidia/src/kernel/rmapi/rpc_common.c", "src/nvidia/src/libraries/crashcat/**/*.c",
            "src/nvidia/src/kernel/gpu/falcon/**/kernel_crashcat_engine*.c",
            "src/nvidia/src/kernel/gpu/rc/*.c", "src/nvidia/src/kernel/gpu/gpu_gspclient.c",
            "src/nvidia/arch/nvalloc/unix/src/osinit.c")
IFACE_CALLS = ("nv_printf", "NV_DEV_PRINTF", "NV_DEV_PRINTF_STATUS")
RM_CALLS = ("NV_PRINTF", "NV_PRINTF_COND", "portDbgPrintf")
IFACE_LEVELS = {"NV_DBG_ERRORS": "error", "NV_DBG_WARNINGS": "warning"}
# LEVEL_WARNING and up reach the kernel log at the default debug level (as NV_DBG_WARNINGS do).
RM_LEVELS = {"LEVEL_ERROR": "error", "LEVEL_WARNING": "warning"}
# vgpu/rpc.c serves both a vGPU guest and a GSP client: on bare metal only its GSP paths and
# the RPC transport's own failures print.
TEXT_FILTER = {"src/nvidia/src/kernel/vgpu/rpc.c": re.compile(r"GspRm|rpcSendMessage|rpcRecvPoll")}
# String macros spliced into formats, as the headers define them (nvtypes.h, nv.h).
# NvU64_fmt* and NvUPtr_fmt* are the conversion without its "%" ("%" NvU64_fmtx).
FORMAT_MACROS = {"NvU64_fmtx": "llx", "NvU64_fmtX": "llX", "NvU64_fmtu": "llu", "NvU64_fmto": "llo",
                 "NvUPtr_fmtu": "lu", "NvUPtr_fmtx": "lx", "NvUPtr_fmtX": "lX",
                 "NV_PCI_DEV_FMT": "%04x:%02x:%02x.%x", "NvP64_fmt": "%p"}
DEV_PREFIX = "GPU %04x:%02x:%02x.%x: "


def _call_format(call: Call) -> tuple[str, str] | None:
    """(level, format as printed after "NVRM: ") of a print call worth keeping, else None."""
    a, fmt, level = call.args, None, None
    if call.name == "nv_printf" and len(a) >= 2:
        level, fmt = IFACE_LEVELS.get(a[0]), c_format(a[1], FORMAT_MACROS)
    elif call.name in ("NV_DEV_PRINTF", "NV_DEV_PRINTF_STATUS") and len(a) >= 3:
        i = 3 if call.name == "NV_DEV_PRINTF_STATUS" else 2
        level, fmt = IFACE_LEVELS.get(a[0]), c_format(a[i], FORMAT_MACROS) if len(a) > i else None
        if fmt is not None:
            # The macros' own text (os-interface.h): the device's PCI address before, the
            # status after.
            fmt = "NVRM: " + DEV_PREFIX + fmt.rstrip("\n")
            fmt += " (0x%x)" if call.name == "NV_DEV_PRINTF_STATUS" else ""
    elif call.name == "NV_PRINTF" and len(a) >= 2:
        level, fmt = RM_LEVELS.get(a[0]), c_format(a[1], FORMAT_MACROS)
    elif call.name == "NV_PRINTF_COND" and len(a) >= 4:
        # The louder of its two levels is the one a failing system prints.
        level = RM_LEVELS.get(a[1]) if a[1] in RM_LEVELS else RM_LEVELS.get(a[2])
        fmt = c_format(a[3], FORMAT_MACROS)
    elif call.name == "portDbgPrintf" and a:
        fmt = c_format(a[0], FORMAT_MACROS)
        # Only its "NVRM: " lines are kernel-log messages; Xid lines are the Xid catalog's.
        ok = fmt is not None and fmt.startswith("NVRM: ") and not fmt.startswith("NVRM: Xid")
        level = "error" if ok else None
    if level is None or fmt is None:
        return None
    return level, fmt


def _message_line(fmt: str) -> str | None:
    """The line of a (possibly multi-line) format that identifies it, without its "NVRM: "
    prefix: the first line when it is a sentence of its own ("API mismatch: the client ..."),
    else the line with the most literal text ("fallen off the bus and is not responding ..."
    rather than "The NVIDIA GPU %04x:..."). None when no line says enough."""
    best, best_len = None, 0
    for i, line in enumerate(fmt.split("\n")):
        line = re.sub(r"^\s*NVRM:\s?", "", line).rstrip()
        body = line[len(DEV_PREFIX):] if line.startswith(DEV_PREFIX) else line
        text = literal_text(body)
        # Register dumps ("gspFwHeap: 0x.. - 0x..") and banners ("*****") carry one word or none.
        if len(text) < MIN_LITERAL or len(re.findall(r"[A-Za-z]{2,}", text)) < 2:
            continue
        if i == 0 and len(text) >= FIRST_LINE_ENOUGH:
            return line
        if len(text) > best_len:
            best, best_len = line, len(text)
    return best


def trim_pattern(pattern: str) -> str:
    """A pattern without leading or trailing wildcards: a search needs neither."""
    while pattern.startswith(".*?"):
        pattern = pattern[3:]
    while True:
        if pattern.endswith(".*?") and not pattern.endswith("\\.*?"):
            pattern = pattern[:-3]
        elif pattern.endswith("\\ "):
            pattern = pattern[:-2]
        else:
            return pattern


def _file_entries(tree: Path, path: Path, calls: tuple[str, ...]) -> list[tuple[str, Entry]]:
    text = read_text(path)
    lines = text.split("\n")
    rel = path.relative_to(tree).as_posix()
    stem = path.stem
    out, seen = [], set()
    for call in c_calls(text, calls):
        got = _call_format(call)
        line = _message_line(got[1]) if got else None
        if line is None or (rel in TEXT_FILTER and not TEXT_FILTER[rel].search(line)):
            continue
        pattern = trim_pattern(printf_pattern(line))
        if pattern in seen:
            continue  # the same message printed from two places of one file
        seen.add(pattern)
        body = line[len(DEV_PREFIX):] if line.startswith(DEV_PREFIX) else line
        extra = {"level": got[0]}
        if "\n" in got[1].strip("\n"):
            # The whole message, for a rule that wants its other lines.
            extra["text"] = re.sub(r"(?m)^\s*NVRM:\s?", "", got[1]).strip()
        # `where` is the file alone: the key names the message, and a file's line numbers
        # change with every release (an excerpt of the file must rebuild the same entry).
        entry = Entry(key="", pattern=pattern, doc=doc_above(lines, call.line), where=rel, extra=extra)
        out.append((f"{stem}.{slug(literal_text(body))}", entry))
    return out


def _sources(tree: Path) -> list[tuple[Path, tuple[str, ...]]]:
    files: dict[Path, tuple[str, ...]] = {}
    for glob in IFACE_GLOBS:
        for p in sorted(tree.glob(glob)):
            if not IFACE_SKIP.search(p.as_posix()):
                files[p] = IFACE_CALLS
    for glob in RM_GLOBS:
        for p in sorted(tree.glob(glob)):
            files[p] = files.get(p, ()) + RM_CALLS
    return sorted(files.items(), key=lambda kv: kv[0].relative_to(tree).as_posix())


def parse_nvrm(tree: Path) -> list[Entry]:
    items = []
    for path, calls in _sources(tree):
        items.extend(_file_entries(tree, path, calls))
    out = []
    for key, entry in unique_keys(items):
        entry.key = key
        out.append(entry)
    return out


# ---------------------------------------------------------------- the generator

def parse(name: str, tree: Path, version: str | None) -> tuple[dict, list[Entry]]:
    entries = parse_status(tree) if name == "nv-status" else parse_nvrm(tree)
    if not entries:
        what = STATUS_H if name == "nv-status" else "kernel-open/nvidia/*.c or src/nvidia print paths"
        raise CatalogError(f"{tree}: not an open-gpu-kernel-modules tree (no {what} with messages)")
    ver = make_version(tree, version)
    header = {"version": ver, "url": f"{REPO_URL}/tree/{ver}",
              "license": "MIT (per-file SPDX-License-Identifier; repository COPYING: MIT except where noted)"}
    if name == "nv-status":
        header.update(name="NVIDIA driver status codes (NV_STATUS)",
                      source=f"NVIDIA/open-gpu-kernel-modules {STATUS_H}",
                      printed_as='a name, "status 0x%08x", or the text ("... (Failure: ...)")')
    else:
        header.update(name="NVIDIA kernel driver (NVRM) messages, Xid lines excepted",
                      source="NVIDIA/open-gpu-kernel-modules " + ", ".join(IFACE_GLOBS + RM_GLOBS),
                      printed_as='"NVRM: <text>", "NVRM: <function>: <text>" or "NVRM: GPU<n> <function>: <text>"')
    return header, entries
