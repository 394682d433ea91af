"""Snapshots: load, check against the documented schema, save, redact.

A snapshot from another machine (or another troubleshoot version) is data we do not control:
problems become warnings, values of the wrong type are dropped (so a rule sees them as unknown,
never as something they are not), and only a file that is not a snapshot at all, or one far
bigger than any machine produces, is an error.

Besides `type`, the checker honours these schema keywords: `pattern` (the whole string must
match; `x-expected` names what it should be), `required` (an entry missing one of these, or
holding null there, is dropped), `maxItems` and `maxProperties` (more is an error; lists and
objects the schema does not bound get MAX_ITEMS).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from troubleshoot.errors import TroubleshootError
from troubleshoot.probes.base import SNAPSHOT_SCHEMA
from troubleshoot.schemas import schema
from troubleshoot.schemas.factpaths import FREE_AREAS

if TYPE_CHECKING:
    from threading import Event

    from troubleshoot.probes.base import Probe, ProbeContext, ProbeOutcome

# A real snapshot is tens of kB (one with 16 GPUs and 200 Xid events: about 150 kB); the caps
# leave plugins plenty of room while keeping a hostile file from costing minutes and gigabytes.
MAX_SNAPSHOT_BYTES = 4 << 20
MAX_ITEMS = 10_000  # entries of one list, keys of one object, where the schema sets no bound
MAX_VALUES = 250_000  # values in the whole snapshot
MAX_WARNINGS = 20  # per snapshot; the rest are counted


@dataclass
class Loaded:
    facts: dict
    warnings: list[str] = field(default_factory=list)


def load(path: str | Path) -> Loaded:
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_SNAPSHOT_BYTES:
            raise TroubleshootError(f"snapshot {p} is larger than a snapshot of one machine can be "
                                    f"({size / (1 << 20):.1f} MiB; at most {MAX_SNAPSHOT_BYTES >> 20} MiB)")
        with p.open("rb") as f:
            raw = f.read(MAX_SNAPSHOT_BYTES + 1)  # a file that grew since stat() is still bounded
    except OSError as exc:
        raise TroubleshootError(f"cannot read snapshot {p}: {exc.strerror or exc}") from None
    if len(raw) > MAX_SNAPSHOT_BYTES:
        raise TroubleshootError(f"snapshot {p} is larger than {MAX_SNAPSHOT_BYTES >> 20} MiB")
    return check(parse(raw, str(p)), str(p))


def parse(raw: bytes, name: str) -> Any:
    """JSON text to data, every failure a one-line TroubleshootError naming `name`."""
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise TroubleshootError(f"{name}: not UTF-8 text (byte {exc.start})") from None
    except ValueError as exc:
        line = getattr(exc, "lineno", None)
        raise TroubleshootError(f"{name}:{line}: not valid JSON: {getattr(exc, 'msg', exc)}" if line
                                else f"{name}: not valid JSON: {exc}") from None
    except RecursionError:
        raise TroubleshootError(f"{name}: JSON nested too deeply") from None


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
    cleaner = _Cleaner(name, warnings)
    facts = cleaner.clean(data, schema(), "", 0)
    if cleaner.unsaid:
        warnings.append(f"{name}: ... and {cleaner.unsaid} more problems like these")
    facts = complete(facts)
    for area in ("nvml", "kernel", "cuda", "frameworks", "docker", "io"):
        if area not in facts:
            warnings.append(f"{name}: no '{area}' facts; rules that need them cannot fire")
    return Loaded(facts=facts, warnings=warnings)


_TYPES = {"object": dict, "array": list, "string": str, "integer": int, "number": (int, float), "boolean": bool,
          "null": type(None)}


def run_probes(probes: Sequence[Probe], ctx: ProbeContext | None = None,
               on_result: Callable[[ProbeOutcome], None] | None = None, cancel: Event | None = None) -> dict:
    """This machine's snapshot: what the probes read (probes.base.run_probes, same arguments),
    completed with what is derived from it, as a loaded snapshot is."""
    from troubleshoot.probes import base

    return complete(base.run_probes(probes, ctx, on_result, cancel=cancel))


def complete(facts: dict) -> dict:
    """`facts` with what is derived from the facts read: each Xid event's verdict (the engine's,
    from its code and line; a verdict the snapshot holds is never read), and for snapshots saved
    before newer probes existed, what those probes add."""
    from troubleshoot.engine.xidevents import with_verdicts

    _fill_older(facts)
    return dict(with_verdicts(facts))


def _fill_older(facts: dict) -> None:
    """Facts that newer probes record, filled in for snapshots saved before they existed."""
    cuda = facts.get("cuda")
    if isinstance(cuda, dict) and "versions" not in cuda and isinstance(cuda.get("libraries"), list):
        from troubleshoot.probes.cuda import versions

        cuda["versions"] = versions([lib for lib in cuda["libraries"] if isinstance(lib, dict) and lib.get("name")])
    events = (facts.get("kernel") or {}).get("xid_events") if isinstance(facts.get("kernel"), dict) else None
    for e in events if isinstance(events, list) else ():
        # Xid events saved before they carried time and a verdict: current, since nothing says
        # otherwise (a probe that wrote verdicts wrote `current` too)
        if isinstance(e, dict) and isinstance(e.get("code"), int) and "action" not in e:
            e.setdefault("current", True)


def _type_ok(value, types) -> bool:
    for t in ([types] if isinstance(types, str) else types):
        if t in ("integer", "number") and isinstance(value, bool):
            continue
        if isinstance(value, _TYPES[t]):
            return True
    return False


_DROP = object()
MAX_MAGNITUDE = 1 << 63  # no fact (bytes, counters, clocks) needs more; bigger ones are corrupt
MAX_DEPTH = 32


class _Cleaner:
    """One snapshot's walk: the usable facts, its warnings, and the count of values seen so far
    (checked before each list or object is walked, so an absurd one costs nothing)."""

    def __init__(self, name: str, warnings: list[str]):
        self.name = name
        self.warnings = warnings
        self.values = 0
        self.unsaid = 0  # warnings past MAX_WARNINGS: a broken file must not print thousands of lines

    def warn(self, path: str, text: str) -> None:
        if len(self.warnings) >= MAX_WARNINGS:
            self.unsaid += 1
            return
        self.warnings.append(f"{self.name}: {path or 'top level'}: {text}")

    def clean(self, value, sch: dict, path: str, depth: int):
        """`value` as the schema allows it, or _DROP (with a warning) when it is unusable."""
        if not self._admit(value, sch, path, depth):
            return None
        types = sch.get("type")
        if types and not _type_ok(value, types):
            want = " or ".join([types] if isinstance(types, str) else types)
            self.warn(path, f"expected {want}, found {type(value).__name__} {_short(value)}; ignored")
            return _DROP
        if isinstance(value, dict):
            return self._object(value, sch, path, depth)
        if isinstance(value, list) and "items" in sch:
            out = (self.clean(v, sch["items"], f"{path}[{i}]", depth + 1) for i, v in enumerate(value))
            return [v for v in out if v is not _DROP]
        if isinstance(value, list):
            return [self.free(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(value)]
        return self._scalar(value, sch, path)

    def free(self, value, path: str, depth: int):
        """Plugin areas and free-form maps are kept as they are, except numbers out of range."""
        if not self._admit(value, {}, path, depth):
            return None
        if isinstance(value, dict):
            return {k: self.free(x, f"{path}.{k}", depth + 1) for k, x in value.items()}
        if isinstance(value, list):
            return [self.free(x, f"{path}[{i}]", depth + 1) for i, x in enumerate(value)]
        out = self._scalar(value, {}, path)
        return None if out is _DROP else out

    def _admit(self, value, sch: dict, path: str, depth: int) -> bool:
        """Refuse absurd sizes outright, before walking them. False: nested too deeply (dropped)."""
        if isinstance(value, (list, dict)):
            most = sch.get("maxItems" if isinstance(value, list) else "maxProperties", MAX_ITEMS)
            if len(value) > most:
                what = "entries" if isinstance(value, list) else "keys"
                raise TroubleshootError(f"{self.name}: {path or 'top level'} has {len(value)} {what} (at most "
                                        f"{most}); not a snapshot of one machine")
            self.values += len(value)  # each value is counted once, by the list or object holding it
            if self.values > MAX_VALUES:
                raise TroubleshootError(f"{self.name}: more than {MAX_VALUES} values (at {path or 'top level'}); "
                                        "not a snapshot of one machine")
        if depth > MAX_DEPTH:
            self.warn(path, "nested too deeply; dropped")
            return False
        return True

    def _object(self, value: dict, sch: dict, path: str, depth: int):
        props = sch.get("properties", {})
        out = {}
        for k, v in value.items():
            sub = f"{path}.{k}" if path else k
            if k in props:
                cleaned = self.clean(v, props[k], sub, depth + 1)
                if cleaned is not _DROP:
                    out[k] = cleaned
            elif sch.get("additionalProperties", True) is False and path not in FREE_AREAS:
                self.warn(sub, "unknown fact; ignored")
            else:
                out[k] = self.free(v, sub, depth + 1)
        missing = [k for k in sch.get("required", ()) if out.get(k) is None]
        if missing and path:  # the top level's `schema` was checked before
            self.warn(path, f"no {', '.join(map(repr, missing))}; ignored")
            return _DROP
        return out

    def _scalar(self, value, sch: dict, path: str):
        if isinstance(value, (int, float)) and not isinstance(value, bool) and not _bounded(value):
            self.warn(path, f"number {_short(value)} is out of range; ignored")
            return _DROP
        if isinstance(value, str) and "pattern" in sch and not re.fullmatch(sch["pattern"], value):
            self.warn(path, f"{_short(value)} is not {sch.get('x-expected', 'valid here')}; ignored")
            return _DROP
        return value


def _bounded(value) -> bool:
    if isinstance(value, int):
        return -MAX_MAGNITUDE <= value <= MAX_MAGNITUDE
    return value == value and abs(value) <= MAX_MAGNITUDE  # NaN and infinities are not facts


def _short(value) -> str:
    if isinstance(value, str) and len(value) > 40:
        value = value[:40]  # the start says enough; never serialise a huge value to show 40 characters
    elif isinstance(value, (list, dict)):
        return f"({type(value).__name__} of {len(value)})"
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


# ---------------------------------------------------------------- redaction

_IPV4 = re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}\b")
_IPV6 = re.compile(r"\b(?:[0-9a-fA-F]{1,4}:){3,7}[0-9a-fA-F]{1,4}\b")
_MAC = re.compile(r"\b(?:[0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}\b")
_PCI = re.compile(r"^(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?$")


def redaction_key() -> bytes:
    """A fresh random key for `redact`: snapshots that leave together (one bundle) share one, so
    the same host has the same placeholder in all of them."""
    return secrets.token_bytes(32)


# Lives only in this process, never in a snapshot or a file: without it nobody can recompute a
# placeholder from a guessed name, and snapshots redacted by different runs share nothing.
_PROCESS_KEY = redaction_key()


def redact(facts: dict, key: bytes | None = None) -> dict:
    """Replace hostnames, IP and MAC addresses, user names and home paths with placeholders keyed
    by HMAC-SHA256: within one snapshot (or every snapshot given the same `key`) the same value
    gets the same placeholder, so a redacted snapshot still diagnoses the same; without the key
    a placeholder cannot be reversed by hashing candidates. Without `key`, the snapshot gets its
    own, derived from this process's random key and its content."""
    key = key if key is not None else _snapshot_key(facts)
    host = (facts.get("host") or {})
    names: dict[str, str] = {}
    for field_name, label in (("hostname", "host"), ("user", "user"), ("home", "home")):
        value = host.get(field_name)
        if isinstance(value, str) and value and value not in ("/", "root"):
            names[value] = _placeholder(key, label, value)
    # Whole tokens only: a host named `vm` must not turn `nvml` (a key, an error message) into
    # `n<host-...>l`, and the facts under it must not vanish.
    token = re.compile("|".join(rf"(?<![\w.-]){re.escape(s)}(?![\w-])"
                                for s in sorted(names, key=len, reverse=True))) if names else None

    def scrub(text: str) -> str:
        if _PCI.match(text):
            return text  # PCI addresses look like MACs and IPv6 but are not personal
        if token is not None:
            text = token.sub(lambda m: names[m.group(0)], text)
        text = re.sub(r"/home/([^/\s]+)", lambda m: "/home/" + _placeholder(key, "user", m.group(1)), text)
        text = _MAC.sub(lambda m: _placeholder(key, "mac", m.group(0)), text)
        text = _IPV4.sub(lambda m: m.group(0) if m.group(0).startswith("127.") else _placeholder(key, "ip", m.group(0)),
                         text)
        return _IPV6.sub(lambda m: _placeholder(key, "ip6", m.group(0)), text)

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


def _snapshot_key(facts: dict) -> bytes:
    """This snapshot's own key: redacting it again in this run gives the same placeholders;
    another snapshot, or this one in another run, gets unrelated ones."""
    content = json.dumps(facts, default=str).encode("ascii")  # ASCII: lone surrogates are escaped
    return hmac.new(_PROCESS_KEY, content, hashlib.sha256).digest()


def _placeholder(key: bytes, label: str, value: str) -> str:
    # surrogatepass: a host or user name read from undecodable bytes still gets its placeholder
    digest = hmac.new(key, value.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()
    return f"<{label}-{digest[:8]}>"
