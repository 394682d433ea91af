"""A `q` typed before the TUI is up ends it at once.

Textual costs ~0.3 s of CPU to import and about as much again to compose the first screen; on a
loaded machine that is seconds, and a `q` typed meanwhile would wait for all of it (Textual only
handles keys once its message loop runs, after the first screen is mounted). Two windows:

1. From the `tui` command's start until the driver takes the terminal, a thread watches stdin in
   cbreak mode (no echo, no line buffering). A terminal cannot be peeked, so what it reads it
   must pass on: when the first byte typed is `q` or ctrl+q the process ends there (nothing has
   started yet: no child, no job, nothing drawn), the terminal's modes restored. Any other first
   byte ends the watch: what was read is handed to the driver's input parser ahead of the
   terminal, and whatever is typed later stays in the terminal for the driver, in order. Only a
   first key can mean "quit": after `p` (the paste area) a `q` is text, and the app decides that.
2. From the driver's start until the first frame is drawn: Textual already parses input, but
   keys wait behind composing, styling and laying out the screen (~0.2 s, more under load). The
   driver shows its first key here; a `q`/ctrl+q leaves application mode and ends the process.
   The app's jobs start after the first frame; should one start before, `on_mount` has
   registered their stop (under the lock an exit holds) and the exit calls it first, so no
   probe's child is left behind. Until the first frame nobody has seen anything a first key
   could mean other than what it means at start.

ctrl+c keeps its meaning in each: the terminal's interrupt (exit 130) before the driver starts,
Textual's hint to press ctrl+q after.
"""

from __future__ import annotations

import os
import select
import termios
import threading
from typing import Callable

QUIT_BYTES = (b"q", b"\x11")  # q, ctrl+q (readable because IXON is off)
QUIT_KEYS = ("q", "ctrl+q")


class EarlyKeys:
    def __init__(self, fd: int, saved: list):
        self.fd = fd
        self.saved = saved  # the terminal's modes before we touched them
        self._lock = threading.Lock()
        self._watching = True  # window 1
        self._open = True  # window 1 or 2
        self._typed = b""  # read in window 1: the app's, not ours
        self._key_seen = False
        self._stop_jobs: Callable[[], None] | None = None
        self._wake_r, self._wake_w = os.pipe()
        self._thread = threading.Thread(target=self._watch, name="tui-early-keys", daemon=True)

    @classmethod
    def start(cls, fd: int) -> EarlyKeys | None:
        """Watch `fd` (a terminal) from now on; None when it is not one."""
        try:
            saved = termios.tcgetattr(fd)
            attrs = termios.tcgetattr(fd)
            attrs[3] &= ~(termios.ECHO | termios.ICANON)  # lflag: keys arrive one by one, unechoed
            attrs[0] &= ~termios.IXON  # iflag: ctrl+q reaches us instead of resuming output
            attrs[6][termios.VMIN], attrs[6][termios.VTIME] = 1, 0
            termios.tcsetattr(fd, termios.TCSANOW, attrs)
        except termios.error:
            return None
        early = cls(fd, saved)
        early._thread.start()
        return early

    def _watch(self) -> None:
        try:
            ready = select.select([self.fd, self._wake_r], [], [])[0]
        except OSError:
            return
        with self._lock:
            if not self._watching or self._wake_r in ready:
                return
            try:
                data = os.read(self.fd, 4096)  # all there is: a key's escape sequence comes in one write
            except OSError:
                return
            if data[:1] in QUIT_BYTES:
                self._exit(None)
            self._typed, self._key_seen = data, bool(data)  # the rest stays in the terminal for the app

    def handover(self) -> str:
        """The driver takes the terminal: stop watching; the text typed so far, for its parser."""
        with self._lock:
            if not self._watching:
                return ""
            self._watching = False
        os.write(self._wake_w, b"x")
        self._thread.join()
        os.close(self._wake_r)
        os.close(self._wake_w)
        return self._typed.decode("utf-8", "replace")

    def key(self, key: str | None, leave: Callable[[], None]) -> None:
        """The driver's input thread saw a key (None: other input, a paste). A first `q` in window
        2 calls `leave` (out of application mode) and ends the process; otherwise returns."""
        with self._lock:
            if not self._open or self._key_seen:
                return
            self._key_seen = True
            if key in QUIT_KEYS:
                self._exit(leave)

    def mounted(self, stop_jobs: Callable[[], None]) -> None:
        """The app's on_mount, before it starts a job: an early exit calls `stop_jobs` first.
        Waits for an exit under way, so no job starts in a process about to end."""
        with self._lock:
            self._stop_jobs = stop_jobs

    def close(self) -> None:
        """The first frame is drawn: from now on the app's own bindings handle `q`."""
        with self._lock:
            self._open = False

    def finish(self) -> None:
        """The TUI ended (or never started): the terminal as it was."""
        self.handover()
        self.close()
        try:
            termios.tcsetattr(self.fd, termios.TCSANOW, self.saved)
        except termios.error:
            pass

    def _exit(self, leave: Callable[[], None] | None) -> None:
        # Called with the lock held, so that on_mount (mounted) waits here and starts nothing.
        try:
            if self._stop_jobs is not None:
                self._stop_jobs()  # probes' children killed, a scan told to stop
            if leave is not None:
                leave()
        finally:
            try:
                termios.tcsetattr(self.fd, termios.TCSANOW, self.saved)
            finally:
                os._exit(0)
