"""Run a job unchanged and keep a copy of everything it prints.

The job gets the same stdin; its stdout and stderr each go through a pseudo-terminal when ours
is a terminal (so `isatty()` checks, progress bars and colours behave as unwrapped), else
through pipes. Bytes are passed on untouched to our stdout/stderr and appended to the log.
Signals sent to us (SIGTERM from a scheduler, SIGHUP, SIGQUIT, SIGUSR1/2) are forwarded to the
job. SIGINT is forwarded too, except when it came from our terminal: the terminal already
delivered it to the job, which shares our process group, so the job sees Ctrl-C first and once.
The exit status is the job's (128+N when a signal ended it).
"""

from __future__ import annotations

import errno
import fcntl
import os
import pty
import selectors
import signal
import subprocess
import sys
import termios
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable, Sequence

from troubleshoot.errors import TroubleshootError

FORWARDED = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGINT)
READ = 65536
# A read of less than half the buffer means the job writes faster than nothing but slower than
# we read: a chatty job's lines arrive a few at a time, each wake-up costing a select, a read
# and two writes. (At 1 KiB, a job printing short lines unbuffered still woke us every 40 lines.)
TRICKLE = READ // 2  # a read smaller than this means the job is writing in dribbles...
TRICKLE_PAUSE = 0.001  # ...so wait this long (seconds) for more before the next read


@dataclass
class RunResult:
    returncode: int
    signal: int | None
    seconds: float
    log_path: Path
    interrupted: bool


def _winsize(fd: int) -> bytes | None:
    try:
        return fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8)
    except OSError:
        return None


def run(argv: Sequence[str], log: BinaryIO, log_path: Path, on_output: Callable[[bytes], None] | None = None,
        on_start: Callable[[int], None] | None = None, use_pty: bool | None = None) -> RunResult:
    """Run `argv`, pumping its output to ours and to `log`; return when it has exited."""
    out_fd, err_fd = sys.stdout.fileno(), sys.stderr.fileno()
    if use_pty is None:
        use_pty = os.isatty(out_fd)
    ptys: dict[int, int] = {}  # our read end -> where its bytes go
    child_fds = []
    if use_pty:
        for target in (out_fd, err_fd):
            master, slave = pty.openpty()
            # No output processing on the job's side: "\n" stays "\n" (our own terminal adds
            # the "\r"), so the bytes we pass on and log are exactly what the job wrote.
            attrs = termios.tcgetattr(slave)
            attrs[1] &= ~termios.OPOST
            termios.tcsetattr(slave, termios.TCSANOW, attrs)
            size = _winsize(target) if os.isatty(target) else _winsize(out_fd)
            if size:
                fcntl.ioctl(slave, termios.TIOCSWINSZ, size)
            ptys[master] = target
            child_fds.append(slave)
        stdout_arg, stderr_arg = child_fds
    else:
        stdout_arg = stderr_arg = subprocess.PIPE

    interrupted = False
    stdin_tty = os.isatty(0)

    def forward(signum, frame):
        nonlocal interrupted
        if signum == signal.SIGINT:
            interrupted = True
            if stdin_tty:
                return  # the terminal sent it to the job's process group (ours) already
        try:
            proc.send_signal(signum)
        except (ProcessLookupError, OSError):
            pass

    def resize(signum, frame):
        size = _winsize(out_fd)
        if size:
            for master in ptys:
                try:
                    fcntl.ioctl(master, termios.TIOCSWINSZ, size)
                except OSError:
                    pass

    started = time.monotonic()
    try:
        proc = subprocess.Popen(list(argv), stdin=None, stdout=stdout_arg, stderr=stderr_arg, close_fds=True)
    except FileNotFoundError:
        raise TroubleshootError(f"{argv[0]}: command not found") from None
    except PermissionError:
        raise TroubleshootError(f"{argv[0]}: permission denied") from None
    finally:
        for fd in child_fds:
            os.close(fd)
    if on_start:
        on_start(proc.pid)
    old = {s: signal.signal(s, forward) for s in FORWARDED}
    old_winch = signal.signal(signal.SIGWINCH, resize) if use_pty else None
    try:
        if use_pty:
            sources = {m: t for m, t in ptys.items()}
        else:
            sources = {proc.stdout.fileno(): out_fd, proc.stderr.fileno(): err_fd}
        _pump(sources, log, on_output)
        while True:
            try:
                rc = proc.wait()
                break
            except InterruptedError:  # pragma: no cover - PEP 475 retries for us
                continue
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if old_winch is not None:
            signal.signal(signal.SIGWINCH, old_winch)
        for m in ptys:
            try:
                os.close(m)
            except OSError:
                pass
        log.flush()
    sig = -rc if rc < 0 else None
    return RunResult(returncode=128 + sig if sig else rc, signal=sig, seconds=time.monotonic() - started,
                     log_path=log_path, interrupted=interrupted)


def _pump(sources: dict[int, int], log: BinaryIO, on_output) -> None:
    sel = selectors.DefaultSelector()
    for fd in sources:
        sel.register(fd, selectors.EVENT_READ)
    open_fds = set(sources)
    while open_fds:
        try:
            events = sel.select()
        except InterruptedError:  # pragma: no cover
            continue
        got = 0
        for key, _ in events:
            fd = key.fd
            try:
                data = os.read(fd, READ)
            except OSError as exc:
                if exc.errno == errno.EIO:  # pty: every writer closed
                    data = b""
                elif exc.errno == errno.EINTR:  # pragma: no cover
                    continue
                else:
                    raise
            if not data:
                sel.unregister(fd)
                open_fds.discard(fd)
                continue
            got += len(data)
            _write_all(sources[fd], data)
            log.write(data)
            if on_output:
                on_output(data)
        if 0 < got < TRICKLE:
            # A job writing line by line (unbuffered, or on a terminal) would wake us once per
            # line: a millisecond's pause lets its lines gather, so a million of them cost a few
            # thousand wake-ups. A job writing faster fills the buffer and is read at once.
            time.sleep(TRICKLE_PAUSE)
    sel.close()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except BlockingIOError:  # pragma: no cover
            time.sleep(0.001)
            continue
        except BrokenPipeError:
            return  # our reader left (`| head`); the job keeps running and the log keeps everything
        view = view[n:]


def default_log_path(argv: Sequence[str], folder: Path | None = None) -> Path:
    """<stamp>-<job>.log in the state directory (or `folder`); one rank of a multi-node job
    (srun, torchrun) gets <stamp>-<job>.<node>.rank<N>.log, so the ranks' logs sit side by side
    in a shared folder and `fleet diagnose` knows each one's node and rank."""
    from troubleshoot.fixes.journal import state_dir

    name = Path(argv[0]).name if argv else "job"
    for a in argv[1:3]:
        if not a.startswith("-"):
            name += "-" + Path(a).stem
            break
    safe = _safe_name(name)[:60]
    if folder is None:
        folder = state_dir().parent / "runs"
    folder.mkdir(parents=True, exist_ok=True)
    rank = rank_tag()
    stamp = time.strftime('%Y%m%d-%H%M%S') if rank is None else os.environ.get("SLURM_JOB_ID") or time.strftime('%Y%m%d-%H%M')
    return folder / f"{stamp}-{safe}{rank or ''}.log"


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
