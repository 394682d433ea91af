"""File changes done safely: new content computed first, written atomically, mode kept."""

from __future__ import annotations

import difflib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Mapping

from troubleshoot.errors import TroubleshootError


def target(path: str, root: str | None) -> Path:
    """Where a file action lands: the path itself, or the same path under --root DIR."""
    p = Path(os.path.expanduser(path))
    if root is None:
        return p
    return Path(root) / str(p).lstrip("/")


def read_bytes(p: Path) -> bytes | None:
    try:
        return p.read_bytes()
    except FileNotFoundError:
        return None


def atomic_write(p: Path, data: bytes, mode: int | None = None) -> None:
    """Write to a temporary file in the same folder, fsync, then rename over the target: a
    reader (or a crash) sees the old file or the new one, never half of it. An existing file
    keeps its permissions and, when we may, its owner."""
    p.parent.mkdir(parents=True, exist_ok=True)
    try:
        st = p.stat()
    except FileNotFoundError:
        st = None
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if st is not None:
            os.chmod(tmp, st.st_mode & 0o7777)
            try:
                os.chown(tmp, st.st_uid, st.st_gid)
            except (PermissionError, OSError):
                pass
        elif mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, p)
        _fsync_dir(p.parent)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _fsync_dir(d: Path) -> None:
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def merged_structured(old: bytes | None, data: Mapping[str, Any], fmt: str, path: str) -> bytes:
    """`data` deep-merged into the mapping in `old`, every other key kept."""
    if old is None or not old.strip():
        base: Any = {}
    else:
        try:
            text = old.decode("utf-8")
            if fmt == "json":
                base = json.loads(text)
            else:
                import yaml

                base = yaml.safe_load(text)
        except (UnicodeDecodeError, ValueError, Exception) as exc:
            raise TroubleshootError(f"{path}: cannot merge into it, it is not valid {fmt.upper()} ({exc}); "
                                    f"fix or move it first") from None
    if not isinstance(base, dict):
        raise TroubleshootError(f"{path}: cannot merge into it, its top level is not a mapping")
    result = _deep_merge(base, data)
    if fmt == "json":
        return (json.dumps(result, indent=4) + "\n").encode()
    import yaml

    return yaml.safe_dump(result, sort_keys=False).encode()


def _deep_merge(base: dict, extra: Mapping) -> dict:
    out = dict(base)
    for k, v in extra.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def ensured_line(old: bytes | None, line: str, replaces: str | None) -> bytes:
    text = old.decode("utf-8", "surrogateescape") if old else ""
    lines = text.splitlines()
    if line in lines:
        return old or b""
    if replaces:
        rx = re.compile(replaces)
        for i, existing in enumerate(lines):
            if rx.search(existing):
                lines[i] = line
                return ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape")
    if text and not text.endswith("\n"):
        text += "\n"
    return (text + line + "\n").encode("utf-8", "surrogateescape")


def diff(path: str, old: bytes | None, new: bytes) -> str:
    a = old.decode("utf-8", "replace").splitlines(keepends=True) if old is not None else []
    b = new.decode("utf-8", "replace").splitlines(keepends=True)
    label_a = path if old is not None else "/dev/null"
    return "".join(difflib.unified_diff(a, b, label_a, path))
