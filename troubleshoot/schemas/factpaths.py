"""The fact paths the snapshot schema documents, for checking the paths rules read."""

from __future__ import annotations

import functools
from typing import Iterator

from troubleshoot.schemas import schema

FREE_AREAS = frozenset({"env", "probes"})  # mappings whose keys are data, not schema


def _schema_paths(sch: dict, prefix: str = "") -> Iterator[tuple[str, dict]]:
    """(dotted path, sub-schema) for every node of the schema, lists written as `[]`."""
    yield prefix, sch
    for k, sub in sch.get("properties", {}).items():
        yield from _schema_paths(sub, f"{prefix}.{k}" if prefix else k)
    if "items" in sch:
        yield from _schema_paths(sch["items"], prefix + "[]")


@functools.lru_cache(maxsize=1)
def documented_paths() -> frozenset[str]:
    """Every documented fact path, lists written as `[]`: `nvml.gpus[].temperature_c`."""
    return frozenset(path for path, _ in _schema_paths(schema()) if path)


@functools.lru_cache(maxsize=1)
def open_paths() -> frozenset[str]:
    """Objects whose keys are free (env vars, daemon.json, error maps): any path below is fine."""
    return FREE_AREAS | frozenset(
        path for path, sub in _schema_paths(schema())
        if path and sub.get("additionalProperties") is not False and "object" in _as_list(sub.get("type")))


def _as_list(t) -> list:
    return [t] if isinstance(t, str) else list(t or [])
