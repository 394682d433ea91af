"""File changes done safely: new content computed first, written atomically, mode kept."""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import re
from pathlib import Path
from typing import Any, Mapping

from troubleshoot import safeio
from troubleshoot.errors import TroubleshootError


def target(path: str, root: str | None) -> Path:
    """Where a file action lands: the path itself, or the same path under --root DIR, with
    every symlink on the way followed as inside the root (never out of it); `..` is refused."""
    return safeio.resolve_under(root, path)


def _where(tgt: Path, root: str | None) -> tuple[list[str], str]:
    parts = safeio.relative_to_root(root, tgt)
    if not parts:
        raise safeio.UnsafePath(f"{tgt} is the root itself, not a file")
    return parts[:-1], parts[-1]


def read_bytes(tgt: Path, root: str | None = None) -> bytes | None:
    """The current bytes of a resolved target, read without following a symlink."""
    folders, name = _where(tgt, root)
    try:
        fd = safeio.open_dir(root, folders)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        return safeio.read_in(fd, name)
    finally:
        os.close(fd)


@contextlib.contextmanager
def locked_folder(tgt: Path, root: str | None = None):
    """The target's folder (created when missing), open and locked: every change to a file is
    read, recomputed and written under this lock, so two fixes at once never lose a line."""
    folders, name = _where(tgt, root)
    fd = safeio.open_dir(root, folders, create=True)
    try:
        with safeio.locked_fd(fd):
            yield fd, name
    finally:
        os.close(fd)


def atomic_write(tgt: Path, data: bytes, mode: int | None = None, root: str | None = None) -> None:
    """Replace a resolved target atomically (temp file with O_EXCL and a random name)."""
    with locked_folder(tgt, root) as (fd, name):
        safeio.write_in(fd, name, data, mode)


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


def check_fstab(old: bytes | None, new: bytes, on_this_machine: bool) -> None:
    """Refuse an fstab the system would misread: `findmnt --verify --tab-file` on the new
    content, compared with the old (problems already there are not ours). Under --root only
    parse errors count: the other checks look at this machine's devices and folders."""
    import shutil
    import subprocess
    import tempfile

    findmnt = shutil.which("findmnt")
    if findmnt is None:
        return

    def verify(data: bytes) -> tuple[int, int, str]:
        with tempfile.TemporaryDirectory(prefix="troubleshoot-fstab-") as d:  # private (0700)
            path = os.path.join(d, "fstab")
            with open(path, "wb") as f:
                f.write(data)
            try:
                p = subprocess.run([findmnt, "--verify", "--tab-file", path], capture_output=True, text=True,
                                   timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                return 0, 0, ""
        out = (p.stdout + p.stderr).replace(path, "fstab")
        m = re.search(r"(\d+) parse errors?, (\d+) errors?", out)
        return (int(m.group(1)), int(m.group(2)), out) if m else (0, 0, out)

    old_parse, old_errors, _ = verify(old or b"")
    new_parse, new_errors, report = verify(new)
    if new_parse > old_parse or (on_this_machine and new_errors > old_errors):
        raise TroubleshootError("the new /etc/fstab does not pass `findmnt --verify`; nothing was changed:\n"
                                + report.strip())
