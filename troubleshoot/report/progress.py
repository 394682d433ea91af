"""Progress on a terminal while the probes run: silent when they finish within half a second,
then one line on stderr, rewritten in place, naming the probes still running. `plain` (no
colours wanted: NO_COLOR, --color never) rewrites it with carriage returns and spaces alone, no
escape sequence."""

from __future__ import annotations

import sys
import threading
import time
from typing import Sequence, TextIO

from troubleshoot.textsafe import terminal_safe

DELAY = 0.5
INTERVAL = 0.2


class ProbeProgress:
    """Use as a context manager around the probes; pass `on_result` as their callback."""

    def __init__(self, names: Sequence[str], stream: TextIO | None = None, delay: float = DELAY,
                 interval: float = INTERVAL, force: bool = False, plain: bool = False):
        self.stream = stream or sys.stderr
        self.plain = plain
        self._width = 0  # of the line shown last: plain mode blanks it with spaces
        self.pending = list(names)
        self.delay, self.interval = delay, interval
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self.shown = False
        try:
            self.enabled = force or self.stream.isatty()
        except (AttributeError, ValueError):
            self.enabled = False

    def on_result(self, outcome) -> None:
        with self._lock:
            if outcome.name in self.pending:
                self.pending.remove(outcome.name)

    def __enter__(self) -> "ProbeProgress":
        self._start = time.monotonic()
        if self.enabled:
            self._thread = threading.Thread(target=self._run, name="probe-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()
        if self.shown:
            self._write(self._erase())

    def line(self) -> str:
        with self._lock:
            waiting = ", ".join(terminal_safe(n, keep_newlines=False) for n in self.pending)
        return f"troubleshoot: probing this machine ({time.monotonic() - self._start:.1f} s) … waiting for {waiting}"

    def _run(self) -> None:
        if self._done.wait(self.delay):
            return
        while not self._done.is_set():
            self.shown = True
            line = self.line()
            self._write(self._erase() + line)
            self._width = len(line)
            self._done.wait(self.interval)

    def _erase(self) -> str:
        return "\r" + " " * self._width + "\r" if self.plain else "\r\x1b[K"

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            pass
