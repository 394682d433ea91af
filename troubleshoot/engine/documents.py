"""Rule files and shipped tables as loaded YAML, parsed once per change of the file.

Parsing YAML is most of a cold start and these files rarely change, so each file's loaded
document (or the problems that kept it from loading) is kept in a per-user cache
(usercache.Cache), keyed by the file and stamped with its size, times, inode and device. The
cache holds marshal of plain tuples (yamldoc.encode), never code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from troubleshoot import usercache
from troubleshoot.engine import yamldoc

MAX_RULE_FILE_BYTES = 8 << 20
# Rule files and tables in folders of their own: a table is read whatever the rule folders.
RULE_FILES = usercache.Cache("rules", format=3)
TABLES = usercache.Cache("tables", format=3)


class Document(NamedTuple):
    """A file's YAML: kind "ok" with (encoded data, traps as (line, message)), or kind
    "problems" with [(line, message)]. `parsed`: read from the file now, not from the cache."""

    kind: str
    payload: Any
    parsed: bool = False


def document(path: Path, cache: usercache.Cache = RULE_FILES) -> Document:
    """The YAML of a rule file (or of a shipped table, with `cache=TABLES`), from the cache when
    the file has not changed (files with problems are cached too)."""
    import marshal

    try:
        stamp = usercache.file_stamp(path)
    except OSError as exc:
        return Document("problems", [(None, f"cannot read: {exc.strerror or exc}")])
    key = str(path.resolve())
    blob = cache.get(key, stamp)
    if blob is not None:
        try:
            kind, payload = marshal.loads(blob)
            if kind in ("ok", "problems"):
                return Document(kind, payload)
        except (ValueError, EOFError, TypeError):
            pass  # a damaged entry is a missing one
    kind, payload = _parse(path, size=stamp[1])
    try:
        cache.put(key, stamp, marshal.dumps((kind, payload)))
    except ValueError:
        pass  # a value marshal cannot hold only costs speed
    return Document(kind, payload, parsed=True)


def _parse(path: Path, size: int) -> tuple[str, Any]:
    if size > MAX_RULE_FILE_BYTES:
        return "problems", [(None, f"rule file larger than {MAX_RULE_FILE_BYTES >> 20} MiB; skipped")]
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        return "problems", [(None, f"not UTF-8 text ({exc.reason} at byte {exc.start})")]
    except OSError as exc:
        return "problems", [(None, f"cannot read: {exc.strerror or exc}")]
    try:
        data, traps = yamldoc.load(text)
    except yamldoc.YamlError as exc:
        return "problems", [(exc.line, exc.message)]
    except RecursionError:
        return "problems", [(None, "YAML nested too deeply")]
    return "ok", (yamldoc.encode(data), tuple((t.line, t.message) for t in traps))


def load_data_file(path: Path, what: str) -> object:
    """The data of a shipped YAML table (taxonomy, Xid catalog), parsed once per change of the
    file. Such a file must load: an unreadable or broken one is a TroubleshootError naming the
    file and line."""
    from troubleshoot.errors import TroubleshootError

    kind, payload, _ = document(path, TABLES)
    if kind != "ok":
        line, message = payload[0]
        if line is None:
            raise TroubleshootError(f"cannot read {what} {path}: {message}")
        raise TroubleshootError(f"{path}:{line}: {message}")
    return yamldoc.decode(payload[0])
