"""Run a job unchanged and keep a copy of everything it prints.

The job gets the same stdin; its stdout and stderr each go through a pseudo-terminal when ours
is a terminal (so `isatty()` checks, progress bars and colours behave as unwrapped), else
through pipes. Bytes are passed on untouched to our stdout/stderr and appended to the log.

The job runs in its own process group, as a shell runs a job: when our stdin is the terminal
and we are in its foreground, the job's group is made the foreground group, so Ctrl-C,
Ctrl-\\ and Ctrl-Z reach the job and its children once, from the terminal; Ctrl-Z stops the
wrapper too (the shell gets its prompt back) and `fg` resumes both. Signals sent to us are
forwarded: SIGINT to the job's group (what a terminal does), SIGTERM, SIGHUP, SIGQUIT,
SIGUSR1/2 to the job itself (a DataLoader worker dies of a SIGUSR1 meant for the trainer's
checkpoint handler). After SIGTERM or SIGHUP the job has `grace` seconds to exit before its
group gets SIGKILL.

When the job exits, whatever is still running in its group (a background child holding the
terminal or the pipe) is listed, sent SIGTERM, and SIGKILL after `grace` seconds: the wrapper
never waits for it, and says what it stopped. The exit status is the job's (128+N when a
signal ended it); a command that cannot run gives 127 (not found) or 126 (found, cannot be
executed), as in a POSIX shell.
"""

from __future__ import annotations

import errno
import fcntl
import os
import selectors
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import BinaryIO, Callable, NamedTuple, Sequence

from troubleshoot import safeio
from troubleshoot.errors import TroubleshootError
from troubleshoot.run import procgroup
from troubleshoot.run.execfail import exec_error
from troubleshoot.run.procgroup import Leftover

TO_JOB = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
TO_GROUP = (signal.SIGINT, signal.SIGTSTP)
ESCALATE = (signal.SIGTERM, signal.SIGHUP)  # the wrapper itself is being stopped
GRACE = 10.0  # seconds between SIGTERM and SIGKILL (Slurm's KillWait is 30)
DRAIN_QUIET = 0.1  # output still held open by a process outside the job's group: read until quiet this long
PIPE_SIZE = 1 << 20  # the job's output pipes hold this much (Linux's default maximum for a user)
READ = PIPE_SIZE
# A read well short of a full buffer means the job writes faster than nothing but slower than
# we read: a chatty job's lines arrive a few at a time, each wake-up costing a select, a read
# and two writes, and each of its writes to a pipe whose reader waits costs it a wake-up of us
# (a job printing 1M lines unbuffered paid more system time for that than for its writes).
TRICKLE = READ // 2  # a read smaller than this means the job is writing in dribbles...
TRICKLE_PAUSE = {True: 0.001, False: 0.005}  # ...so wait this long (s; pty, pipe) for more
# A pipe with nothing in it is looked at again after IDLE_FIRST, then twice as late each time, up
# to IDLE_MAX (seconds): see _Pump.
IDLE_FIRST, IDLE_MAX = 0.002, 0.05


class RunResult(NamedTuple):
    # Not a dataclass: importing `dataclasses` (and `inspect`, 10 ms) before the job starts
    # would delay every job by that much.
    returncode: int
    signal: int | None
    seconds: float
    log_path: Path
    interrupted: bool
    leftovers: tuple[Leftover, ...] = ()  # still in the job's group when it exited
    killed: bool = False  # a leftover (or the job, after SIGTERM/SIGHUP) needed SIGKILL
    holders: tuple[Leftover, ...] = ()  # outside the group, still holding the output
    log_error: OSError | None = None  # the log could not be written from then on (a full disk)


def _winsize(fd: int) -> bytes | None:
    try:
        return fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8)
    except OSError:
        return None


def std_fds() -> set[int]:
    """Give a closed stdin/stdout/stderr (`>&-`) /dev/null, so that no pipe or log file we open
    lands on fd 1 or 2; return the closed outputs, whose bytes then only go to the log."""
    closed = set()
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            if fd:
                closed.add(fd)
    if sys.stdout is None or 1 in closed:
        sys.stdout = open(os.devnull, "w")
    if sys.stderr is None or 2 in closed:
        sys.stderr = open(os.devnull, "w")
    return closed


def _set_foreground(fd: int, pgrp: int) -> None:
    """Make `pgrp` the terminal's foreground group; we may be in the background meanwhile, where
    tcsetpgrp would stop us with SIGTTOU."""
    old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        os.tcsetpgrp(fd, pgrp)
    except OSError:
        pass  # the group is gone, or the terminal is: nothing to hand over
    finally:
        signal.signal(signal.SIGTTOU, old)


