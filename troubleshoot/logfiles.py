"""Reading logs for the pipeline: merged multi-rank logs split by their line labels, and the
timestamp in force at a given line.

A merged log is what `srun --label` (`3: ...`), torchrun `--tee`/`--redirects` (`[default3]:...`)
and PyTorch's C++ logging (`[rank3]:...`) write: every rank's lines interleaved, each carrying
its rank. Such a log is split into one spooled file per rank, with the label removed (so rules
see the line as the rank printed it) and each line's number in the original log kept.
"""

from __future__ import annotations

import io
import os
import stat
import sys
from typing import TYPE_CHECKING, BinaryIO

from troubleshoot import inputwatch
from troubleshoot.errors import TroubleshootError
from troubleshoot.lazyre import lazy
from troubleshoot.records import record

if TYPE_CHECKING:
    from array import array

    from troubleshoot.engine import timestamps

PEEK = 256 << 10
LABELLED_SHARE = 0.5  # of the first lines, how many must carry a rank label for the log to be split
LOOKBACK = 64 << 10  # how far before a line its timestamp is looked for
# NCCL_DEBUG lines start with the host: "gpu-07:15325:16199 [2] NCCL INFO ..."
# (Each line after its newline: a literal the regex engine finds fast, where `^` under re.M is
# tried at every byte.)
_NCCL_HOST = lazy(rb"\n([A-Za-z0-9][A-Za-z0-9_.-]{0,62}):\d+:\d+ \[\d+\] NCCL (?:INFO|WARN)")
_LABEL = lazy(rb"^ {0,6}(\d{1,6}): (?:\[(?:rank|default)(\d{1,6})\]: ?)?|^\[(?:rank|default)(\d{1,6})\]: ?")
# The lines _LABEL matches, and those bytes.strip() leaves nothing of, each after its newline.
_LABEL_LINE = lazy(rb"\n(?: {0,6}\d{1,6}: |\[(?:rank|default)\d{1,6}\]:)")
_BLANK_LINE = lazy(rb"\n[ \t\r\x0b\x0c]*(?=\n|\Z)")


@record
class RankStream:
    """One rank's lines of a merged log, spooled to `path`; `lines[i]` is the original line
    number of line i + 1."""

    rank: int | None
    path: str
    lines: array

    def original(self, line: int | None) -> int | None:
        if line is None or not 1 <= line <= len(self.lines):
            return line
        return self.lines[line - 1]


def label(line: bytes) -> tuple[int | None, int]:
    """(rank, length of the label) of one line; (None, 0) when unlabelled."""
    m = _LABEL.match(line)
    if m is None:
        return None, 0
    inner = m.group(2) or m.group(3)
    return int(inner if inner is not None else m.group(1)), m.end()


def is_labelled(head: bytes) -> bool:
    """Whether at least LABELLED_SHARE of the first 2000 non-blank lines carry a rank label.
    Counted by two regex passes over those lines (each led by a newline the regex engine finds
    fast), not a Python loop per line: a folder of a thousand rank logs asks this of every one."""
    end = len(head)
    if head.count(b"\n") >= 2000:
        end = -1
        for _ in range(2000):
            end = head.find(b"\n", end + 1)
    region = b"\n" + head[:end]  # each line after a newline: a literal the regex finds fast
    labelled = len(_LABEL_LINE.findall(region))
    if not labelled:
        return False  # most logs: no need to count their lines
    total = region.count(b"\n") - len(_BLANK_LINE.findall(region))
    if total > 1 and not head.endswith(b"\n"):
        # The last non-blank line, cut mid-line by the peek, is not counted.
        last = next(ln for ln in reversed(region.rsplit(b"\n", 2000)) if ln.strip())
        total -= 1
        labelled -= _LABEL.match(last) is not None
    return labelled >= LABELLED_SHARE * total


