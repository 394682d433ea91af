"""What one command diagnoses: logs and machine facts, each tagged with its node and rank, and
`LogTail`, a log read while it is still being written.

A command's `context.CommandContext` turns its --log values into log sources (`log_sources`:
files, folders of rank logs, globs, stdin) and its machine into facts; `pipeline.diagnose_sources`
takes them. Single-machine `diagnose` is the case of one log and one set of facts. Nothing here
reads a rule or diagnoses.
"""

from __future__ import annotations

import glob
import os
import re
import threading
from dataclasses import field, replace
from pathlib import Path
from typing import Iterable, Mapping

from troubleshoot.errors import TroubleshootError
from troubleshoot.records import record

# Files in a log folder that are not logs (snapshots, reports, archives).
NOT_LOGS = (".json", ".md", ".gz", ".zst", ".xz", ".bz2", ".zip", ".tar", ".pt", ".bin", ".safetensors")


@record(frozen=True)
class LogSource:
    name: str  # as shown to the user: a path, "stdin", "pasted log"
    path: str | None = None  # the file to read (None: stdin or pasted text)
    text: str | None = None  # pasted text
    node: str | None = None
    rank: int | None = None

    @property
    def stdin(self) -> bool:
        return self.path is None and self.text is None


@record(frozen=True)
class FactsSource:
    facts: Mapping | None
    origin: str  # "this machine", "snapshot FILE"
    node: str | None = None


@record
class Sources:
    logs: list[LogSource] = field(default_factory=list)
    facts: list[FactsSource] = field(default_factory=list)

    def facts_for(self, node: str | None) -> Mapping | None:
        """The facts of a log's node; one set of facts stands for every log (one machine)."""
        if len(self.facts) == 1 and (self.facts[0].node is None or node is None or self.facts[0].node == node):
            return self.facts[0].facts
        for f in self.facts:
            if node is not None and f.node == node:
                return f.facts
        return None

    @property
    def nodes(self) -> list[str]:
        seen = [f.node for f in self.facts] + [s.node for s in self.logs]
        return list(dict.fromkeys(n for n in seen if n))


def log_sources(specs: Iterable[str]) -> list[LogSource]:
    """Each `--log` value as log sources: '-' (stdin), a file, a folder (every log file under
    it) or a glob; node and rank come from the file names where they say them."""
    out: list[LogSource] = []
    for spec in specs:
        if spec == "-":
            out.append(LogSource("stdin"))
            continue
        p = Path(spec)
        if p.is_dir():
            files = sorted(f for f in p.rglob("*") if _is_log_file(f))
            if not files:
                raise TroubleshootError(f"cannot read log {spec}: no log files in this folder")
            out += [tagged(LogSource(str(f), str(f)), root=p) for f in files]
        elif not p.exists() and glob.has_magic(spec):
            files = sorted(Path(f) for f in glob.glob(spec, recursive=True) if Path(f).is_file())
            if not files:
                raise TroubleshootError(f"cannot read log {spec}: no file matches")
            out += [tagged(LogSource(str(f), str(f))) for f in files]
        else:
            check_readable(spec)
            out.append(tagged(LogSource(spec, spec)))
    seen: set[str] = set()
    unique = []
    for s in out:  # a file named twice (a folder and a glob over it) is read once
        key = os.path.realpath(s.path) if s.path else s.name
        if key not in seen:
            seen.add(key)
            unique.append(s)
    return unique


def check_readable(path: str) -> None:
    p = Path(path)
    try:
        if p.is_dir():
            raise TroubleshootError(f"cannot read log {path}: is a directory")
        # Checked without opening it: a FIFO or a pipe can be opened (read) only once.
        p.stat()
        if not os.access(p, os.R_OK):
            raise PermissionError(13, "Permission denied")
    except OSError as exc:
        raise TroubleshootError(f"cannot read log {path}: {exc.strerror or exc}") from None


def _is_log_file(f: Path) -> bool:
    return f.is_file() and not f.name.startswith(".") and not f.name.lower().endswith(NOT_LOGS)


# `troubleshoot run` under srun/torchrun: <stamp>-<job>.<node>.rank<N>.log
_RUN_NAME = re.compile(r"\.(?P<node>[A-Za-z0-9_-][A-Za-z0-9_.-]*?)\.rank(?P<rank>\d+)\.log$")
# torchrun --log-dir: <dir>/<run id>/attempt_<k>/<local rank>/{stdout,stderr}.log
_TORCHRUN = re.compile(r"attempt_\d+/(?P<rank>\d+)/std(?:out|err)\.log$")
# Slurm --output=slurm-%j-%t.out / %j_%t / %j.%t (job id, task id)
_SLURM_TASK = re.compile(r"slurm-\d+[-_.](?P<rank>\d+)\.(?:out|err|log)$")
_RANK_WORD = re.compile(r"(?i)(?:^|[^a-z])rank[-_.]?(?P<rank>\d+)(?:[^0-9]|$)")
_NODE_WORD = re.compile(r"(?i)(?:^|[._-])node[-_=](?P<node>[a-z0-9]+(?:-(?!rank)[a-z0-9]+)*)")


