"""nvidia-persistenced (github.com/NVIDIA/nvidia-persistenced): the error and warning lines the
daemon writes to syslog, read from its syslog()/syslog_device() calls and their verbose-only
forms. A line about one GPU (syslog_device) is printed as "device DDDD:BB:SS.F - <text>", the
prefix nvidia-syslog-utils.c adds.
"""

from __future__ import annotations

import re
from pathlib import Path

from tools.catalogs.common import CatalogError, Entry, printf_pattern
from tools.catalogs.src_kernel import (c_calls, c_format, doc_above, literal_text, make_version,
                                       read_text, slug, trim_pattern, unique_keys)

SOURCE = "github.com/NVIDIA/nvidia-persistenced (syslog formats of *.c)"
NAMES = ("nvidia-persistenced",)
REPO_URL = "https://github.com/NVIDIA/nvidia-persistenced"
# Where the format argument sits in each call, and whether the device prefix is added.
CALLS = {"syslog": (1, False), "SYSLOG_VERBOSE": (1, False),
         "syslog_device": (2, True), "SYSLOG_DEVICE_VERBOSE": (2, True)}
LEVELS = {"LOG_EMERG": "error", "LOG_ALERT": "error", "LOG_CRIT": "error", "LOG_ERR": "error",
          "LOG_WARNING": "warning"}
DEVICE_PREFIX = "device %04x:%02x:%02x.%x - "
MIN_LITERAL = 12


def _file_entries(tree: Path, path: Path) -> list[tuple[str, Entry]]:
    text = read_text(path)
    lines = text.split("\n")
    rel = path.relative_to(tree).as_posix()
    out, seen = [], set()
    for call in c_calls(text, tuple(CALLS)):
        at, device = CALLS[call.name]
        if len(call.args) <= at or call.args[at - 1] not in LEVELS:
            continue
        fmt = c_format(call.args[at], {})
        if fmt is None:
            continue
        fmt = fmt.strip()
        # A format that is all conversion ("%s") or a few words would match any daemon's line;
        # the device prefix makes even a short text specific.
        if not device and len(literal_text(fmt)) < MIN_LITERAL:
            continue
        pattern = trim_pattern(printf_pattern((DEVICE_PREFIX if device else "") + fmt))
        if pattern in seen:
            continue
        seen.add(pattern)
        entry = Entry(key="", pattern=pattern, doc=doc_above(lines, call.line),
                      where=f"{rel}:{call.line}",
                      extra={"level": LEVELS[call.args[at - 1]], "per_device": device})
        out.append((f"{path.stem}.{slug(literal_text(fmt))}", entry))
    return out


def parse(name: str, tree: Path, version: str | None) -> tuple[dict, list[Entry]]:
    items = []
    for path in sorted(tree.glob("*.c")):
        items.extend(_file_entries(tree, path))
    if not items:
        raise CatalogError(f"{tree}: not an nvidia-persistenced tree (no *.c with syslog formats)")
    entries = []
    for key, entry in unique_keys(items):
        entry.key = key
        entries.append(entry)
    ver = make_version(tree, version)
    lic = "MIT"
    if (tree / "COPYING").is_file() and not re.search(r"Permission is hereby granted", read_text(tree / "COPYING")):
        lic = "see COPYING"
    header = {"name": "nvidia-persistenced syslog messages", "version": ver,
              "source": "NVIDIA/nvidia-persistenced *.c (syslog, syslog_device, SYSLOG_VERBOSE, SYSLOG_DEVICE_VERBOSE)",
              "url": f"{REPO_URL}/tree/{ver}", "license": lic,
              "printed_as": 'syslog "nvidia-persistenced[PID]: <text>", per GPU "device DDDD:BB:SS.F - <text>"'}
    return header, entries
