"""Where the job's log goes, and opening it: always a file of its own, made for this run.

The log is created with O_CREAT | O_EXCL | O_NOFOLLOW, so it is never an existing file and never
reached through a symlink: runs of one job started in the same second (or the same Slurm step
retried) would otherwise share one name and garble or overwrite each other's logs, and in a
shared folder whoever can guess the name could plant a symlink there and have the job's output
written over a file of theirs choosing. A name already there gets the next free one, `-2`,
`-3`... before the rank tag (`job-2.node1.rank0.log`, so `fleet diagnose` still reads node and
rank from it). That holds for a file named with `--log-to` too: the first run's `train.log` is
kept and the second run logs to `train-2.log`; the run's last line names the file it used. A
character device or FIFO named with `--log-to` (/dev/null, a log shipper's pipe) is written as
it is, as writing to one overwrites nothing; a FIFO only when it is the user's own (or root's),
since whoever made it reads what is written to it.

Job output may hold tokens and paths, so the log is 0600 and the folders made for it 0700; the
tool's own state folders, which earlier versions made 0755, are closed to others as well.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import time
from pathlib import Path
from typing import BinaryIO, Iterator, Sequence

from troubleshoot.errors import TroubleshootError

LOG_MODE = 0o600
DIR_MODE = 0o700
NUMBERED = 100  # `-2` ... `-99`; then random suffixes, should someone hold all of those names
RANDOM_TRIES = 100
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# As `fleet diagnose` reads a run's node and rank (sources._RUN_NAME): from the first dot on.
_RANK_TAIL = re.compile(r"\.[A-Za-z0-9_-][A-Za-z0-9_.-]*?\.rank\d+\.log$")


def open_log(log_to: str | None, argv: Sequence[str]) -> tuple[BinaryIO, Path]:
    """The job's log opened for writing (unbuffered) and where it is: `log_to` a file, a folder
    (DIR/, or one that exists), or None for the state folder. A log that cannot be opened is a
    one-line error naming it."""
    if log_to is None:
        folder = state_runs_folder()
        return create(folder / default_name(argv))
    if log_to.endswith("/") or Path(log_to).is_dir():
        folder = Path(log_to)
        _make_folder(folder)
        return create(folder / default_name(argv))
    path = Path(log_to)
    _make_folder(path.parent)
    return _open_named(path)


def create(path: Path) -> tuple[BinaryIO, Path]:
    """A new file at `path`, or at the first free numbered name beside it."""
    for candidate in _candidates(path):
        try:
            fd = os.open(candidate, _CREATE, LOG_MODE)
        except FileExistsError:
            continue
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # O_NOFOLLOW on some systems: a symlink is in the way
                continue
            raise TroubleshootError(f"cannot write the log {candidate}: {exc.strerror or exc}") from None
        return os.fdopen(fd, "wb", buffering=0), candidate
    raise TroubleshootError(f"cannot write the log {path}: that name and {NUMBERED + RANDOM_TRIES} others "
                            f"beside it are taken; name another log with --log-to")


def _candidates(path: Path) -> Iterator[Path]:
    head, tail = _split(path.name)
    yield path
    for n in range(2, NUMBERED):
        yield path.with_name(f"{head}-{n}{tail}")
    for _ in range(RANDOM_TRIES):
        yield path.with_name(f"{head}-{os.urandom(4).hex()}{tail}")


def _split(name: str) -> tuple[str, str]:
    """(what a number goes after, what it goes before): the rank tag and `.log` stay last."""
    m = _RANK_TAIL.search(name)
    if m:
        return name[:m.start()], m.group()
    stem, ext = os.path.splitext(name)
    return stem, ext


def _open_named(path: Path) -> tuple[BinaryIO, Path]:
    """A path the user named: a device, or a FIFO of theirs (or root's), is written as it is
    (nothing in it to lose); anything else that exists is kept, and the log goes to the next
    free name."""
    try:
        st = os.stat(path)
    except OSError:
        st = None
    if st is None or not _writable_as_is(st):
        return create(path)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)  # no O_TRUNC: a swapped-in file keeps its bytes
    except OSError as exc:
        raise TroubleshootError(f"cannot write the log {path}: {exc.strerror or exc}") from None
    if _writable_as_is(os.fstat(fd)):  # what was opened, should it have changed since the stat
        return os.fdopen(fd, "wb", buffering=0), path
    os.close(fd)
    return create(path)


def _writable_as_is(st: os.stat_result) -> bool:
    """A character device (only root makes those), or a FIFO that no other user put there: they
    would read the job's output."""
    if stat.S_ISCHR(st.st_mode):
        return True
    return stat.S_ISFIFO(st.st_mode) and st.st_uid in (os.getuid(), 0)


def default_name(argv: Sequence[str]) -> str:
    """<stamp>-<job>.log; one rank of a multi-node job (srun, torchrun) gets
    <stamp>-<job>.<node>.rank<N>.log, so the ranks' logs sit side by side in a shared folder and
    `fleet diagnose` knows each one's node and rank."""
    name = Path(argv[0]).name if argv else "job"
    for a in argv[1:3]:
        if not a.startswith("-"):
            name += "-" + Path(a).stem
            break
    # No dot in the job's part: `fleet diagnose` takes the node from the first dot on
    # (python3.11 would become part of the node's name).
    safe = _safe_name(name).replace(".", "_")[:60]
    rank = rank_tag()
    if rank is None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
    else:
        stamp = os.environ.get("SLURM_JOB_ID") or time.strftime("%Y%m%d-%H%M")
    return f"{stamp}-{safe}{rank or ''}.log"


def _safe_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)


def rank_tag() -> str | None:
    """'.<node>.rank<N>' under Slurm (SLURM_PROCID, SLURMD_NODENAME) or torchrun (RANK), else None."""
    import socket

    rank = os.environ.get("SLURM_PROCID") or os.environ.get("RANK")
    if rank is None or not rank.isdigit():
        return None
    node = os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0] or "node"
    return f".{_safe_name(node).strip('.') or 'node'}.rank{int(rank)}"


def state_runs_folder() -> Path:
    """<state>/troubleshoot/runs, made if missing; it and <state>/troubleshoot closed to others."""
    from troubleshoot.userstate import state_dir

    runs = state_dir("runs")
    tool = runs.parent
    _make_folder(runs)
    for folder in (tool, runs):
        _close_to_others(folder)
    return runs


def _make_folder(folder: Path) -> None:
    """`folder` and any missing folder above it, each made 0700."""
    missing = []
    here = folder
    while not here.is_dir() and here != here.parent:
        missing.append(here)
        here = here.parent
    for d in reversed(missing):
        try:
            os.mkdir(d, DIR_MODE)
        except FileExistsError:
            pass  # another rank made it meanwhile
        except OSError as exc:
            raise TroubleshootError(f"cannot write the log in {folder}: cannot make {d}: "
                                    f"{exc.strerror or exc}") from None


def _close_to_others(folder: Path) -> None:
    """Take group and other access off a folder of ours (never through a symlink, never someone
    else's folder); where that fails (a read-only or foreign file system) it stays as it was."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return
    try:
        st = os.fstat(fd)
        if st.st_uid == os.getuid() and st.st_mode & 0o077:
            os.fchmod(fd, stat.S_IMODE(st.st_mode) & ~0o077)
    except OSError:
        pass
    finally:
        os.close(fd)