def _own_group_in_foreground(tty_fd: int) -> None:  # runs in the child, between fork and exec
    os.setpgid(0, 0)
    _set_foreground(tty_fd, os.getpgrp())


def _in_foreground(fd: int) -> bool:
    try:
        return os.isatty(fd) and os.tcgetpgrp(fd) == os.getpgrp()
    except OSError:
        return False


class _Pump:
    """The job's output fds: bytes passed on to ours (unless closed) and to the log.

    A pseudo-terminal is waited on with poll(). A pipe never is: Linux (5.16 on) marks a pipe
    that was ever polled, and from then on each write to it calls the wake-up path, reader
    waiting or not. A job printing 1M lines unbuffered paid 0.08-0.1 s more system time for
    that (0.31-0.40 s into a pipe read without poll, 0.41-0.50 s with it). So a pipe is read
    without blocking, and between reads that found nothing we wait on the wake-up fd alone
    (SIGCHLD, our signal handlers), for 2 ms at first, doubling to IDLE_MAX: output that
    resumes after a quiet spell is passed on within that."""

    def __init__(self, sources: dict[int, int | None], log: BinaryIO, on_output, wake: int, poll_outputs: bool,
                 on_log_error: Callable[[OSError], None] | None = None):
        self.sources, self.log, self.on_output, self.wake = dict(sources), log, on_output, wake
        self.on_log_error = on_log_error
        self.log_error: OSError | None = None
        # poll, not epoll, for what is polled: an epoll registration stays on the fd, and each of
        # the job's writes (a million for a chatty job) calls into it even while we sleep; poll
        # registers only while it waits. (1M 24-byte writes to a pipe: 0.41 s of the job's system
        # time with epoll, 0.35 s with poll, 0.15 s to /dev/null.)
        self.sel = selectors.PollSelector()
        self.sel.register(wake, selectors.EVENT_READ)
        self.polled = poll_outputs
        for fd in sources:
            if poll_outputs:
                self.sel.register(fd, selectors.EVENT_READ)
            else:
                os.set_blocking(fd, False)
        self.open = set(sources)
        self.buf = bytearray(READ)
        self.view = memoryview(self.buf)

    def step(self, timeout: float | None) -> tuple[int, bool]:
        """Read what is there, waiting up to `timeout` (None: until something comes) for output,
        an output's end or a wake-up: (bytes read, whether we were woken: SIGCHLD came)."""
        if self.polled:
            got, woke = 0, False
            for key, _ in self.sel.select(timeout):
                if key.fd == self.wake:
                    woke = self._empty_wake()
                else:
                    got += self._read(key.fd)
            return got, woke
        deadline = None if timeout is None else time.monotonic() + timeout
        nap = IDLE_FIRST
        while True:
            before = len(self.open)
            got = sum(self._read(fd) for fd in list(self.open))
            if got or len(self.open) < before:
                return got, self._woken(0)
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return 0, self._woken(0)
            if self._woken(left if not self.open else nap if left is None else min(nap, left)):
                return sum(self._read(fd) for fd in list(self.open)), True
            nap = min(2 * nap, IDLE_MAX)

    def _woken(self, timeout: float | None) -> bool:
        """Whether the wake-up fd fires within `timeout` (None: wait for it); emptied if so. For
        pipes the selector holds that fd alone."""
        return bool(self.sel.select(timeout)) and self._empty_wake()

    def _empty_wake(self) -> bool:
        try:
            while os.read(self.wake, 512):
                pass
        except BlockingIOError:
            pass
        return True

    def _read(self, fd: int) -> int:
        """One read of `fd`, passed on and logged: the bytes read (0: none yet, or its end)."""
        try:
            # Into one buffer: os.read(fd, READ) would allocate READ bytes for each of the
            # many small reads of a chatty job (ten times the cost of the read itself).
            n = os.readv(fd, [self.buf])
        except BlockingIOError:
            return 0
        except OSError as exc:
            if exc.errno != errno.EIO:  # pty: every writer closed
                raise
            n = 0
        if not n:
            if self.polled:
                self.sel.unregister(fd)
            self.open.discard(fd)
            return 0
        data = self.view[:n].tobytes()
        target = self.sources[fd]
        if target is not None and not _write_all(target, data):
            for k, v in self.sources.items():  # that reader left: stop writing to it
                if v == target:
                    self.sources[k] = None
        if self.log_error is None:
            try:
                _write_log(self.log, data)
            except OSError as exc:
                self.stop_logging(exc)
        if self.on_output:
            self.on_output(data)
        return n

    def stop_logging(self, exc: OSError) -> None:
        """The log cannot be written (its disk is full, its quota used up, its server gone): the
        job's output still passes through, and what the log holds so far is kept."""
        self.log_error = exc
        if self.on_log_error:
            self.on_log_error(exc)

    def flush_log(self) -> None:
        if self.log_error is None:
            try:
                self.log.flush()
            except OSError as exc:
                self.stop_logging(exc)

    def drain(self, quiet: float = DRAIN_QUIET, limit: float = GRACE) -> None:
        """After the job and its group: read until every writer closed, or nothing came for
        `quiet` seconds (someone outside the group holds the output and keeps quiet)."""
        deadline = time.monotonic() + limit
        heard = time.monotonic()
        while self.open and time.monotonic() < deadline:
            got, _ = self.step(quiet)
            now = time.monotonic()
            if got:
                heard = now
            elif now - heard >= quiet:
                return

    def close(self) -> None:
        self.sel.close()
        self.view.release()


