"""Logs read from a pipe, a FIFO or a device (stdin, `--log /dev/stdin`, `<(cmd)`), not from a
file: they have no size to measure a read against, and some never end (`--log /dev/zero`).

`watch` wraps such a stream (a regular file comes back as it is, with nothing added to its
reads) to count the bytes it gives, to show that count on a terminal while a long read goes on
(`progress_on`), and to stop an input that is not a log: LONG_LINE bytes without a line break
and without text, or more than $TROUBLESHOOT_STREAM_LIMIT bytes. A piped log of text lines,
however long, is never stopped unless that limit is set.

The progress line is drawn by `rich`, imported only when a line is first shown: a run that
shows none never pays for the import.

A log typed or pasted into a terminal (`--log -` on one) is asked for on stderr (`PASTE_PROMPT`)
and ends at the first Ctrl-D on an empty line (`Typed`): a terminal's end of input ends one
read, not the input, and a buffered reader that met it inside a longer read would wait for a
second one.
"""

from __future__ import annotations

import os
import stat
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TextIO

from troubleshoot.console import PROG
from troubleshoot.errors import TroubleshootError
from troubleshoot.lazyre import lazy
from troubleshoot.records import record
from troubleshoot.scan.reader import CHUNK_SIZE, LONG_LINE
from troubleshoot.textsafe import terminal_safe
from troubleshoot.values import parse_bytes

ENV_PROGRESS_BYTES = "TROUBLESHOOT_PROGRESS_BYTES"
ENV_PROGRESS_SECONDS = "TROUBLESHOOT_PROGRESS_SECONDS"
ENV_STREAM_LIMIT = "TROUBLESHOOT_STREAM_LIMIT"
PROGRESS_BYTES = 64 << 20
PROGRESS_SECONDS = 2.0
# How much of each read without a line break is looked at to tell text from filler: enough to
# judge, little enough that a long line of text costs next to nothing.
SAMPLE = 4096
# Redraws a second; rich's rate is estimated from the counts drawn.
REFRESH = 4
NAME_WIDTH = 40
PASTE_PROMPT = f"{PROG}: paste the log, then press Ctrl-D on an empty line"

_NEWLINE = lazy(b"\n")
# Control bytes a text log does not hold; tab, CR (progress bars), backspace, form feed and ESC
# (colours) it does.
_CONTROLS = bytes(b for b in range(0x20) if b not in b"\t\n\r\x08\x0c\x1b") + b"\x7f"


@record(frozen=True)
class Limits:
    """When a watched read shows progress, and how long it may be (None: no limit)."""

    progress_bytes: int = PROGRESS_BYTES
    progress_seconds: float = PROGRESS_SECONDS
    stream_limit: int | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> Limits:
        limit = _env_bytes(environ, ENV_STREAM_LIMIT, 0)
        return cls(_env_bytes(environ, ENV_PROGRESS_BYTES, PROGRESS_BYTES),
                   _env_seconds(environ, ENV_PROGRESS_SECONDS, PROGRESS_SECONDS), limit or None)


def _env_bytes(environ: Mapping[str, str], name: str, default: int) -> int:
    value = environ.get(name, "").strip()
    if not value:
        return default
    try:
        return parse_bytes(value)
    except ValueError:
        raise TroubleshootError(f"{name}={value!r} is not a byte size (e.g. 64MiB or 20GiB)") from None


def _env_seconds(environ: Mapping[str, str], name: str, default: float) -> float:
    value = environ.get(name, "").strip()
    if not value:
        return default
    try:
        seconds = float(value.removesuffix("s"))
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        raise TroubleshootError(f"{name}={value!r} is not a number of seconds (e.g. 2)")
    return seconds


@record(frozen=True)
class Terminal:
    """Where a read's progress may be drawn: a terminal's stream, in colour or not."""

    stream: TextIO
    colour: bool


_terminal: ContextVar[Terminal | None] = ContextVar("troubleshoot_progress_terminal", default=None)


def can_draw(stream, environ: Mapping[str, str] = os.environ) -> bool:
    """A progress line moves the cursor: only on a terminal that can do it (not TERM=dumb)."""
    try:
        if not stream.isatty():
            return False
    except (AttributeError, ValueError, OSError):
        return False
    return environ.get("TERM", "") not in ("dumb", "unknown")


@contextmanager
def progress_on(stream: TextIO, colour: bool, allowed: bool = True) -> Iterator[None]:
    """Streams watched inside this block (in this thread) show their progress on `stream` when
    it is a terminal that can draw it and `allowed` (the command's --color is not `never`).
    A context variable, not a setting of the module: the TUI's threads, which own the screen,
    never draw one."""
    token = _terminal.set(Terminal(stream, colour) if allowed and can_draw(stream) else None)
    try:
        yield
    finally:
        _terminal.reset(token)


