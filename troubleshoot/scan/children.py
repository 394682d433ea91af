"""Forked child processes for the scan's ranges: each runs a function and sends pickled
objects back through a pipe; none is ever left running or unreaped, whatever happens.

A child leaves with os._exit, so no buffer, atexit handler or lock of the parent runs twice; it
is killed with its parent (PR_SET_PDEATHSIG). Forking is only safe while the process has one
thread (a lock another thread held at the fork stays held in the child forever): `forkable()`
says when. `Counters` adds up the bytes each process has read, for a progress callback.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import struct
import sys
import threading
from typing import Callable

from troubleshoot import safeio

_LENGTH = struct.Struct("<Q")
PIPE_BYTES = 1 << 20  # a child rarely waits for the parent to drain its pipe


def forkable() -> bool:
    """True on Linux (elsewhere a forked child of a process that loaded system frameworks may not
    be usable, as on macOS) where this process runs one thread (Python's or any other: a native
    library's thread holds locks too)."""
    if not (sys.platform.startswith("linux") and hasattr(os, "fork") and hasattr(os, "preadv")):
        return False
    if os.environ.get("TROUBLESHOOT_SCAN_FORK", "").strip() == "0":
        return False
    if threading.active_count() != 1:
        return False
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return True  # no /proc: Python's count is what there is


def start(work: Callable[[Callable[[object], int]], None], children: list) -> None:
    """Fork a Child running `work` and add it to `children`, with Ctrl-C held until it is there:
    a child its caller does not know of would never be killed or reaped. (Only the main thread
    ever gets KeyboardInterrupt, so only there is there anything to hold.)"""
    held: list = []
    old = None
    if threading.current_thread() is threading.main_thread():
        old = signal.getsignal(signal.SIGINT)
        if callable(old):
            signal.signal(signal.SIGINT, lambda signum, frame: held.append(frame))
        else:
            old = None  # SIG_IGN or SIG_DFL: no KeyboardInterrupt to hold
    try:
        children.append(Child(work))
    finally:
        if old is not None:
            signal.signal(signal.SIGINT, old)
            if held:
                old(signal.SIGINT, held[0])  # the Ctrl-C held meanwhile: KeyboardInterrupt now


class Child:
    """One forked process running `work(send)`. `send(obj)` pickles an object to the parent (and
    says how many bytes that took); the parent collects them with `drain()` (never blocks) and
    `messages()` (waits for the end). A child that raises, is killed or exits early gives None
    from `messages()`, or, where something else reaped it, what it sent before it stopped: the
    caller's protocol tells a finished child by its last message, and does the rest itself."""

    def __init__(self, work: Callable[[Callable[[object], int]], None]):
        """Forks; an OSError (no more processes, no memory) reaches the caller with nothing left
        open. Use `start()`, which holds Ctrl-C until the caller has the child."""
        r, w = os.pipe()
        safeio.grow_pipe(w, PIPE_BYTES)
        parent = os.getpid()
        try:
            pid = os.fork()
        except BaseException:
            os.close(r)
            os.close(w)
            raise
        if pid == 0:  # pragma: no cover - runs in the child, which reports through its exit code
            code = 1
            try:
                os.close(r)
                signal.signal(signal.SIGINT, signal.SIG_DFL)  # the parent decides what Ctrl-C does
                _die_with(parent)
                work(_sender(w))
                code = 0
            except BaseException:
                pass
            finally:
                os._exit(code)
        self.pid: int | None = pid
        self.fd: int | None = r
        os.close(w)
        os.set_blocking(r, False)
        self.data = bytearray()
        self.eof = False

    def drain(self) -> None:
        """Take whatever the child has written so far, so that it does not wait on a full pipe."""
        while not self.eof:
            try:
                got = os.read(self.fd, PIPE_BYTES)
            except BlockingIOError:
                return
            if not got:
                self.eof = True
                return
            self.data += got

    def messages(self, cancelled: Callable[[], bool] = lambda: False) -> list | None:
        """Every object the child sent, once it has ended, each still pickled (`load` it when
        it is needed: the objects take several times the room of their pickles); None when it
        failed. `cancelled` is asked every 50 ms while waiting (true: the child is killed and
        None comes back)."""
        while not self.eof:
            if cancelled():
                self.kill()
                return None
            select.select([self.fd], [], [], 0.05)
            self.drain()
        if self._reap() not in (0, None):
            return None
        out, at, data = [], 0, memoryview(self.data)
        while at + _LENGTH.size <= len(data):
            (n,) = _LENGTH.unpack_from(data, at)
            at += _LENGTH.size
            if at + n > len(data):
                break  # cut short: the child was killed while it wrote (and reaped by someone else)
            out.append(data[at : at + n])
            at += n
        return out

    def kill(self) -> None:
        """Stop the child now (if it still runs) and reap it."""
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._reap()

    def _reap(self) -> int | None:
        """The child's exit status once it has ended; None when something else reaped it first
        (SIGCHLD ignored, or a handler that waits for any child): then its messages tell
        whether it finished (the scanner's last one says so)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        self.eof = True
        code = None
        if self.pid is not None:
            pid, self.pid = self.pid, None
            try:
                code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
            except ChildProcessError:
                pass
        return code


def _die_with(parent: int) -> None:  # pragma: no cover - runs in the child
    """A child whose parent is killed (SIGKILL, the OOM killer) is killed too, rather than
    scanning on with nobody to read what it finds."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent was gone before prctl
        os._exit(1)


def load(message):
    """One message of `Child.messages()` as the object the child sent."""
    return pickle.loads(message)


def _sender(fd: int) -> Callable[[object], int]:  # pragma: no cover - runs in the child
    def send(obj) -> int:
        data = pickle.dumps(obj, pickle.HIGHEST_PROTOCOL)
        view = memoryview(_LENGTH.pack(len(data)) + data)
        while view:
            view = view[os.write(fd, view):]
        return len(data)
    return send


class Counters:
    """Bytes read by this process and by each child (in shared memory), for `progress`: never
    more than the file held when it was cut (a range a child left is read twice), never less
    than what was reported before."""

    def __init__(self, children: int, progress, size: int):
        self.progress = progress
        self.size = size
        self.last = 0
        self.phases: list[int] = []
        self.shared = None
        if progress is not None and children:
            import mmap

            self.shared = mmap.mmap(-1, 8 * children)  # MAP_SHARED: the children write into it

    def own(self):
        """A progress callback for one more range this process reads (each counts from 0)."""
        self.phases.append(0)
        k = len(self.phases) - 1

        def read(n: int) -> None:
            self.phases[k] = n
            self.report()
        return read if self.progress is not None else None

    def child(self, k: int):
        if self.shared is None:
            return None
        shared = self.shared

        def wrote(n: int) -> None:  # pragma: no cover - runs in a forked child
            struct.pack_into("<Q", shared, 8 * k, n)
        return wrote

    def report(self, final: int | None = None) -> None:
        if self.progress is None:
            return
        if final is None:
            others = 0
            if self.shared is not None:
                others = sum(struct.unpack_from(f"<{len(self.shared) // 8}Q", self.shared))
            final = min(sum(self.phases) + others, self.size)
        if final > self.last:
            self.last = final
            self.progress(final)
