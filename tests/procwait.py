"""Waiting on a child's output as it arrives, never with sleep: a pipe (`Output`) or the master
side of a pseudo-terminal (`read_pty`)."""

from __future__ import annotations

import os
import pty
import select
import time


class Output:
    """A child's pipe read as it arrives: wait for a line without sleeping or blocking forever."""

    def __init__(self, stream):
        self.fd, self.buf, self.pos = stream.fileno(), b"", 0

    def wait_for(self, want: bytes, timeout: float = 120) -> bytes:
        """Return the complete lines after the last match, up to the first line containing `want`."""
        deadline = time.monotonic() + timeout
        while True:
            at = self.buf.find(want, self.pos)
            end = self.buf.find(b"\n", at) if at >= 0 else -1
            if end >= 0:
                got, self.pos = self.buf[self.pos:end + 1], end + 1
                return got
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                raise AssertionError(f"no {want!r} within {timeout}s; got {self.buf[-2000:]!r}")
            chunk = os.read(self.fd, 65536)
            if not chunk:
                raise AssertionError(f"output ended before {want!r}; got {self.buf[-2000:]!r}")
            self.buf += chunk


def read_pty(fd: int, until: bytes | None = None, timeout: float = 120) -> bytes:
    """Read a pty master until `until` is seen, or (None) until the other side has closed."""
    out = b""
    deadline = time.monotonic() + timeout
    while until is None or until not in out:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise AssertionError(f"timed out reading the terminal; got {out[-2000:]!r}")
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: every process on the terminal has exited
            chunk = b""
        if not chunk:
            if until is None:
                return out
            raise AssertionError(f"terminal closed before {until!r}; got {out[-2000:]!r}")
        out += chunk
    return out


def signal_when_ready(proc, sig: int, ready: bytes = b"ready", timeout: float = 120) -> tuple[bytes, bytes]:
    """Wait for `ready` on the child's stdout, send it `sig`, then collect (stdout after it, stderr).
    The child is killed if anything goes wrong, so no test leaves a job behind."""
    try:
        Output(proc.stdout).wait_for(ready, timeout)
        proc.send_signal(sig)
        return proc.communicate(timeout=timeout)
    finally:
        proc.kill()


def run_on_pty(argv: list[str], env: dict, cwd, drive=None, stdin: bytes | None = None) -> tuple[bytes, int]:
    """Run `argv` (argv[0] a path) with a pseudo-terminal of its own as stdout and stderr, and
    as stdin unless `stdin` is given, which is piped in instead (`cat log | cmd` in a terminal).
    `drive(fd)` runs while the pipe is still open and returns what it read off the terminal.
    Returns everything the terminal showed and the exit code."""
    r, w = os.pipe() if stdin is not None else (None, None)
    pid, fd = pty.fork()
    if pid == 0:  # the child: a terminal of its own, as a user's shell gives it
        try:
            if r is not None:
                os.dup2(r, 0)
            os.chdir(cwd)
            os.execve(argv[0], argv, env)
        finally:
            os._exit(127)
    if r is not None:
        os.close(r)
    try:
        try:
            if w is not None:
                os.write(w, stdin)  # under a pipe's buffer: never waits on the child
            out = drive(fd) if drive else b""
        finally:
            if w is not None:
                os.close(w)
        out += read_pty(fd)
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    return out, os.waitstatus_to_exitcode(status)
