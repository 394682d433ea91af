"""Facts as views read them. A snapshot from another machine or a plugin's probe may hold any
JSON value where a view expects a mapping or a list: the view shows what is there, never fails."""

from __future__ import annotations

from typing import Any


def mapping(value: Any) -> dict:
    """`value` when it is a mapping, else an empty one."""
    return value if isinstance(value, dict) else {}


def items(value: Any) -> list:
    """`value` when it is a list, else an empty one."""
    return value if isinstance(value, list) else []
