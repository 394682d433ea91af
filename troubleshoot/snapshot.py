"""Snapshots: load, check against the documented schema, save, redact.

A snapshot from another machine (or another troubleshoot version) is data we do not control:
problems become warnings, values of the wrong type are dropped (so a rule sees them as unknown,
never as something they are not), and only a file that is not a snapshot at all is an error.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from troubleshoot.errors import TroubleshootError
from troubleshoot.probes.base import SNAPSHOT_SCHEMA

MAX_SNAPSHOT_BYTES = 64 << 20
FREE_AREAS = {"env", "probes"}  # mappings whose keys are data, not schema


@functools.lru_cache(maxsize=1)
def schema() -> dict:
    text = resources.files("troubleshoot.schemas").joinpath("snapshot.schema.json").read_text(encoding="utf-8")
    return json.loads(text)


@dataclass
class Loaded:
    facts: dict
    warnings: list[str] = field(default_factory=list)


def load(path: str | Path) -> Loaded:
    p = Path(path)
    try:
        if p.stat().st_size > MAX_SNAPSHOT_BYTES:
            raise TroubleshootError(f"snapshot {p} is larger than {MAX_SNAPSHOT_BYTES >> 20} MiB")
        raw = p.read_bytes()
    except OSError as exc:
        raise TroubleshootError(f"cannot read snapshot {p}: {exc.strerror or exc}") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise TroubleshootError(f"{p}: not UTF-8 text (byte {exc.start})") from None
    except ValueError as exc:
        line = getattr(exc, "lineno", None)
        raise TroubleshootError(f"{p}:{line}: not valid JSON: {getattr(exc, 'msg', exc)}" if line
                                else f"{p}: not valid JSON: {exc}") from None
    except RecursionError:
        raise TroubleshootError(f"{p}: JSON nested too deeply") from None
    return check(data, str(p))


def check(data: Any, name: str = "snapshot") -> Loaded:
    """Validate against the schema; return the usable facts and the warnings."""
    if not isinstance(data, dict):
        raise TroubleshootError(f"{name}: not a troubleshoot snapshot (expected a JSON object)")
    version = data.get("schema")
    if not isinstance(version, int) or isinstance(version, bool):
        raise TroubleshootError(f"{name}: not a troubleshoot snapshot (no integer 'schema' key)")
    warnings: list[str] = []
    if version > SNAPSHOT_SCHEMA:
        warnings.append(f"{name}: written by a newer troubleshoot (snapshot schema {version}, this one reads "
                        f"{SNAPSHOT_SCHEMA}); facts it does not know are ignored")
    elif version < 1:
        raise TroubleshootError(f"{name}: unknown snapshot schema {version}")
    facts = _clean(data, schema(), "", warnings, name, depth=0)
    _derive(facts)
    for area in ("nvml", "kernel", "cuda", "frameworks", "docker", "io"):
        if area not in facts:
            warnings.append(f"{name}: no '{area}' facts; rules that need them cannot fire")
    return Loaded(facts=facts, warnings=warnings)


_TYPES = {"object": dict, "array": list, "string": str, "integer": int, "number": (int, float), "boolean": bool,
          "null": type(None)}


def _derive(facts: dict) -> None:
    """Facts that newer probes derive, filled in for snapshots saved before they existed."""
    cuda = facts.get("cuda")
    if isinstance(cuda, dict) and "versions" not in cuda and isinstance(cuda.get("libraries"), list):
        from troubleshoot.probes.cuda import versions

        cuda["versions"] = versions([lib for lib in cuda["libraries"] if isinstance(lib, dict) and lib.get("name")])
    events = (facts.get("kernel") or {}).get("xid_events") if isinstance(facts.get("kernel"), dict) else None
    for e in events if isinstance(events, list) else ():
        # Xid events saved before they carried time and the catalog's verdict: current (nothing
        # says otherwise), and the verdict from their line
        if isinstance(e, dict) and isinstance(e.get("code"), int) and "action" not in e:
            from troubleshoot.probes.kernel import verdict

            e.setdefault("current", True)
            e["symptom"], e["action"] = verdict(e["code"], e.get("line") or "")


def _type_ok(value, types) -> bool:
    for t in ([types] if isinstance(types, str) else types):
        if t in ("integer", "number") and isinstance(value, bool):
            continue
        if isinstance(value, _TYPES[t]):
            return True
    return False


def _clean(value, sch: dict, path: str, warnings: list[str], name: str, depth: int):
    if depth > 32:
        warnings.append(f"{name}: {path}: nested too deeply; dropped")
        return None
    types = sch.get("type")
    if types and not _type_ok(value, types):
        want = " or ".join([types] if isinstance(types, str) else types)
        warnings.append(f"{name}: {path or 'top level'}: expected {want}, found {type(value).__name__} "
                        f"{_short(value)}; ignored")
        return _DROP
    if isinstance(value, dict):
        props = sch.get("properties", {})
        out = {}
        for k, v in value.items():
            sub = f"{path}.{k}" if path else k
            if k in props:
                cleaned = _clean(v, props[k], sub, warnings, name, depth + 1)
                if cleaned is not _DROP:
                    out[k] = cleaned
            elif sch.get("additionalProperties", True) is False and path not in FREE_AREAS:
                warnings.append(f"{name}: {sub}: unknown fact; ignored")
            else:
                out[k] = _bound_free(v, f"{path}.{k}" if path else k, warnings, name, depth + 1)
        return out
    if isinstance(value, (int, float)) and not isinstance(value, bool) and not _bounded(value):
        warnings.append(f"{name}: {path or 'top level'}: number {_short(value)} is out of range; ignored")
        return _DROP
    if isinstance(value, list) and "items" in sch:
        out_l = []
        for i, v in enumerate(value):
            cleaned = _clean(v, sch["items"], f"{path}[{i}]", warnings, name, depth + 1)
            if cleaned is not _DROP:
                out_l.append(cleaned)
        return out_l
    return value


_DROP = object()
MAX_MAGNITUDE = 1 << 63  # no fact (bytes, counters, clocks) needs more; bigger ones are corrupt


def _bounded(value) -> bool:
    if isinstance(value, int):
        return -MAX_MAGNITUDE <= value <= MAX_MAGNITUDE
    return value == value and abs(value) <= MAX_MAGNITUDE  # NaN and infinities are not facts


def _bound_free(v, path: str, warnings: list[str], name: str, depth: int):
    """Plugin areas and free-form maps are kept as they are, except numbers out of range."""
    if depth > 32:
        warnings.append(f"{name}: {path}: nested too deeply; dropped")
        return None
    if isinstance(v, dict):
        return {k: _bound_free(x, f"{path}.{k}", warnings, name, depth + 1) for k, x in v.items()}
    if isinstance(v, list):
        return [_bound_free(x, f"{path}[{i}]", warnings, name, depth + 1) for i, x in enumerate(v)]
    if isinstance(v, (int, float)) and not isinstance(v, bool) and not _bounded(v):
        warnings.append(f"{name}: {path}: number {_short(v)} is out of range; ignored")
        return None
    return v


def _short(value) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def save(facts: dict, path: str | Path) -> None:
    """Write atomically, so an interrupted save never leaves half a snapshot."""
    from troubleshoot.safeio import atomic_write

    p = Path(path)
    try:
        atomic_write(p, (json.dumps(facts, indent=2, sort_keys=False, default=str) + "\n").encode("utf-8"))
    except OSError as exc:
        raise TroubleshootError(f"cannot write snapshot {p}: {exc.strerror or exc}") from None


# ---------------------------------------------------------------- facts catalogue (for lint)

def _schema_paths(sch: dict, prefix: str = ""):
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


def open_paths() -> frozenset[str]:
    """Objects whose keys are free (env vars, daemon.json, error maps): any path below is fine."""
    return frozenset(FREE_AREAS) | frozenset(
        path for path, sub in _schema_paths(schema())
        if path and sub.get("additionalProperties") is not False and "object" in _as_list(sub.get("type")))


def _as_list(t) -> list:
    return [t] if isinstance(t, str) else list(t or [])


# ---------------------------------------------------------------- redaction

_IPV4 = re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}\b")
_IPV6 = re.compile(r"\b(?:[0-9a-fA-F]{1,4}:){3,7}[0-9a-fA-F]{1,4}\b")
_MAC = re.compile(r"\b(?:[0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}\b")
_PCI = re.compile(r"^(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?$")


def redact(facts: dict) -> dict:
    """Replace hostnames, IP and MAC addresses, user names and home paths with stable
    placeholders (the same value always gets the same placeholder, so a redacted snapshot
    still diagnoses the same)."""
    host = (facts.get("host") or {})
    secrets: dict[str, str] = {}
    for key, label in (("hostname", "host"), ("user", "user"), ("home", "home")):
        value = host.get(key)
        if isinstance(value, str) and value and value not in ("/", "root"):
            secrets[value] = _placeholder(label, value)
    # Whole tokens only: a host named `vm` must not turn `nvml` (a key, an error message) into
    # `n<host-...>l`, and the facts under it must not vanish.
    token = re.compile("|".join(rf"(?<![\w.-]){re.escape(s)}(?![\w-])"
                                for s in sorted(secrets, key=len, reverse=True))) if secrets else None

    def scrub(text: str) -> str:
        if _PCI.match(text):
            return text  # PCI addresses look like MACs and IPv6 but are not personal
        if token is not None:
            text = token.sub(lambda m: secrets[m.group(0)], text)
        text = re.sub(r"/home/([^/\s]+)", lambda m: "/home/" + _placeholder("user", m.group(1)), text)
        text = _MAC.sub(lambda m: _placeholder("mac", m.group(0)), text)
        text = _IPV4.sub(lambda m: m.group(0) if m.group(0).startswith("127.") else _placeholder("ip", m.group(0)), text)
        text = _IPV6.sub(lambda m: _placeholder("ip6", m.group(0)), text)
        return text

    def walk(v):
        if isinstance(v, dict):
            return {scrub(k) if isinstance(k, str) else k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, str):
            return scrub(v)
        return v

    out = walk(facts)
    out["redacted"] = True
    return out


def _placeholder(label: str, value: str) -> str:
    return f"<{label}-{hashlib.sha256(value.encode()).hexdigest()[:8]}>"
