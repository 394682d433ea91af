"""Python's `re` deciding a candidate segment in bounded work, for the pure-Python engine.

A backtracking search costs up to the square (or cube) of the text for ordinary patterns:
`(?P<lib>[^\\s:]*(?:cuda|...)...)` retries from every character, `nccl\\S*...[^\\n]*?...` rescans
the rest of the line at every `nccl`: a 40 kB line can take minutes over the shipped patterns. So a
segment longer than WINDOW characters is searched in windows of WINDOW characters, each
starting half a window after the last, and only in windows that hold one of the pattern's
required literals, at most MAX_WINDOWS of them: the work per segment and pattern is bounded,
whatever its length.

What this gives up, on segments longer than WINDOW only (RE2 and hyperscan read them whole, up
to LONG_LINE): a match longer than a quarter window may be missed or found shorter, and past
MAX_WINDOWS windows with a literal nothing more is looked for. Within a window, `^`, `\\b` and
lookbehind see the characters before it (`search(text, pos, endpos)`); `$`, `\\b` and lookahead
at its end would take the cut for the end of the line, so a window's match is kept only if it
ends a quarter window before the cut (the next window holds it whole) or at the segment's end.
"""

from __future__ import annotations

import re
from typing import Callable

from troubleshoot.scan.required import required_literals

WINDOW = 2048
MAX_WINDOWS = 64

def finder(regex: re.Pattern) -> Callable[[str], "tuple[int, int, dict] | None"]:
    """find(segment) -> (start, end, captures) of the pattern's first match, or None."""
    search = regex.search
    literals = required_literals(regex)
    fold = bool(regex.flags & re.IGNORECASE)
    if fold and literals:
        literals = [lit.lower() for lit in literals]

    def find(seg: str):
        if len(seg) <= WINDOW:
            m = search(seg)
            return None if m is None else (m.start(), m.end(), m.groupdict())
        return windowed(seg, search, literals, fold)
    return find


def windowed(seg: str, search, literals: list[str] | None, fold: bool) -> "tuple[int, int, dict] | None":
    """The first match found in the windows of a long segment (see the module's docstring)."""
    # Lowercasing may change the length of a non-ASCII text: then every window is searched.
    text = seg if not fold else (seg.lower() if seg.isascii() else None)
    step, keep = WINDOW // 2, WINDOW * 3 // 4
    n = len(seg)
    searched = 0
    for a in range(0, n, step):
        b = min(a + WINDOW, n)
        last = b == n
        limit = b if last else a + keep  # a match kept from this window ends by here
        if literals and text is not None and not any(text.find(lit, a, limit) >= 0 for lit in literals):
            if last:
                break
            continue
        m = search(seg, a, b)
        if m is not None and (last or m.end() <= limit):
            return m.start(), m.end(), m.groupdict()
        searched += 1
        if last or searched >= MAX_WINDOWS:
            break
    return None
