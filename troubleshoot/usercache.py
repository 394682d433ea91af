"""Per-user cache files: where they live, when one may be trusted, and the one entry format
every on-disk cache of troubleshoot uses (`Cache`).

A cache file is read only when it and its folder belong to this user and nobody else can write
them: what is in it decides diagnoses (and, for a scan database, is bytes native code reads).
Anything else is treated as missing, and a write that fails only costs the next run time.

An entry is one file per key in its cache's folder. It starts with a header: the program's
version, the cache's format version and the stamp of what the entry was made from (the files it
was read from, with their size, times, inode and device), then the lengths of its payload's
parts and their CRC; each part is read into a bytes object of its own. An entry whose header
differs from the one expected, or that is truncated, damaged or not an entry at all, reads as a
miss.
"""

from __future__ import annotations

import io
import marshal
import os
import stat
import struct
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Sequence

from troubleshoot.records import record

# The layout of an entry file (bump the digit when it changes): a file without it is foreign.
_MAGIC = b"\x00troubleshoot-cache-1\n"
_HEAD_SIZE = struct.Struct("<I")


def digest(data: bytes) -> str:
    """32 hex digits that name `data` (BLAKE2b): a cache entry's file, a scan database's key.
    Not hashlib's SHA-256: hashlib loads OpenSSL first, 2 ms of every start."""
    try:
        from _blake2 import blake2b  # what hashlib.blake2b is, where CPython builds it
    except ImportError:  # pragma: no cover - a Python built without it
        from hashlib import blake2b
    return blake2b(data, digest_size=16).hexdigest()


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


@contextmanager
def _opened(path: Path):
    """The file opened for reading and its size when it is trusted, else None. The file is
    opened without following a link and checked as opened, so it cannot be swapped between the
    check and the read."""
    if not _owned_private(path.parent):
        yield None
        return
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        yield None
        return
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        yield (f, st.st_size) if untrusted_because(st) is None else None