def watch(stream, name: str, owned: bool = True):
    """`stream` as it is when it reads a regular file (or has no file descriptor); else wrapped
    in a Watched. `owned`: closing the wrapper closes the stream (not so for stdin)."""
    try:
        fd = stream.fileno()
        mode = os.fstat(fd).st_mode
    except (AttributeError, ValueError, OSError):
        return stream
    if stat.S_ISREG(mode):
        return stream
    try:
        limits = Limits.from_env()
    except TroubleshootError:
        if owned:
            stream.close()
        raise
    terminal = _terminal.get()
    if os.isatty(fd):
        # A log typed or pasted into the terminal (`--log -`): asked for, and no progress line
        # drawn over what is typed.
        print(PASTE_PROMPT, file=sys.stderr, flush=True)
        stream, terminal = Typed(stream), None
    return Watched(stream, name, limits, terminal, owned)


class Typed:
    """A terminal's input, read until the first end of input (Ctrl-D on an empty line), which
    is kept: a terminal ends one read there, and the next read would wait for more. Each read
    asks the stream at most once (`readinto1`) for its next line, so an end met is seen here,
    not used up inside a buffered read that had bytes to return; a read still gives all it was
    asked for, or what there was before the end."""

    def __init__(self, stream):
        self._stream = stream
        self._ended = False

    def readinto(self, buf) -> int:
        one = getattr(self._stream, "readinto1", None) or self._stream.readinto
        with memoryview(buf) as outer, outer.cast("B") as view:
            got = 0
            while got < len(view) and not self._ended:
                n = one(view[got:]) or 0
                self._ended = not n
                got += n
            return got

    def read(self, n: int | None = -1) -> bytes:
        if n is None or n < 0:
            return b"".join(iter(lambda: self.read(CHUNK_SIZE), b""))
        buf = bytearray(n)
        del buf[self.readinto(buf):]
        return bytes(buf)

    def fileno(self) -> int:
        return self._stream.fileno()

    def close(self) -> None:
        self._stream.close()


def text_bytes(sample: bytes) -> int:
    """The bytes of `sample` that read as text: UTF-8 but for NUL and the other control bytes
    a log does not hold."""
    controls = len(sample) - len(sample.translate(None, _CONTROLS))
    valid = len(sample.decode("utf-8", "ignore").encode("utf-8"))
    return valid - controls


def human_size(n: float) -> str:
    """1536 -> '1.5 KiB'; 16 << 20 -> '16 MiB'."""
    unit = "bytes"
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            break
        n /= 1024
    if unit == "bytes":
        return f"{int(n)} bytes"
    return f"{n:.0f} {unit}" if n >= 100 or n == int(n) else f"{n:.1f} {unit}"


@record
class LineRun:
    """The bytes read since the last line break, judged window by window: a window of `window`
    bytes without a line break whose samples are mostly not text is no log (/dev/zero)."""

    window: int = LONG_LINE
    length: int = 0  # since the last read that held a line break
    sampled: int = 0
    text: int = 0

    def saw(self, data) -> str | None:
        """Why the input is not a text log, once a window says so; else None."""
        if _NEWLINE.search(data) is not None:
            self.length = self.sampled = self.text = 0
            return None
        sample = bytes(data[:SAMPLE])
        self.length += len(data)
        self.sampled += len(sample)
        self.text += text_bytes(sample)
        if self.length < self.window:
            return None
        text, sampled = self.text, self.sampled
        self.length = self.sampled = self.text = 0  # a long line of text: its next window judged afresh
        if text * 2 >= sampled:
            return None
        share = "no text" if not text else f"{100 * text // sampled}% text"
        return f"{human_size(self.window)} without a line break, {share}"


class Watched:
    """A stream from a pipe, a FIFO or a device, read through `read` or `readinto` as the
    stream itself is, its bytes counted as they pass (see the module's docstring)."""

    def __init__(self, stream, name: str, limits: Limits, terminal: Terminal | None = None,
                 owned: bool = True):
        self.name, self.limits, self.owned = name, limits, owned
        self.total = 0
        self.closed = False
        self._stream = stream
        self._run = LineRun()
        self._progress = _Progress(terminal, name, limits) if terminal is not None else None

    def readinto(self, buf) -> int:
        readinto = getattr(self._stream, "readinto", None)
        if readinto is None:
            data = self._stream.read(len(buf))
            n = len(data)
            buf[:n] = data
        else:
            n = readinto(buf) or 0
        if not n:
            self._ended()
            return 0
        # Both views let go before returning: the scanner grows the buffer they would pin.
        with memoryview(buf) as whole, whole[:n] as part:
            self._saw(part)
        return n

    def read(self, n: int | None = -1) -> bytes:
        if n is None or n < 0:
            return b"".join(iter(lambda: self.read(CHUNK_SIZE), b""))
        data = self._stream.read(n)
        if data:
            self._saw(data)
        elif n:
            self._ended()
        return data

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._stream.fileno()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._ended()
        if self.owned:
            self._stream.close()

    def _saw(self, data) -> None:
        self.total += len(data)
        if self._progress is not None:
            self._progress.read(self.total)
        limit = self.limits.stream_limit
        if limit is not None and self.total > limit:
            self._stop(f"longer than {human_size(limit)}, the limit {ENV_STREAM_LIMIT} sets for a log "
                       "from a pipe, a FIFO or a device")
        reason = self._run.saw(data)
        if reason is not None:
            self._stop(f"not a text log ({reason})")

    def _stop(self, why: str) -> None:
        self._ended()
        raise TroubleshootError(f"{self.name}: {why}; stopped reading")

    def _ended(self) -> None:
        """The read is over (its end, an error, or close): the progress line goes."""
        if self._progress is not None:
            self._progress.finish()


