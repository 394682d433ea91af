"""Reading the snapshot from a fixer: a missing area or key is just None."""

from __future__ import annotations


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
