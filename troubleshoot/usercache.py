"""Per-user cache files (compiled scan databases, framework facts): where they live and when one
may be trusted.

A cache file is read only when it and its folder belong to this user and nobody else can write
them: what is in it decides diagnoses (and, for a scan database, is bytes native code reads).
Anything else is treated as missing, and a write that fails only costs the next run time.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def cache_dir(name: str) -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "troubleshoot" / name


def untrusted_because(st: os.stat_result) -> str | None:
    """Why a file or folder with this status may not be trusted; None when this user owns it
    and nobody else may write it. The one trust rule for caches and the fix journal."""
    if stat.S_ISLNK(st.st_mode):
        return "is a symlink"
    if st.st_uid != os.geteuid():
        return f"belongs to uid {st.st_uid}, not to this user (uid {os.geteuid()})"
    if st.st_mode & 0o022:
        return "is writable by other users"
    return None


def untrusted(p: Path) -> str | None:
    """`untrusted_because` for a path (not followed when it is a symlink)."""
    try:
        st = os.stat(p, follow_symlinks=False)
    except OSError as exc:
        return f"cannot be checked ({exc.strerror or exc})"
    return untrusted_because(st)


def _owned_private(p: Path) -> bool:
    return untrusted(p) is None


def trusted(path: Path) -> bool:
    """Owned by this user and writable by nobody else (the file and its folder)."""
    return _owned_private(path.parent) and _owned_private(path)


def read(path: Path) -> bytes | None:
    """The file's bytes when it is trusted, else None. The file is opened without following a
    link and checked as opened, so it cannot be swapped between the check and the read."""
    if not _owned_private(path.parent):
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if untrusted_because(os.fstat(f.fileno())) is not None:
            return None
        try:
            return f.read()
        except OSError:
            return None


def write(path: Path, data: bytes) -> None:
    """Atomically, mode 0600, in a 0700 folder of this user's; never raises."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not _owned_private(path.parent):
            return
        from troubleshoot.safeio import atomic_write

        atomic_write(path, data)
        os.chmod(path, 0o600)
    except Exception:
        pass


def used(path: Path) -> None:
    """Mark a cache file as just used (its mtime), so that `prune` removes it last."""
    try:
        os.utime(path)
    except OSError:
        pass


def prune(keep: Path, glob: str, most: int) -> None:
    """At most `most` files matching `glob` beside `keep` (which stays), the least recently
    used going first (see `used`): a script that passes
    a new rule folder each run must not fill the disk. Never raises."""
    found = []
    try:
        names = list(keep.parent.glob(glob))
    except OSError:
        return
    for f in names:
        try:
            if f != keep:
                found.append((f.stat().st_mtime_ns, f))
        except OSError:  # pruned by another run meanwhile
            pass
    for _, f in sorted(found, reverse=True)[most - 1:]:
        try:
            f.unlink()
        except OSError:
            pass
