"""Reading the snapshot from a fixer: a missing area or key is just None."""

from __future__ import annotations

import re


def fact(snapshot, *path, default=None):
    """`fact(snap, "nvml", "gpus")`: the value at that path, or `default` when any step is missing."""
    cur = snapshot or {}
    for p in path:
        if isinstance(cur, dict) and p in cur:
            cur = cur[p]
        elif isinstance(cur, list) and isinstance(p, int) and p < len(cur):
            cur = cur[p]
        else:
            return default
    return default if cur is None else cur


# A snapshot is data from another machine, or from anyone: a fixer puts none of its text into a
# file, a path or a command without checking it has the one shape it should have.
VERSION = re.compile(r"\d+(?:\.\d+){0,3}")


def is_plain(text) -> bool:
    """One line of printable text: no line break of any kind (\\n, \\r, \\v, \\f, \\x85,
    U+2028...), no control character; tabs allowed."""
    return isinstance(text, str) and all(c.isprintable() or c == "\t" for c in text)


def printable(text) -> str:
    """For advice and messages only: the text with every control character and line break dropped."""
    return "".join(c for c in str(text) if c.isprintable())


def version_fact(snapshot, *path) -> str | None:
    """A version fact (550.107.02, 12.4) when it is one, else None."""
    value = fact(snapshot, *path)
    return value if isinstance(value, str) and VERSION.fullmatch(value) else None
