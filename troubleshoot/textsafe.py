"""Terminal-safe text: data from logs, snapshots and file names never reaches a terminal with
its control sequences. Every layer that prints such data uses this one helper."""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str, keep_newlines: bool = True) -> str:
    """Control characters (ESC, CR, BEL, C1...) shown as visible escapes; tabs kept, and
    newlines unless `keep_newlines` is False."""
    out = _CONTROL.sub(lambda m: f"\\x{ord(m.group(0)):02x}", text)
    return out if keep_newlines else out.replace("\n", "\\n")
