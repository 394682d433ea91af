"""Filesystem helpers every layer may use: paths confined under a root, atomic writes through
unguessable O_EXCL temp files, advisory locks, and pipes grown to hold more.

Confinement works like chroot: a path is resolved component by component under the root with
`lstat`; a symlink is followed as the system inside the root would follow it (an absolute
target starts again at the root, `..` stops at the root), so the result always lies inside the
root. Writes then walk the resolved, symlink-free path again with `O_NOFOLLOW` directory by
directory, so a symlink planted between the preview and the write makes the write fail instead
of landing elsewhere.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
from pathlib import Path
from typing import Iterator

from troubleshoot.errors import TroubleshootError

MAX_LINKS = 40  # as the kernel's ELOOP limit
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


class UnsafePath(TroubleshootError):
    """A path that would leave its root or is not what it should be: one line to the user."""


def components(path: str) -> list[str]:
    """The names in a path, `~` expanded; `..` is refused (a parameter never climbs)."""
    text = os.path.expanduser(str(path))
    if "\x00" in text:
        raise UnsafePath(f"{path!r}: NUL bytes are not allowed in a path")
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise UnsafePath(f"{path}: '..' is not allowed in a path a fix writes to")
    return parts


def resolve_under(root: str | Path | None, path: str) -> Path:
    """Where `path` lands under `root` (None: the real /), symlinks followed as inside the root.

    Missing components are kept as they are (a file or folder the fix will create)."""
    base = Path(os.path.realpath(root)) if root is not None else Path("/")
    todo = list(reversed(components(path)))
    done: list[str] = []
    links = 0
    missing = False
    while todo:
        name = todo.pop()
        if name in ("", "."):
            continue
        if name == "..":  # only from a link target; never above the root
            if done:
                done.pop()
            continue
        here = base.joinpath(*done, name)
        if not missing:
            try:
                target = _link_target(base, done, here)
            except FileNotFoundError:
                missing, target = True, None
            if target is not None:
                links += 1
                if links > MAX_LINKS:
                    raise UnsafePath(f"{here}: too many levels of symbolic links")
                if target.startswith("/"):
                    done = []
                todo.extend(reversed(target.split("/")))
                continue
        done.append(name)
    return base.joinpath(*done)


def _link_target(base: Path, done: list[str], here: Path) -> str | None:
    """What the symlink `here` points to; None when it is not a symlink (FileNotFoundError when
    there is nothing).

    The entry can change between the lstat and the readlink (another process swaps a link and
    a folder): that is a path not to trust, reported in one line."""
    try:
        st = os.lstat(here)
    except FileNotFoundError:
        raise
    except NotADirectoryError:
        raise UnsafePath(f"{base.joinpath(*done)} is not a folder") from None
    except OSError as exc:
        raise UnsafePath(f"{here}: cannot check it ({exc.strerror or exc})") from None
    if not stat.S_ISLNK(st.st_mode):
        return None
    try:
        return os.readlink(here)
    except OSError:
        raise UnsafePath(f"{here} changed while it was being checked (it is no longer a symlink); "
                         f"unsafe path, nothing done there") from None


def relative_to_root(root: str | Path | None, resolved: Path) -> list[str]:
    base = Path(os.path.realpath(root)) if root is not None else Path("/")
    try:
        rel = resolved.relative_to(base)
    except ValueError:
        raise UnsafePath(f"{resolved} is not under {base}") from None
    return [p for p in rel.parts if p not in ("", ".")]


def open_dir(root: str | Path | None, parts: list[str], create: bool = False) -> int:
    """A descriptor of the folder root/parts, walked with O_NOFOLLOW (no symlink on the way);
    missing folders are created (0755) when `create`. The caller closes it."""
    base = os.path.realpath(root) if root is not None else "/"
    if create:
        os.makedirs(base, exist_ok=True)  # a fresh --root folder
    fd = os.open(base, _DIR_FLAGS)
    try:
        for name in parts:
            if name in ("", ".", ".."):
                raise UnsafePath(f"{name!r} is not a folder name")
            try:
                nfd = os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(name, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
                nfd = os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise UnsafePath(f"{os.path.join(base, *parts)}: {name} changed into a symlink or a file "
                                     f"since it was checked; nothing written there") from None
                raise
            os.close(fd)
            fd = nfd
        return fd
    except BaseException:
        os.close(fd)
        raise


def read_in(dir_fd: int, name: str) -> bytes | None:
    """The bytes of `name` in an open folder, never through a symlink; None when missing."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePath(f"{name} became a symlink since it was checked; not read") from None
        raise
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise UnsafePath(f"{name} is not a regular file")
        return f.read()