def _job_outputs(use_pty: bool, closed: set[int]) -> tuple[dict[int, int | None], list[int], set[str]]:
    """The job's stdout and stderr: (our read end -> where its bytes go (None: nowhere), the
    job's ends, their names as /proc shows them)."""
    reads: dict[int, int | None] = {}
    child_fds, names = [], set()
    for target in (1, 2):
        if use_pty:
            master, slave = os.openpty()
            # No output processing on the job's side: "\n" stays "\n" (our own terminal adds
            # the "\r"), so the bytes we pass on and log are exactly what the job wrote.
            attrs = termios.tcgetattr(slave)
            attrs[1] &= ~termios.OPOST
            termios.tcsetattr(slave, termios.TCSANOW, attrs)
            size = _winsize(target) if os.isatty(target) else _winsize(1)
            if size:
                fcntl.ioctl(slave, termios.TIOCSWINSZ, size)
            names.add(os.ttyname(slave))
        else:
            master, slave = os.pipe()
            safeio.grow_pipe(slave, PIPE_SIZE)  # a fast job keeps writing while we pause between reads
            names.add(os.readlink(f"/proc/self/fd/{slave}"))
        reads[master] = None if target in closed else target
        child_fds.append(slave)
    return reads, child_fds, names


def run(argv: Sequence[str], log: BinaryIO, log_path: Path, on_output: Callable[[bytes], None] | None = None,
        on_start: Callable[[int], None] | None = None, use_pty: bool | None = None, grace: float = GRACE,
        closed: set[int] = frozenset(), on_log_error: Callable[[OSError], None] | None = None) -> RunResult:
    """Run `argv`, pumping its output to ours and to `log`; return when it has exited and its
    process group is empty. `closed`: our outputs that are closed (std_fds()). A write to the log
    that fails stops the logging alone: `on_log_error` hears of it once, before `on_output` gets
    those bytes, and the result's `log_error` says so."""
    out_fd = 1
    if use_pty is None:
        use_pty = 1 not in closed and os.isatty(out_fd)
    reads, child_fds, names = _job_outputs(use_pty, closed)

    interrupted = killed = False
    kill_at: float | None = None
    handover = _in_foreground(0)  # the job gets the terminal, as a shell's foreground job
    wake_r, wake_w = os.pipe()
    for fd in (wake_r, wake_w):
        os.set_blocking(fd, False)
    pid = 0

    def wake(signum=None, frame=None):
        # The main loop may be in select() with no timeout: PEP 475 would retry it unchanged
        # after a handler, so every handler that changes what the loop waits for wakes it.
        try:
            os.write(wake_w, b"w")
        except OSError:
            pass

    def forward(signum, frame):
        nonlocal interrupted, kill_at
        if signum == signal.SIGINT:
            interrupted = True
        if signum in ESCALATE and kill_at is None and not killed:
            kill_at = time.monotonic() + grace
            wake()  # its deadline must now bound the wait
        try:
            if signum in TO_GROUP:
                os.killpg(pid, signum)
            else:
                os.kill(pid, signum)
        except OSError:
            pass

    def resize(signum, frame):
        size = _winsize(out_fd)
        if size:
            for master in reads:
                try:
                    fcntl.ioctl(master, termios.TIOCSWINSZ, size)
                except OSError:
                    pass

    started = time.monotonic()
    # A signal may reach any of our threads (the scan and the watcher wait in theirs); Python
    # runs its handler in the main thread only once that one runs, and ours may be waiting in
    # poll() without a timeout. The wakeup fd is written by whichever thread takes the signal.
    old_wakeup = signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    old_chld = signal.signal(signal.SIGCHLD, wake)
    kw: dict = {"preexec_fn": lambda: _own_group_in_foreground(0)} if handover else {"process_group": 0}
    try:
        proc = subprocess.Popen(list(argv), stdin=None, stdout=child_fds[0], stderr=child_fds[1], close_fds=True, **kw)
    except (OSError, subprocess.SubprocessError) as exc:
        signal.signal(signal.SIGCHLD, old_chld)
        signal.set_wakeup_fd(old_wakeup)
        for fd in (*reads, wake_r, wake_w):
            os.close(fd)
        if not isinstance(exc, OSError):  # preexec_fn failed: nothing a shell would say
            raise TroubleshootError(f"{argv[0]}: cannot start it: {exc}") from None
        raise exec_error(argv[0], exc) from None
    finally:
        for fd in child_fds:
            os.close(fd)
    pid = proc.pid
    if handover:
        _set_foreground(0, pid)  # also here: whichever of parent and child comes first
    if on_start:
        on_start(pid)
    old = {s: signal.signal(s, forward) for s in (*TO_JOB, *TO_GROUP)}
    old_winch = signal.signal(signal.SIGWINCH, resize) if use_pty else None
    pump = _Pump(reads, log, on_output, wake_r, poll_outputs=use_pty, on_log_error=on_log_error)
    # A pipe holds a MiB, so it fills in a few ms only for a job writing hundreds of MB/s, which
    # is read a full buffer at a time anyway; a pseudo-terminal holds a few KiB.
    pause = TRICKLE_PAUSE[use_pty]
    result = None
    try:
        status = None
        check = True
        while status is None:
            if check:
                status = _reap(pid, handover)
                if status is not None:
                    break
            timeout = None if kill_at is None else max(0.0, kill_at - time.monotonic())
            got, check = pump.step(timeout)
            if kill_at is not None and time.monotonic() >= kill_at:
                _kill_group(pid)  # the job outlived the grace period it got after SIGTERM/SIGHUP
                kill_at, killed, check = None, True, True
            if 0 < got < TRICKLE:
                # A job writing line by line (unbuffered, or on a terminal) would wake us once per
                # line: a pause lets its lines gather, so a million of them cost a few hundred
                # wake-ups. A job writing faster fills the buffer and is read at once.
                time.sleep(pause)
        proc.returncode = status
        if handover:
            _set_foreground(0, os.getpgrp())
        leftovers = procgroup.members(pid)
        if leftovers:
            killed = procgroup.stop_group(pid, grace, on_wait=lambda t: pump.step(t)) or killed
        pump.drain()
        holders = procgroup.holders(names) if pump.open else []
        sig = -status if status < 0 else None
        result = RunResult(returncode=128 + sig if sig else status, signal=sig, seconds=time.monotonic() - started,
                           log_path=log_path, interrupted=interrupted or sig == signal.SIGINT,
                           leftovers=tuple(leftovers), killed=killed, holders=tuple(holders))
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        signal.signal(signal.SIGCHLD, old_chld)
        signal.set_wakeup_fd(old_wakeup)
        if old_winch is not None:
            signal.signal(signal.SIGWINCH, old_winch)
        pump.close()
        for fd in (*reads, wake_r, wake_w):
            try:
                os.close(fd)
            except OSError:
                pass
        pump.flush_log()
    return result._replace(log_error=pump.log_error)


