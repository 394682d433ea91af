"""The functions a condition may call (`version(x)`, `bytes(x)`, `len(x)`, ...) and how a
value reads as a number or a version."""

from __future__ import annotations

from typing import Callable

from troubleshoot.engine.condtree import UNKNOWN, NumLit
from troubleshoot.values import Version, looks_like_version, parse_bytes, parse_version


def is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def as_version(v) -> Version | None:
    if isinstance(v, Version):
        return v
    if isinstance(v, NumLit):
        return parse_version(v.text)
    if isinstance(v, str) and looks_like_version(v):
        return parse_version(v)
    if is_number(v):
        return parse_version(repr(v) if isinstance(v, float) else str(v))
    return None


def _len(x):
    if isinstance(x, (list, dict, str)):
        return len(x)
    raise TypeError


def _version(x):
    v = as_version(x)
    if v is None:
        raise ValueError
    return v


def _number(x):
    if is_number(x):
        return x
    return float(str(x).strip())


FUNCTIONS: dict[str, Callable] = {
    "version": _version,
    "bytes": parse_bytes,
    "len": _len,
    "lower": lambda x: str(x).lower(),
    "number": _number,
    "exists": lambda x: x is not UNKNOWN,  # evaluated specially: its argument is a path
}