def write_in(dir_fd: int, name: str, data: bytes, mode: int | None = None, durable: bool = True) -> None:
    """Atomically replace `name` in an open folder: an O_EXCL temp file with a random name,
    fsync, rename. An existing file keeps its mode, its extended attributes and POSIX ACLs,
    and (when we may) its owner. `durable=False`: no fsync, for files a crash may lose (caches,
    rebuilt when missing): still never half-written."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise UnsafePath(f"{name} is not a regular file (a symlink or a folder appeared there); not replaced")
    fd, tmp = _temp_file(dir_fd, name)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            _give_metadata(f.fileno(), st, mode, dir_fd, name)
            if durable:
                os.fsync(f.fileno())
        _rename(dir_fd, tmp, name)
        if durable:
            try:
                os.fsync(dir_fd)
            except OSError:
                pass
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise


def _temp_file(dir_fd: int, name: str) -> tuple[int, str]:
    import secrets  # here: `troubleshoot run` grows its pipes before the job starts, without it

    for _ in range(16):
        tmp = f".{name[:200]}.{secrets.token_hex(8)}.tmp"
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                           dir_fd=dir_fd), tmp
        except FileExistsError:
            continue
    raise OSError(errno.EEXIST, "cannot create a temporary file")  # pragma: no cover - 16 collisions of 64 bits


def _give_metadata(fd: int, st: os.stat_result | None, mode: int | None, dir_fd: int, name: str) -> None:
    """The new file gets the old one's mode, owner and extended attributes, in that order: a
    chown clears file capabilities, a chmod after an ACL would rewrite its mask."""
    if st is None:
        os.fchmod(fd, mode if mode is not None else 0o666 & ~_umask())
        return
    os.fchmod(fd, st.st_mode & 0o7777)
    try:
        os.fchown(fd, st.st_uid, st.st_gid)
    except OSError:
        pass
    copy_xattrs(dir_fd, name, fd)


def copy_xattrs(dir_fd: int, name: str, dst: int) -> None:
    """Give the open file `dst` every extended attribute of `name` (POSIX ACLs are the attribute
    system.posix_acl_access), and drop those it has that `name` lacks (an ACL inherited from the
    folder), so that a replaced file grants no more and no less than before. Raises OSError,
    naming the attribute, when one cannot be carried over: better no change than a file that
    silently lost who may read it."""
    src = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        wanted = {k: os.getxattr(src, k) for k in _xattr_names(src)}
    finally:
        os.close(src)
    for key in _xattr_names(dst):
        if key not in wanted and not key.startswith("security."):  # labels are the system's to give
            _xattr_call(os.removexattr, dst, key, name)
    for key, value in wanted.items():
        try:
            if os.getxattr(dst, key) == value:
                continue  # e.g. the security label the system already gave the new file
        except OSError:
            pass
        _xattr_call(os.setxattr, dst, key, name, value)


def _xattr_names(fd: int) -> list[str]:
    try:
        return os.listxattr(fd)
    except OSError as exc:
        if exc.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            return []  # a file system without extended attributes: nothing to keep
        raise


def _xattr_call(call, fd: int, key: str, name: str, *value: bytes) -> None:
    try:
        call(fd, key, *value)
    except OSError as exc:
        raise OSError(exc.errno, f"cannot give the new file its extended attribute {key} "
                                 f"({exc.strerror or exc}); not replaced", name) from None


def _rename(dir_fd: int, tmp: str, name: str) -> None:
    """The temp file over `name`; a refusal names `name`, the file the user knows, not the temp."""
    try:
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except OSError as exc:
        text = exc.strerror or str(exc)
        if exc.errno == errno.EPERM:
            text += " (immutable or append-only? `lsattr` shows an i or an a)"
        raise OSError(exc.errno, text, name) from None


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write(p: str | Path, data: bytes, mode: int | None = None, durable: bool = True) -> None:
    """Write a file atomically (the parent folder is created when missing). For files of our
    own (journals, caches, snapshots); fixes use `write_in` on a confined folder."""
    p = Path(p)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(p.parent, _DIR_FLAGS)
    try:
        write_in(fd, p.name, data, mode, durable)
    finally:
        os.close(fd)


@contextlib.contextmanager
def locked_fd(fd: int, shared: bool = False) -> Iterator[int]:
    """Hold an advisory lock (flock) on an open file or folder."""
    fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
    try:
        yield fd
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


@contextlib.contextmanager
def locked_dir(path: str | Path, shared: bool = False) -> Iterator[None]:
    """Hold a lock on a folder of our own (created when missing): the journal, a cache."""
    p = Path(path)
    p.mkdir(parents=True, exist_ok=True)
    fd = os.open(p, _DIR_FLAGS)
    try:
        with locked_fd(fd, shared):
            yield
    finally:
        os.close(fd)


def grow_pipe(fd: int, size: int) -> None:
    """Let the pipe `fd` hold `size` bytes, or as much as the system allows a user: a fast writer
    keeps writing while its reader is busy, instead of waiting on a full 64 KiB pipe. Never
    raises (over the user's pipe quota, or not Linux, the pipe keeps its size)."""
    try:
        with open("/proc/sys/fs/pipe-max-size", "rb") as f:
            size = min(size, int(f.read()))
    except (OSError, ValueError):
        pass
    try:
        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), size)
    except OSError:
        pass
