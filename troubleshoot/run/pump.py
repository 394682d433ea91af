"""The job's output passed on: read from its pipes or pseudo-terminals, written to our own
stdout/stderr (unless closed or gone) and appended to the log, untouched.

A log that cannot be written any more (a full disk) stops the logging alone: the job's output
still passes through.
"""

from __future__ import annotations

import errno
import os
import selectors
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import BinaryIO, Callable

PIPE_SIZE = 1 << 20  # the job's output pipes hold this much (Linux's default maximum for a user)
READ = PIPE_SIZE
# A pipe with nothing in it is looked at again after IDLE_FIRST, then twice as late each time, up
# to IDLE_MAX (seconds): see Pump.
IDLE_FIRST, IDLE_MAX = 0.002, 0.05


class Pump:
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

    def drain(self, quiet: float, limit: float) -> None:
        """After the job and its group: read until every writer closed, or nothing came for
        `quiet` seconds (someone outside the group holds the output and keeps quiet), for
        `limit` seconds at most."""
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
