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

import fcntl
import os
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from troubleshoot import safeio
from troubleshoot.errors import TroubleshootError
from troubleshoot.run import procgroup
from troubleshoot.run.execfail import exec_error
from troubleshoot.run.procgroup import Leftover
from troubleshoot.run.pump import PIPE_SIZE, READ, Pump

if TYPE_CHECKING:
    from types import FrameType
    from typing import BinaryIO, Callable, Sequence

TO_JOB = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
TO_GROUP = (signal.SIGINT, signal.SIGTSTP)
ESCALATE = (signal.SIGTERM, signal.SIGHUP)  # the wrapper itself is being stopped
GRACE = 10.0  # seconds between SIGTERM and SIGKILL (Slurm's KillWait is 30)
DRAIN_QUIET = 0.1  # output still held open by a process outside the job's group: read until quiet this long
# A read well short of a full buffer means the job writes faster than nothing but slower than
# we read: a chatty job's lines arrive a few at a time, each wake-up costing a select, a read
# and two writes, and each of its writes to a pipe whose reader waits costs it a wake-up of us
# (a job printing 1M lines unbuffered paid more system time for that than for its writes).
TRICKLE = READ // 2  # a read smaller than this means the job is writing in dribbles...
TRICKLE_PAUSE = {True: 0.001, False: 0.005}  # ...so wait this long (s; pty, pipe) for more


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
    if use_pty is None:
        use_pty = 1 not in closed and os.isatty(1)
    job = _Job(use_pty, closed, grace)
    started = time.monotonic()
    job.start(argv)
    if on_start:
        on_start(job.pid)
    job.forward_signals()
    pump = Pump(job.reads, log, on_output, job.wake_r, poll_outputs=use_pty, on_log_error=on_log_error)
    try:
        status = job.pump_until_exit(pump)
        result = job.end(status, pump, log_path, started)
    finally:
        job.restore_signals()
        pump.close()
        job.close()
        pump.flush_log()
    return result._replace(log_error=pump.log_error)