def _reap(pid: int, handover: bool) -> int | None:
    """The job's status (-N: signal N) once it has exited; a stopped job stops us too."""
    try:
        got, status = os.waitpid(pid, os.WNOHANG | os.WUNTRACED)
    except ChildProcessError:  # pragma: no cover - reaped elsewhere
        return 0
    if got == 0:
        return None
    if os.WIFSTOPPED(status):
        _suspend(pid, handover)
        return None
    return os.waitstatus_to_exitcode(status)


def _suspend(pid: int, handover: bool) -> None:
    """The job was stopped (Ctrl-Z): stop ourselves as well, so that the shell shows the job as
    stopped and gives its prompt back; on `fg`/`bg`, continue the job with us."""
    if handover:
        _set_foreground(0, os.getpgrp())
    os.kill(os.getpid(), signal.SIGSTOP)
    if handover and _in_foreground(0):
        _set_foreground(0, pid)
    try:
        os.killpg(pid, signal.SIGCONT)
    except OSError:
        pass


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass


def _write_log(log: BinaryIO, data: bytes) -> None:
    """All of `data`: an unbuffered log (raw FileIO) may take part of a write."""
    view = memoryview(data)
    while view:
        n = log.write(view)
        if n is None or n >= len(view):  # a buffered writer takes everything
            return
        view = view[n:]


def _write_all(fd: int, data: bytes) -> bool:
    """False when the reader is gone (`| head`, a closed terminal): the job keeps running and
    the log keeps everything."""
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except BlockingIOError:  # pragma: no cover
            time.sleep(0.001)
            continue
        except OSError:  # EPIPE, EBADF, EIO
            return False
        view = view[n:]
    return True