class Peeked:
    """A stream whose first bytes were already read (stdin cannot seek back)."""

    def __init__(self, head: bytes, rest: BinaryIO):
        self.head, self.rest = head, rest
        self.at = 0  # bytes of head already given out

    def read(self, n: int = -1) -> bytes:
        left = len(self.head) - self.at
        if left > 0:
            take = left if n < 0 or n >= left else n
            out = self.head[self.at : self.at + take] if take < len(self.head) else self.head
            self.at += take
            if self.at == len(self.head):
                self.head, self.at = b"", 0
            if n < 0:
                out += self.rest.read()
            return out
        return self.rest.read(n)

    def bytes_left(self) -> int | None:
        """What is left to read when the rest is a regular file, else None (a pipe): the
        scanner sizes its work by it (engine, threads)."""
        try:
            st = os.fstat(self.rest.fileno())
            if not stat.S_ISREG(st.st_mode):
                return None
            return len(self.head) - self.at + max(st.st_size - self.rest.tell(), 0)
        except (AttributeError, ValueError, OSError, io.UnsupportedOperation):
            return None

    def file_span(self):
        """(fd, offset, seek) when what is left to read is a plain file's bytes from offset to
        its end, for a scanner that reads by offset (see scanner.file_span); else None."""
        from troubleshoot.scan import FileSpan, file_span

        rest = file_span(self.rest)
        if rest is None:
            return None

        def seek(offset: int) -> None:
            self.head, self.at = b"", 0
            rest.seek(offset)
        return FileSpan(rest.fd, rest.at - (len(self.head) - self.at), seek)

    def readinto(self, buf) -> int:
        left = len(self.head) - self.at
        if left > 0:
            take = min(left, len(buf))
            buf[:take] = memoryview(self.head)[self.at : self.at + take]
            self.at += take
            if self.at == len(self.head):
                self.head, self.at = b"", 0  # let go of the read-ahead
            return take
        readinto = getattr(self.rest, "readinto", None)
        if readinto is None:
            data = self.rest.read(len(buf))
            buf[: len(data)] = data
            return len(data)
        return readinto(buf) or 0


def open_binary(path: str | None, name: str) -> BinaryIO:
    """The log's bytes: the file, or stdin (path None). A pipe, a FIFO or a device comes
    watched (inputwatch): its progress shown on a terminal, an endless input without text
    stopped. Closing what comes back never closes stdin."""
    if path is None:
        return inputwatch.watch(sys.stdin.buffer, name, owned=False)
    try:
        return inputwatch.watch(open(path, "rb"), name)
    except OSError as exc:
        raise TroubleshootError(f"cannot read log {name}: {exc.strerror or exc}") from None


def split(stream: BinaryIO, tmpdir: str) -> list[RankStream]:
    """Spool a merged log into one file per rank (unlabelled lines: rank None), in memory that
    does not grow with a line's length (labelsplit)."""
    from troubleshoot import labelsplit

    try:
        spools = labelsplit.split(stream, tmpdir, label)
    except OSError as exc:
        raise TroubleshootError(f"cannot split the merged log into ranks: {exc.strerror or exc}") from None
    return [RankStream(rank, path, lines) for rank, path, lines in spools]


def stamps_at(path: str, lines: list[int]) -> dict[int, timestamps.Stamp]:
    """For each line number, the timestamp on that line or the nearest one before it (within
    LOOKBACK bytes). One forward pass counting newlines, one short read per line asked."""
    from troubleshoot.engine import timestamps  # several logs' order only: a single log's start skips it

    wanted = sorted(set(ln for ln in lines if ln and ln > 0))
    found: dict[int, timestamps.Stamp] = {}
    if not wanted:
        return found
    ends: dict[int, int] = {}  # line -> byte offset just after it
    try:
        with open(path, "rb") as f:
            line, offset, i = 1, 0, 0
            while i < len(wanted):
                block = f.read(8 << 20)
                if not block:
                    break
                pos = 0
                while i < len(wanted):
                    need = wanted[i] - line  # newlines to pass before reaching the wanted line's end
                    nl = _nth_newline(block, pos, need)
                    if nl < 0:
                        line += block.count(b"\n", pos)
                        break
                    ends[wanted[i]] = offset + nl + 1
                    line, pos, i = wanted[i] + 1, nl + 1, i + 1
                offset += len(block)
            for ln, end in ends.items():
                start = max(0, end - LOOKBACK)
                f.seek(start)
                window = f.read(end - start).decode("utf-8", "replace").split("\n")
                if start:
                    window = window[1:]  # the first piece may be a partial line
                for text in reversed(window):
                    stamp = timestamps.find(text)
                    if stamp:
                        found[ln] = stamp
                        break
    except OSError:
        return found
    return found


def _nth_newline(block: bytes, pos: int, n: int) -> int:
    """Offset of the (n+1)-th newline at or after pos, or -1."""
    idx = pos - 1
    for _ in range(n + 1):
        idx = block.find(b"\n", idx + 1)
        if idx < 0:
            return -1
    return idx


def sniff_node(path: str) -> str | None:
    """The host a rank's log names in its NCCL_DEBUG lines (most often seen), if any."""
    try:
        with open(path, "rb") as f:
            head = f.read(PEEK)
    except OSError:
        return None
    return node_in(head)


def node_in(head: bytes) -> str | None:
    """sniff_node on bytes already read (a FIFO or a pipe cannot be opened a second time)."""
    if b"] NCCL " not in head:  # one memchr-fast search before the regex's pass over every line
        return None
    hosts = _NCCL_HOST.findall(b"\n" + head)
    if not hosts:
        return None
    # The most often seen; among as many, the first seen (a set's order changed from run to run).
    return max(dict.fromkeys(hosts), key=hosts.count).decode("ascii", "replace")