class _Progress:
    """The progress line of one read, drawn by a thread of its own once the read has given
    `progress_bytes` or gone on for `progress_seconds` (a read may wait on a quiet pipe), and
    redrawn REFRESH times a second. The reading thread only stores its count: no lock, no
    drawing, nothing of rich's on its way."""

    def __init__(self, terminal: Terminal, name: str, limits: Limits):
        self._terminal, self._name = terminal, name
        self._due_bytes, self._seconds = limits.progress_bytes, limits.progress_seconds
        import threading  # a progress line only: a file's scan starts no thread

        self._done = threading.Event()
        self._line: _Line | None = None
        self._total = 0
        self._started = time.monotonic()
        # Every thread this starts ends before finish() returns: a scan of a file that follows
        # forks only while the process runs one thread (scan.children.forkable).
        self._thread = threading.Thread(target=self._run, name="input-progress", daemon=True)
        self._thread.start()

    def read(self, total: int) -> None:
        self._total = total

    def finish(self) -> None:
        """Idempotent: the line is cleared (if it was drawn) and the thread has ended."""
        self._done.set()
        self._thread.join()
        line, self._line = self._line, None
        if line is not None:
            line.stop(self._total)

    def _run(self) -> None:
        due = self._started + self._seconds
        try:
            if not self._seconds:  # wanted at once: drawn even for a read that ends first
                self._draw()
            while not self._done.wait(1 / REFRESH):
                if self._line is not None:
                    self._line.update(self._total)
                elif self._total >= self._due_bytes or time.monotonic() >= due:
                    self._draw()
        except (ImportError, OSError, ValueError):
            # No rich, or the terminal went away: the read goes on without a line (a traceback
            # from this thread would be the one thing on the screen it must not be).
            pass

    def _draw(self) -> None:
        self._line = _Line.start(self._terminal, _short(self._name), self._total, self._started)


def _short(name: str) -> str:
    name = terminal_safe(name, keep_newlines=False)
    return name if len(name) <= NAME_WIDTH else "…" + name[-(NAME_WIDTH - 1):]


class _Line:
    """rich's progress display of one read: spinner, name, bytes, rate and time since the read
    began; cleared when it stops."""

    def __init__(self, progress, task) -> None:
        self._progress, self._task = progress, task

    @classmethod
    def start(cls, terminal: Terminal, name: str, total: int, started: float) -> _Line:
        from rich.console import Console
        from rich.progress import Progress

        console = Console(file=terminal.stream, no_color=not terminal.colour, highlight=False)
        # No redirection of sys.stdout/sys.stderr: other threads keep the streams they hold.
        # Redrawn by _Progress's thread alone (no refresh thread of rich's to outlive the read).
        progress = Progress(*_columns(), console=console, transient=True, auto_refresh=False,
                            speed_estimate_period=5.0, redirect_stdout=False, redirect_stderr=False)
        task = progress.add_task(f"{PROG}: reading {name}", total=None, completed=total, started=started)
        progress.start()
        return cls(progress, task)

    def update(self, total: int) -> None:
        self._progress.update(self._task, completed=total, refresh=True)

    def stop(self, total: int) -> None:
        """Drawn a last time with the final count, then cleared."""
        try:
            self._progress.update(self._task, completed=total)
            self._progress.stop()
        except (OSError, ValueError):  # the terminal went away: nothing left to clear
            pass


def _columns() -> list:
    from rich.progress import ProgressColumn, SpinnerColumn, TextColumn
    from rich.text import Text

    class ReadColumn(ProgressColumn):
        """Bytes read, the rate over the last seconds (else since the start) and the time since
        the read began, not since the line was first drawn (binary units, as the messages say)."""

        def render(self, task) -> Text:
            seconds = max(time.monotonic() - task.fields["started"], 1e-3)
            rate = task.speed or task.completed / seconds
            return Text(f"{human_size(task.completed)} read, {human_size(rate)}/s, {_clock(seconds)}",
                        style="progress.download")

    # The spinner's frames are ASCII: a terminal without UTF-8 draws them too.
    return [SpinnerColumn("line"), TextColumn("{task.description}", markup=False), ReadColumn()]


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02}:{secs:02}" if hours else f"{minutes}:{secs:02}"