class _Job:
    """One job and what the wrapper holds while it runs: the job's output fds, the wake-up pipe
    its main loop waits on, the signal handlers it replaced, and how the job was stopped."""

    def __init__(self, use_pty: bool, closed: set[int], grace: float):
        self.use_pty, self.grace = use_pty, grace
        self.reads, self.child_fds, self.names = _job_outputs(use_pty, closed)
        self.handover = _in_foreground(0)  # the job gets the terminal, as a shell's foreground job
        self.wake_r, self.wake_w = os.pipe()
        for fd in (self.wake_r, self.wake_w):
            os.set_blocking(fd, False)
        self.proc: subprocess.Popen | None = None
        self.pid = 0
        self.interrupted = self.killed = False
        self.kill_at: float | None = None  # when the job's group gets SIGKILL, once we were told to stop
        self.replaced: dict[int, object] = {}  # signal -> the handler it had before
        self.old_wakeup = -1

    def start(self, argv: Sequence[str]) -> None:
        """Start the job in its own process group; a command that cannot run raises ExecError
        (or TroubleshootError), with everything restored and closed."""
        # A signal may reach any of our threads (the scan and the watcher wait in theirs); Python
        # runs its handler in the main thread only once that one runs, and ours may be waiting in
        # poll() without a timeout. The wakeup fd is written by whichever thread takes the signal.
        self.old_wakeup = signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)
        self.replaced[signal.SIGCHLD] = signal.signal(signal.SIGCHLD, self.wake)
        kw: dict = {"preexec_fn": lambda: _own_group_in_foreground(0)} if self.handover else {"process_group": 0}
        try:
            proc = subprocess.Popen(list(argv), stdin=None, stdout=self.child_fds[0], stderr=self.child_fds[1],
                                    close_fds=True, **kw)
        except (OSError, subprocess.SubprocessError) as exc:
            self.restore_signals()
            self.close()
            if not isinstance(exc, OSError):  # preexec_fn failed: nothing a shell would say
                raise TroubleshootError(f"{argv[0]}: cannot start it: {exc}") from None
            raise exec_error(argv[0], exc) from None
        finally:
            for fd in self.child_fds:
                os.close(fd)
        self.proc, self.pid = proc, proc.pid
        if self.handover:
            _set_foreground(0, self.pid)  # also here: whichever of parent and child comes first

    def forward_signals(self) -> None:
        """From now on signals sent to us go to the job (see the module's docstring)."""
        for s in (*TO_JOB, *TO_GROUP):
            self.replaced[s] = signal.signal(s, self.forward)
        if self.use_pty:
            self.replaced[signal.SIGWINCH] = signal.signal(signal.SIGWINCH, self.resize)

    def restore_signals(self) -> None:
        for s, handler in self.replaced.items():
            signal.signal(s, handler)
        self.replaced.clear()
        signal.set_wakeup_fd(self.old_wakeup)

    def close(self) -> None:
        for fd in (*self.reads, self.wake_r, self.wake_w):
            try:
                os.close(fd)
            except OSError:
                pass

    def wake(self, signum: int | None = None, frame: FrameType | None = None) -> None:
        # The main loop may be in select() with no timeout: PEP 475 would retry it unchanged
        # after a handler, so every handler that changes what the loop waits for wakes it.
        try:
            os.write(self.wake_w, b"w")
        except OSError:
            pass

    def forward(self, signum: int, frame: FrameType | None) -> None:
        if signum == signal.SIGINT:
            self.interrupted = True
        if signum in ESCALATE and self.kill_at is None and not self.killed:
            self.kill_at = time.monotonic() + self.grace
            self.wake()  # its deadline must now bound the wait
        try:
            if signum in TO_GROUP:
                os.killpg(self.pid, signum)
            else:
                os.kill(self.pid, signum)
        except OSError:
            pass

    def resize(self, signum: int, frame: FrameType | None) -> None:
        size = _winsize(1)
        if size:
            for master in self.reads:
                try:
                    fcntl.ioctl(master, termios.TIOCSWINSZ, size)
                except OSError:
                    pass

    def pump_until_exit(self, pump: Pump) -> int:
        """Pass the job's output on until it exits: its status (-N: signal N). After SIGTERM or
        SIGHUP, its group gets SIGKILL once the grace period is over."""
        # A pipe holds a MiB, so it fills in a few ms only for a job writing hundreds of MB/s,
        # which is read a full buffer at a time anyway; a pseudo-terminal holds a few KiB.
        pause = TRICKLE_PAUSE[self.use_pty]
        check = True
        while True:
            if check:
                status = _reap(self.pid, self.handover)
                if status is not None:
                    return status
            timeout = None if self.kill_at is None else max(0.0, self.kill_at - time.monotonic())
            got, check = pump.step(timeout)
            if self.kill_at is not None and time.monotonic() >= self.kill_at:
                _kill_group(self.pid)  # the job outlived the grace period it got after SIGTERM/SIGHUP
                self.kill_at, self.killed, check = None, True, True
            if 0 < got < TRICKLE:
                # A job writing line by line (unbuffered, or on a terminal) would wake us once per
                # line: a pause lets its lines gather, so a million of them cost a few hundred
                # wake-ups. A job writing faster fills the buffer and is read at once.
                time.sleep(pause)

    def end(self, status: int, pump: Pump, log_path: Path, started: float) -> RunResult:
        """The job has exited with `status`: take the terminal back, stop what is left in its
        group, read what is left of its output, and say how it went."""
        self.proc.returncode = status
        if self.handover:
            _set_foreground(0, os.getpgrp())
        leftovers = procgroup.members(self.pid)
        if leftovers:
            self.killed = procgroup.stop_group(self.pid, self.grace, on_wait=lambda t: pump.step(t)) or self.killed
        pump.drain(DRAIN_QUIET, GRACE)
        holders = procgroup.holders(self.names) if pump.open else []
        sig = -status if status < 0 else None
        return RunResult(returncode=128 + sig if sig else status, signal=sig, seconds=time.monotonic() - started,
                         log_path=log_path, interrupted=self.interrupted or sig == signal.SIGINT,
                         leftovers=tuple(leftovers), killed=self.killed, holders=tuple(holders))


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
