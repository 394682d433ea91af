"""What every catalog generator shares: the entry, the map from entries to symptoms and
actions (maps/NAME.yaml, written by people: what a code means for a training job is a judgment
the emitter's source does not make), and the catalog's file.

A catalog file (rules/catalogs/NAME.json) is written only from a parsed source tree and its map,
so that a new release of the emitter is one command away:

    python -m tools.catalogs NAME SOURCE_TREE [--version V] [--out FILE]
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
MAPS = Path(__file__).resolve().parent / "maps"
CATALOGS = REPO / "rules" / "catalogs"
SEVERITIES = ("error", "warning", "info")


class CatalogError(Exception):
    """A source tree or a map that cannot make a catalog: one line naming the file."""


@dataclass
class Entry:
    """One message or status code as its emitter defines it. `message` is the literal text the
    emitter prints for it, `pattern` a regular expression for a message printed with a format
    (printf's %s, %d ... turned into wildcards), `doc` the emitter's own words about it, `where`
    the file (and line) of its definition in the source tree."""

    key: str
    code: int | None = None
    message: str | None = None
    pattern: str | None = None
    doc: str | None = None
    where: str | None = None
    extra: dict = field(default_factory=dict)


def printf_pattern(fmt: str) -> str:
    """A regular expression for the lines a printf format prints: each conversion a lazy
    wildcard of its kind, everything else literal. Leading and trailing whitespace (and the
    newline a format ends with) is dropped: a log line may have lost it."""
    conv = re.compile(r"%[-+ #0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|q|j|z|Z|t)?([diouxXeEfFgGaAcspn%])"
                      r"|%(?:NvU64_fmt[a-zA-Z]+)")
    out, pos = [], 0
    text = fmt.strip()
    for m in conv.finditer(text):
        out.append(re.escape(text[pos:m.start()]))
        kind = m.group(1)
        if kind == "%":
            out.append("%")
        elif kind in "diu":
            out.append(r"-?\d+")
        elif kind in "xXop":
            out.append(r"(?:0[xX])?[0-9a-fA-F]+")
        elif kind == "c":
            out.append(".")
        else:
            out.append(r".*?")
        pos = m.end()
    out.append(re.escape(text[pos:]))
    return "".join(out)


def load_map(name: str, path: Path | None = None) -> dict:
    """maps/NAME.yaml: `default` (symptom, severity, action, reason for an entry nothing else
    names), `groups` (a list, first match wins: `keys`, a regular expression over entry keys,
    with the same four fields) and `entries` (one key each)."""
    path = path or MAPS / f"{name}.yaml"
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as e:
        raise CatalogError(f"{path}: {e}") from None
    for k in ("default", "groups", "entries"):
        data.setdefault(k, {} if k != "groups" else [])
    return data


def _verdict(spec: dict, where: str) -> dict:
    bad = set(spec) - {"keys", "symptom", "severity", "action", "reason"}
    if bad:
        raise CatalogError(f"{where}: unknown field(s) {', '.join(sorted(bad))}")
    sev = spec.get("severity", "error" if spec.get("symptom") else "info")
    if sev not in SEVERITIES:
        raise CatalogError(f"{where}: severity must be one of {', '.join(SEVERITIES)}")
    return {"symptom": spec.get("symptom"), "severity": sev, "action": spec.get("action"),
            "reason": spec.get("reason")}


def apply_map(name: str, entries: list[Entry], mapping: dict, strict: bool = True) -> list[dict]:
    """Every entry with its verdict. A key the map names that the source lacks, or a group that
    matches no entry, is an error: the map would silently say nothing after an upstream rename.
    `strict=False` is for an excerpt of the source, which holds only some of its entries."""
    keys = [e.key for e in entries]
    if len(set(keys)) != len(keys):
        dup = sorted({k for k in keys if keys.count(k) > 1})
        raise CatalogError(f"{name}: duplicate keys in the source: {', '.join(dup[:5])}")
    missing = sorted(set(mapping["entries"]) - set(keys))
    if missing and strict:
        raise CatalogError(f"maps/{name}.yaml: entries not in the source: {', '.join(missing)}")
    groups = [(re.compile(g["keys"]), _verdict(g, f"maps/{name}.yaml group {g.get('keys')!r}"), g["keys"])
              for g in mapping["groups"]]
    used: set[str] = set()
    default = _verdict(mapping["default"], f"maps/{name}.yaml default")
    out = []
    for e in entries:
        if e.key in mapping["entries"]:
            v = _verdict(mapping["entries"][e.key] or {}, f"maps/{name}.yaml {e.key}")
        else:
            v = next(((gv, src) for rx, gv, src in groups if rx.search(e.key)), (default, None))
            if v[1] is not None:
                used.add(v[1])
            v = v[0]
        row = {k: val for k, val in asdict(e).items() if val not in (None, {}, "")}
        row.update({k: val for k, val in v.items() if val is not None})
        out.append(row)
    unused = [src for _, _, src in groups if src not in used]
    if unused and strict:
        raise CatalogError(f"maps/{name}.yaml: groups matching no entry: {', '.join(unused)}")
    return out


def write_catalog(name: str, header: dict, rows: list[dict], out: Path | None = None) -> Path:
    """rules/catalogs/NAME.json, keys sorted and one entry per line: a regeneration's diff
    shows what the emitter changed."""
    out = out or CATALOGS / f"{name}.json"
    need = {"name", "source", "version", "url"}
    if need - set(header):
        raise CatalogError(f"{name}: header lacks {', '.join(sorted(need - set(header)))}")
    body = ",\n".join("    " + json.dumps(r, sort_keys=True, ensure_ascii=False) for r in rows)
    text = ('{\n  "catalog": ' + json.dumps({"id": name, **header}, sort_keys=True, ensure_ascii=False)
            + ',\n  "entries": [\n' + body + "\n  ]\n}\n")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(out)
    return out


def split_args(text: str, start: int) -> list[str] | None:
    """The top-level arguments of the C, C++ or Go call whose '(' ends just before `start`, or
    None when the call never closes (a partial file). Strings ("", '', Go's ``), runes and
    comments may hold any bracket or comma."""
    args, depth, i, begin = [], 0, start, start
    while i < len(text):
        c = text[i]
        if c in "\"'`":
            end = text.find(c, i + 1) if c == "`" else _quote_end(text, i)
            if end < 0:
                return None
            i = end
        elif text.startswith("//", i):
            i = text.find("\n", i)
            if i < 0:
                return None
        elif text.startswith("/*", i):
            i = text.find("*/", i) + 1
            if i <= 0:
                return None
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                args.append(text[begin:i])
                return args
            depth -= 1
        elif c == "," and depth == 0:
            args.append(text[begin:i])
            begin = i + 1
        i += 1
    return None


def _quote_end(text: str, i: int) -> int:
    q, j = text[i], i + 1
    while j < len(text) and text[j] != q:
        if text[j] == "\n":
            return -1
        j += 2 if text[j] == "\\" else 1
    return j if j < len(text) else -1