def write(path: Path, data: bytes) -> None:
    """Atomically (a temporary file in the same folder, then a rename over `path`), mode 0600,
    in a 0700 folder of this user's; never raises. A reader sees the old file or the new one,
    never half of one."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not _owned_private(path.parent):
            return
        from troubleshoot.safeio import atomic_write

        atomic_write(path, data, mode=0o600, durable=False)  # a cache lost in a crash is rebuilt
        os.chmod(path, 0o600)  # an entry replaced keeps its old mode: one others could write is mended
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


# ------------------------------------------------------------------ stamps and entries

def file_stamp(path: Path | str) -> tuple:
    """What says a file is the one a cache entry was made from; raises OSError. Size and mtime
    alone miss a file rewritten at the same size with its mtime kept (`cp -p`, `rsync -t`, an
    editor that restores it): the change time moves on any write and cannot be set back, and a
    file renamed over the old one has another inode."""
    st = os.stat(path)
    return (str(path), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


def file_stamps(paths: Iterable[Path | str]) -> tuple:
    """`file_stamp` of each path; a file that cannot be read is stamped as missing."""
    out = []
    for p in paths:
        try:
            out.append(file_stamp(p))
        except OSError:
            out.append((str(p), None))
    return tuple(out)


def pack_entry(head: tuple, payload: bytes | Sequence[bytes], self_checked: int = 0) -> bytes:
    """An entry file's bytes: `head` (program version, format, stamp) and `payload`, one part
    or several (`Cache.put_parts`). `self_checked`: the last parts, left out of the CRC."""
    parts = [payload] if isinstance(payload, (bytes, bytearray)) else list(payload)
    crc = 0
    for part in parts[: len(parts) - self_checked]:
        crc = zlib.crc32(part, crc)
    lengths = len(parts[0]) if isinstance(payload, (bytes, bytearray)) else tuple(len(part) for part in parts)
    meta = marshal.dumps((head, lengths, crc))
    return b"".join((_MAGIC, _HEAD_SIZE.pack(len(meta)), meta, *parts))


def unpack_entry(blob: bytes, self_checked: int = 0) -> tuple[tuple, bytes | list[bytes]] | None:
    """(head, payload) of an entry file's bytes (its parts, for an entry of several); None for
    one that is foreign, truncated or damaged."""
    return _entry(io.BytesIO(blob), len(blob), self_checked)


def _entry(f, total: int, self_checked: int = 0) -> tuple[tuple, bytes | list[bytes]] | None:
    """An entry read from an open file of `total` bytes: each part is read into a bytes object
    of its own, so a scan database of a megabyte is never copied out of the file's bytes (on a
    VM each fresh page costs microseconds to fault in). The parts' lengths must add up to what
    the file holds after the head before any is read: a damaged head asks for no huge buffer."""
    try:
        if f.read(len(_MAGIC)) != _MAGIC:
            return None
        (size,) = _HEAD_SIZE.unpack(f.read(_HEAD_SIZE.size))
        head, lengths, crc = marshal.loads(f.read(size))
        one = type(lengths) is int
        if type(head) is not tuple or not (one or (type(lengths) is tuple and all(type(n) is int for n in lengths))):
            return None
        sizes = (lengths,) if one else lengths
        if any(n < 0 for n in sizes) or sum(sizes) != total - f.tell():
            return None
        parts = [f.read(n) for n in sizes]
        if any(len(part) != n for part, n in zip(parts, sizes)):
            return None
    except (ValueError, EOFError, TypeError, struct.error, OSError):
        return None
    found = 0
    for part in parts[: len(parts) - self_checked]:
        found = zlib.crc32(part, found)
    if found != crc:
        return None
    return head, parts[0] if one else parts


@record(frozen=True)
class Cache:
    """One on-disk cache: entries in `cache_dir(folder)`, one file per key, each valid for one
    program version, `format` of its payload and stamp of its sources. `keep`: how many entries
    the folder holds at most (the least recently used go first); 0 keeps one per key.
    `self_checked`: how many of an entry's last parts are checked by whoever reads them, and so
    left out of its CRC (a hyperscan database: hs_deserialize_database checks its own CRC32C
    and length, and a megabyte's CRC is a quarter of a millisecond of a small diagnosis)."""

    folder: str
    format: int
    keep: int = 0
    self_checked: int = 0

    def path(self, key: object) -> Path:
        """The file of `key` (any value with a stable repr: text, numbers, tuples of them)."""
        return cache_dir(self.folder) / f"{digest(repr(key).encode('utf-8', 'surrogatepass'))}.cache"

    def head(self, stamp: object) -> tuple:
        from troubleshoot import __version__

        return (__version__, self.format, stamp)

    def get(self, key: object, stamp: object) -> bytes | None:
        """The payload stored under `key` for exactly `stamp`; None for anything else (no entry,
        another stamp, version or format, an entry that is not trusted or not whole)."""
        found = self._get(key, stamp)
        return found if type(found) is bytes else None

    def get_parts(self, key: object, stamp: object) -> list[bytes] | None:
        """The parts stored under `key` by `put_parts`, as `get` reads a payload."""
        found = self._get(key, stamp)
        return found if type(found) is list else None

    def _get(self, key: object, stamp: object) -> bytes | list[bytes] | None:
        path = self.path(key)
        with _opened(path) as opened:
            found = _entry(*opened, self.self_checked) if opened is not None else None
        if found is None or found[0] != self.head(stamp):
            return None
        if self.keep:
            used(path)  # in use: the last to be pruned
        return found[1]

    def put_parts(self, key: object, stamp: object, parts: Sequence[bytes]) -> None:
        """Store several payloads under `key`, each read back as its own bytes (`get_parts`)."""
        self.put(key, stamp, tuple(parts))

    def put(self, key: object, stamp: object, payload: bytes | Sequence[bytes]) -> None:
        """Store `payload` under `key`; never raises (a stamp marshal cannot hold is not kept)."""
        try:
            blob = pack_entry(self.head(stamp), payload, self.self_checked)
        except ValueError:
            return
        path = self.path(key)
        write(path, blob)
        if self.keep:
            prune(path, "*.cache", self.keep)
