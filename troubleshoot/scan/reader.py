"""Reading a log for the scan: newline-aligned chunks of about a MiB in one reused buffer, from
a stream or from a range of a file read by offset, and how much of a stream is left to read.

`tune_allocator()` is for a program's entry point, never called by the scan itself: it changes
how glibc's allocator serves every allocation of the process (see its docstring).
"""

from __future__ import annotations

import io
import os
import stat
from typing import Callable

from troubleshoot.records import record

# About 1 MiB: large enough that per-chunk costs vanish, small enough that the buffer, an
# ANSI-stripped copy and glibc's allocator together stay far below the RSS budget.
CHUNK_SIZE = 1 << 20
# A line longer than this is matched in windows of this size (a match across a window edge is
# lost; such lines are binary dumps, not error messages), so memory stays bounded.
LONG_LINE = 16 << 20


class Chunks:
    """A stream read in chunks of whole lines into one reused buffer. A line longer than
    LONG_LINE comes out in windows (numbered as one line); the unfinished last line comes out
    at the end with `final` set (it counts as a line)."""

    def __init__(self, stream, chunk_size: int, progress: Callable[[int], None] | None = None):
        if chunk_size >= CHUNK_SIZE and _wanted and not _tuned:
            _tune()
        self.buf = bytearray(2 * chunk_size)
        self.size = chunk_size
        self.read_into = _reader(stream)
        self.progress = progress
        self.total = 0
        self.done = 0  # bytes of the chunks handed out so far (not the line carried over)
        self.tail: tuple[int, int] = (0, 0)  # the unfinished line: start, stop
        self.eof = False

    def next(self) -> tuple[bytearray, int, int] | None:
        """(buffer, end, final) with whole lines in buffer[:end]; None at the end."""
        if self.eof:
            return None
        a, b = self.tail
        buf = self.buf
        have = b - a
        if have:
            buf[:have] = buf[a:b]  # each read lands after the bytes carried over
        size = self.size
        window = max(size, LONG_LINE)
        looked = 0  # buf[:looked] holds no newline
        while True:
            first = buf.find(b"\n", looked, have)
            if first > window or (first < 0 and have > window):
                # A line longer than LONG_LINE: matched in windows of that length, numbered as one
                # line. Each window starts a whole number of windows into the line, wherever the
                # reads fell, so a scan that started elsewhere in the file cuts it the same way.
                self.tail = (window, have)
                self.done = self.total - (have - window)
                return buf, window, 0
            if first >= 0:
                cut = buf.rfind(b"\n", first, have)
                self.tail = (cut + 1, have)
                self.done = self.total - (have - cut - 1)
                return buf, cut + 1, 0
            looked = have
            if len(buf) - have < size:
                buf.extend(bytes(len(buf)))
            n = self.read_into(buf, have, size)
            if not n:
                self.eof = True
                return (buf, have, 1) if have else None
            self.total += n
            if self.progress is not None:
                self.progress(self.total)
            have += n


def _reader(stream) -> Callable[[bytearray, int, int], int]:
    """read_into(buf, at, size): up to `size` bytes from the stream into buf[at:]; 0 at the end."""
    readinto = getattr(stream, "readinto", None)
    if readinto is not None:
        def read_into(buf: bytearray, at: int, size: int) -> int:
            with memoryview(buf) as view:
                return readinto(view[at : at + size]) or 0
        return read_into

    def read_copy(buf: bytearray, at: int, size: int) -> int:
        data = stream.read(size)
        buf[at : at + len(data)] = data
        return len(data)
    return read_copy


@record(frozen=True)
class FileSpan:
    """A stream whose unread bytes are those of a file descriptor from `at` to its end."""

    fd: int
    at: int
    seek: Callable[[int], object]  # leaves the stream at a file offset, as if read to there


def file_span(stream) -> FileSpan | None:
    """The stream as a regular file read by offsets; None unless it is a plain binary file (or a
    stream that says what file it reads, `file_span()`), never a decompressing reader: its
    offsets are not the file's."""
    span = getattr(stream, "file_span", None)
    if span is not None:
        return span()
    if type(stream) not in (io.BufferedReader, io.FileIO):
        return None
    try:
        fd = stream.fileno()
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return FileSpan(fd, stream.tell(), stream.seek)
    except (OSError, ValueError):
        return None


class FileRange:
    """Bytes `start` to `stop` (None: the end) of a file, read by offset: readinto() for Chunks."""

    def __init__(self, fd: int, start: int, stop: int | None):
        self.fd, self.at, self.stop = fd, start, stop

    def readinto(self, view) -> int:
        if self.stop is not None and len(view) > self.stop - self.at:
            view = view[: max(self.stop - self.at, 0)]
        n = os.preadv(self.fd, [view], self.at) if len(view) else 0
        self.at += n
        return n


def stream_size(stream) -> int | None:
    """Bytes left in a regular file, an in-memory stream or a stream that tells (`bytes_left()`,
    as logfiles.Peeked does); None for pipes and the unknown."""
    if isinstance(stream, io.BytesIO):
        # Not len(getbuffer()): that copies the bytes the stream still shares with its caller.
        try:
            at = stream.tell()
            end = stream.seek(0, io.SEEK_END)
            stream.seek(at)
        except (ValueError, OSError):
            return None
        return end - at
    bytes_left = getattr(stream, "bytes_left", None)
    if bytes_left is not None:
        return bytes_left()
    try:
        st = os.fstat(stream.fileno())
    except (AttributeError, ValueError, OSError, io.UnsupportedOperation):
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


_wanted = False  # the program asked for the tuning (tune_allocator)
_tuned = False


def tune_allocator() -> None:
    """Asks glibc to serve chunk-sized blocks from the heap and not to trim it, for the rest of
    the process, from the first chunk-sized read on: for a program's entry point to call
    before it scans. A second call, or one on a C library other than glibc, does nothing;
    without it a scan works, only slower.

    Each chunk makes a few short-lived blocks of about a chunk's size (the ANSI-stripped
    copy, a read() result). glibc serves blocks that large with a fresh mmap and returns them
    on free, so every chunk paid for faulting in a MiB of new pages (a third of a scan's CPU,
    as system time). Serving them from the heap and not trimming it reuses the same pages; the
    heap stays as large as the largest few blocks, which are bounded by the chunk size. This
    changes the allocator of the whole process, whatever else it runs: a library must not
    decide that for the program that imports it. The change itself waits for the first
    buffer of a chunk's size (`Chunks`): a log smaller than a chunk never needs it, and the
    ctypes it takes cost a small diagnosis 2 ms of its start."""
    global _wanted
    _wanted = True


def _tune() -> None:
    global _tuned
    _tuned = True
    if not os.confstr_names.get("CS_GNU_LIBC_VERSION") or not _glibc():
        return
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
        mallopt(-3, 64 << 20)  # M_MMAP_THRESHOLD
        mallopt(-1, 64 << 20)  # M_TRIM_THRESHOLD
    except (OSError, AttributeError):
        pass


def _glibc() -> bool:
    try:
        return bool(os.confstr("CS_GNU_LIBC_VERSION"))
    except (ValueError, OSError):
        return False