def tagged(src: LogSource, root: Path | None = None) -> LogSource:
    """Node and rank read from the file's name, where a known layout says them."""
    path = (src.path or "").replace(os.sep, "/")
    name = path.rsplit("/", 1)[-1]
    rank = node = None
    m = _RUN_NAME.search(name)
    if m:
        node, rank = m["node"], int(m["rank"])
    else:
        for pat, text in ((_TORCHRUN, path), (_SLURM_TASK, name), (_RANK_WORD, name)):
            m = pat.search(text)
            if m:
                rank = int(m["rank"])
                break
        m = _NODE_WORD.search(name)
        if m:
            node = m["node"]
    return replace(src, node=src.node or node, rank=src.rank if src.rank is not None else rank)


class LogTail:
    """A log that is still being written, read as it grows: the one follower of every front end.

    Polled (`new_lines`; `pipeline.diagnose_new_lines` diagnoses them): the complete lines the log gained since the last call;
    a log that shrank (truncated, rotated) starts over. `diagnose --follow`, the TUI's --follow
    and the live diagnoses of `run` poll.

    Streamed (`read`, `readinto`): the log read as the saved file would be read once the writer
    has ended: n bytes (len(b)), fewer only at the end of the finished file, so a scan of it sees
    the same bytes in the same chunks as `diagnose --log` on the saved log. Where the file would
    have ended it waits until the writer says it `appended` more, or `end`ed. `run` scans its
    job's log so while the job writes it. The writer (run's output pump) writes the log
    unbuffered and wakes the reader only once the bytes the reader waits for are there: a reader
    that is behind costs the writer nothing, and a job that prints nothing wakes nobody.
    """

    def __init__(self, path: str | Path, max_chunk: int = 64 << 20, stream: bool = False):
        self.path = Path(path)
        self.source = LogSource(str(path), str(path))
        self.offset = 0  # polled: where the next new lines start
        self.max_chunk = max_chunk
        # Streamed: opened at once, so that a log that cannot be read back fails before the job.
        self._f = open(self.path, "rb", buffering=0) if stream else None
        self._cond = threading.Condition()
        self._appended = 0  # bytes the writer has put in the file
        self._want = 0  # the reader waits until the file holds this many bytes
        self._pos = 0  # bytes read
        self._ended = False

    # ------------------------------------------------------------ polled

    def new_lines(self) -> bytes:
        try:
            with open(self.path, "rb") as f:
                if os.fstat(f.fileno()).st_size < self.offset:
                    self.offset = 0
                f.seek(self.offset)
                chunk = f.read(self.max_chunk)
        except OSError:
            return b""
        cut = chunk.rfind(b"\n") + 1
        self.offset += cut
        return chunk[:cut]

    def catch_up(self) -> None:
        """Take every complete line now in the log as read: a scan of the whole log is about to
        start, and the lines written after this point are the next new ones."""
        try:
            with open(self.path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                start = size
                while start > 0:
                    start = max(0, start - (1 << 16))
                    f.seek(start)
                    cut = f.read(size - start).rfind(b"\n")
                    if cut >= 0:
                        self.offset = start + cut + 1
                        return
                self.offset = 0
        except OSError:
            pass

    # ------------------------------------------------------------ streamed: the writer's side

    def appended(self, n: int) -> None:
        """The writer's n more bytes are in the file; called from its thread, after the write."""
        self._appended += n
        # Unlocked for the common case (nobody waits, or not for these bytes yet): a reader that
        # sets `_want` after this test sees the new `_appended` in its own, under the lock.
        if self._appended >= self._want > self._appended - n:
            with self._cond:
                self._cond.notify_all()

    def end(self) -> None:
        """Nothing more will be written, and everything written is in the file."""
        with self._cond:
            self._ended = True
            self._cond.notify_all()

    # ------------------------------------------------------------ streamed: the reader's side

    def readinto(self, buf) -> int:
        if self._f is None:
            self._f = open(self.path, "rb", buffering=0)
        with memoryview(buf) as outer, outer.cast("B") as view:
            got = 0
            while got < len(view):
                ended = self._ended  # read before the file: once set, the file is complete
                n = self._f.readinto(view[got:]) or 0
                got += n
                self._pos += n
                if n:
                    continue
                if ended:
                    break
                with self._cond:
                    self._want = self._pos + len(view) - got
                    self._cond.wait_for(lambda: self._ended or self._appended >= self._want)
            return got

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            parts = []
            while True:
                block = self.read(1 << 20)
                if not block:
                    return b"".join(parts)
                parts.append(block)
        buf = bytearray(n)
        got = self.readinto(buf)
        del buf[got:]
        return bytes(buf)

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
