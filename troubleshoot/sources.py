"""What one command diagnoses: logs and machine facts, each tagged with its node and rank, and
`LogTail`, a log read while it is still being written.

A command's `context.CommandContext` turns its --log values into log sources (`find_logs`:
files, folders of rank logs, globs, stdin) and its machine into facts; `pipeline.diagnose_sources`
takes them. Single-machine `diagnose` is the case of one log and one set of facts. Nothing here
reads a rule or diagnoses.

What is no log is left out, and said so (`Skipped`): by its name in a folder (a README, an
archive of older logs, a checkpoint), or by its first bytes (`not_text`: an ELF binary, a
compressed file, UTF-16, control bytes no text holds). A file's first bytes are read when it is
listed, a stream's (stdin, a FIFO) when the scan reads them first: never a second read of a log.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Iterable, Mapping

from troubleshoot.errors import TroubleshootError
from troubleshoot.lazyre import lazy
from troubleshoot.records import field, record, replace

# Files in a log folder that are not logs, by their names, and what each is. Snapshots and
# `run --format json` reports (None) live beside logs by design: passed over without a word.
NOT_LOGS: dict[str, str | None] = {
    ".json": None, ".md": "Markdown", ".gz": "gzip-compressed", ".zst": "zstd-compressed",
    ".xz": "xz-compressed", ".bz2": "bzip2-compressed", ".zip": "a zip archive", ".tar": "a tar archive",
    ".pt": "a PyTorch checkpoint", ".bin": "binary data (.bin)", ".safetensors": "a safetensors checkpoint",
}
# The tool that prints each compressed kind as text, for the hint that goes with it.
_UNPACK = {"gzip-compressed": "zcat", "zstd-compressed": "zstdcat", "xz-compressed": "xzcat",
           "bzip2-compressed": "bzcat"}
# A file's first bytes are judged (not_text): a few pages, read when the file is listed.
SNIFF = 8 << 10
# Formats whose first bytes say what they are; text never starts so.
_MAGIC = (
    (b"\x7fELF", "an ELF executable or library"), (b"\x1f\x8b", "gzip-compressed"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed"), (b"\xfd7zXZ\x00", "xz-compressed"),
    (b"PK\x03\x04", "a zip archive"), (b"PK\x05\x06", "a zip archive"), (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (b"!<arch>\n", "an ar archive (a static library)"), (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"), (b"GIF8", "a GIF image"), (b"%PDF-", "a PDF document"),
    (b"SQLite format 3\x00", "an SQLite database"), (b"\x89HDF\r\n\x1a\n", "an HDF5 file"),
    (b"\x93NUMPY", "a NumPy array"), (b"\xff\xfe\x00\x00", "UTF-32 text"), (b"\x00\x00\xfe\xff", "UTF-32 text"),
    (b"\x00troubleshoot-cache-", "a cache file of troubleshoot's"),  # usercache: text held in a binary
)
# UTF-16's byte order marks, and where the NUL of each ASCII character falls after them. A log in
# Latin-1 may start with the same two bytes (ÿþ): it is UTF-16 only where those NULs are.
_UTF16 = ((b"\xff\xfe", 1), (b"\xfe\xff", 0))
_BZIP2 = lazy(rb"BZh[1-9]1AY&SY")
_PICKLE = lazy(rb"\x80[\x02-\x05]")
# Control bytes that text does not hold, NUL among them; tab, line breaks, form feed, backspace,
# bell, ESC and shift-in/out (colours, progress bars, terminal captures) it does.
_NOT_TEXT = bytes(b for b in (*range(0x20), 0x7F) if b not in b"\t\n\x0b\x0c\r\x08\x07\x1b\x0e\x0f")
# A run of NUL bytes is a hole, not content: what a log truncated under its writer starts with
# (logrotate's copytruncate), or a block a crash left in it.
_NUL_RUN = lazy(rb"\x00{64,}")
_HOLE = bytes(64)
# Of the bytes judged, the share (percent) of _NOT_TEXT bytes from which they are binary: a
# binary holds them by the percent (ELF, bytecode, images: 1 to 60 %), a log holds none, or a
# few stray ones.
NOT_TEXT_PERCENT = 1
NOT_TEXT_MIN = 4


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
class Skipped:
    """An input that was no text log, and was left out: its name as shown, and what it is."""

    name: str
    why: str
    hint: str | None = None  # how to diagnose it all the same (a compressed log: unpacked into a pipe)


@record
class FoundLogs:
    """What some --log values name: the logs to read, and the files left out as no logs."""

    logs: list[LogSource] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)


@record(frozen=True)
class FactsSource:
    facts: Mapping | None
    origin: str  # "this machine", "snapshot FILE"
    node: str | None = None


@record
class Sources:
    logs: list[LogSource] = field(default_factory=list)
    facts: list[FactsSource] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)  # named by the --log values, left out as no logs

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


def _has_magic(spec: str) -> bool:
    """glob.has_magic, without loading glob for a plain path."""
    return any(c in spec for c in "*?[")


def find_logs(specs: Iterable[str]) -> FoundLogs:
    """Each `--log` value as log sources: '-' (stdin), a file, a folder (every log file under
    it) or a glob; node and rank come from the file names where they say them. A file that is
    no text log (by its first bytes; in a folder, by its name too) is left out, in `skipped`."""
    found = FoundLogs()
    for spec in specs:
        if spec == "-":
            found.logs.append(LogSource("stdin"))
            continue
        p = Path(spec)
        if p.is_dir():
            inside = folder_logs(p)
            if not inside.logs and not inside.skipped:
                raise TroubleshootError(f"cannot read log {spec}: no log files in this folder")
            found.logs += inside.logs
            found.skipped += inside.skipped
        elif not p.exists() and _has_magic(spec):
            import glob

            files = sorted(Path(f) for f in glob.glob(spec, recursive=True) if Path(f).is_file())
            if not files:
                raise TroubleshootError(f"cannot read log {spec}: no file matches")
            _sniffed((tagged(LogSource(str(f), str(f))) for f in files), found)
        else:
            check_readable(spec)
            _sniffed([tagged(LogSource(spec, spec))], found)
    seen: set[str] = set()
    unique = []
    for s in found.logs:  # a file named twice (a folder and a glob over it) is read once
        key = os.path.realpath(s.path) if s.path else s.name
        if key not in seen:
            seen.add(key)
            unique.append(s)
    found.logs = unique
    return found


def folder_logs(folder: Path) -> FoundLogs:
    """The log files under a folder, in name order; the others (by their names, then by their
    first bytes) left out, but for snapshots, reports and dot files, which are passed over."""
    found = FoundLogs()
    for f in sorted(folder.rglob("*")):
        if f.name.startswith(".") or not f.is_file():
            continue
        kind = _kind_by_name(f.name)
        if kind is None:
            _sniffed([tagged(LogSource(str(f), str(f)), root=folder)], found)
        elif kind:
            found.skipped.append(Skipped(str(f), kind, _hint(kind, str(f))))
    return found


def _kind_by_name(name: str) -> str | None:
    """What a file's name says it is when that is no log ('' for a snapshot or a report); None
    for a log."""
    lower = name.lower()
    for ending, kind in NOT_LOGS.items():
        if lower.endswith(ending):
            return kind or ""
    return None


def _sniffed(sources: Iterable[LogSource], found: FoundLogs) -> None:
    """Each source into `found.logs`, or into `found.skipped` when its first bytes are no text."""
    for src in sources:
        why = sniff_file(src.path) if src.path else None
        if why is None:
            found.logs.append(src)
        else:
            found.skipped.append(skipped_input(src, why))


def skipped_input(src: LogSource, why: str) -> Skipped:
    """A log source left out as no text log, with how to read it all the same where there is a way."""
    return Skipped(src.name, why, _hint(why, src.path or ""))


def sniff_file(path: str) -> str | None:
    """`not_text` of a regular file's first SNIFF bytes. None for anything else (a FIFO or a
    device is judged as it is read: it cannot be opened twice) and for a file that cannot be
    read (its read says why)."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            return None  # not opened: opening a FIFO waits for its writer
        with open(path, "rb", buffering=0) as f:
            head = f.read(SNIFF)
        whole = st.st_size <= len(head)
    except OSError:
        return None
    return not_text(head, whole)


def not_text(head: bytes, whole: bool = False) -> str | None:
    """Why an input whose first bytes are `head` (all of it when `whole`) is no text log, or
    None when it reads as text. Only the first SNIFF bytes are judged: a binary says so in its
    first page, and a big log is not read twice. A log with stray control bytes or invalid UTF-8
    (Latin-1, a cut multi-byte character) is text."""
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    for bom, nul_at in _UTF16:
        if head.startswith(bom):
            units = head[2 + nul_at:SNIFF:2]
            if units and units.count(0) * 4 >= len(units):
                return "UTF-16 text"
    if head[:3] == b"BZh" and _BZIP2.match(head):
        return "bzip2-compressed"
    if head[:1] == b"\x80" and _PICKLE.match(head):
        return "a Python pickle"
    if head[257:262] == b"ustar":
        return "a tar archive"
    judged = head[:SNIFF]
    if _HOLE in judged:  # one fast search first: the regex would try every byte of every log
        judged = _NUL_RUN.sub(b"", judged)
    if not judged:
        # Only holes so far: more may follow (text after a truncation), unless this is all.
        return "nothing but NUL bytes" if whole and head and not head.strip(b"\x00") else None
    odd = len(judged) - len(judged.translate(None, _NOT_TEXT))
    if odd >= NOT_TEXT_MIN and odd * 100 >= NOT_TEXT_PERCENT * len(judged):
        return f"binary data: {_percent(odd, len(judged))} of its first bytes are control bytes"
    return None


def _percent(part: int, whole: int) -> str:
    share = 100 * part / whole
    return f"{share:.0f}%" if share >= 10 else f"{share:.1f}%"


def _hint(kind: str, path: str) -> str | None:
    """How to diagnose a compressed or UTF-16 log all the same: a command to copy."""
    tool = _UNPACK.get(kind) or ("iconv -f UTF-16 -t UTF-8" if kind == "UTF-16 text" else None)
    if tool is None or not path:
        return None
    import shlex

    return f"{tool} {shlex.quote(path)} | troubleshoot diagnose"


MAX_NAMED = 5  # files named in one note about inputs left out; the others are counted


def skipped_note(skipped: list[Skipped], one: str = "a text log", many: str = "text logs") -> str:
    """One line naming what was left out, and why: each was not `one` (of several: `many`)."""
    if len(skipped) == 1:
        hint = f" (to diagnose it all the same: {skipped[0].hint})" if skipped[0].hint else ""
        return f"{skipped[0].name}: not {one} ({skipped[0].why}); left out{hint}"
    return f"{len(skipped)} files are not {many} and were left out: {_named(skipped)}"


def _named(skipped: list[Skipped]) -> str:
    named = "; ".join(f"{s.name} ({s.why})" for s in skipped[:MAX_NAMED])
    return named + (f"; and {len(skipped) - MAX_NAMED} more" if len(skipped) > MAX_NAMED else "")


def nothing_to_diagnose(skipped: list[Skipped]) -> str:
    """The error when every input given was left out."""
    if len(skipped) == 1:
        hint = f"; to diagnose it all the same: {skipped[0].hint}" if skipped[0].hint else ""
        return f"nothing to diagnose: {skipped[0].name} is not a text log ({skipped[0].why}){hint}"
    return f"nothing to diagnose: none of the {len(skipped)} files given is a text log: {_named(skipped)}"


def empty_note(names: list[str]) -> str:
    """One line naming the logs that held nothing."""
    if len(names) == 1:
        return f"{names[0]} is empty: there was nothing in it to diagnose"
    named = ", ".join(names[:MAX_NAMED]) + (f" and {len(names) - MAX_NAMED} more" if len(names) > MAX_NAMED else "")
    return f"{len(names)} logs are empty, with nothing in them to diagnose: {named}"


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


# `troubleshoot run` under srun/torchrun: <stamp>-<job>.<node>.rank<N>.log
_RUN_NAME = lazy(r"\.(?P<node>[A-Za-z0-9_-][A-Za-z0-9_.-]*?)\.rank(?P<rank>\d+)\.log$")
# torchrun --log-dir: <dir>/<run id>/attempt_<k>/<local rank>/{stdout,stderr}.log
_TORCHRUN = lazy(r"attempt_\d+/(?P<rank>\d+)/std(?:out|err)\.log$")
# Slurm --output=slurm-%j-%t.out / %j_%t / %j.%t (job id, task id)
_SLURM_TASK = lazy(r"slurm-\d+[-_.](?P<rank>\d+)\.(?:out|err|log)$")
_RANK_WORD = lazy(r"(?i)(?:^|[^a-z])rank[-_.]?(?P<rank>\d+)(?:[^0-9]|$)")
_NODE_WORD = lazy(r"(?i)(?:^|[._-])node[-_=](?P<node>[a-z0-9]+(?:-(?!rank)[a-z0-9]+)*)")


def tagged(src: LogSource, root: Path | None = None) -> LogSource:
    """Node and rank read from the file's name, where a known layout says them."""
    path = (src.path or "").replace(os.sep, "/")
    name = path.rsplit("/", 1)[-1]
    folded = name.casefold()
    rank = node = None
    m = _RUN_NAME.search(name) if ".rank" in name else None
    if m:
        node, rank = m["node"], int(m["rank"])
    else:
        # Each layout's word first: most names hold none, and their regexes are then never compiled.
        for pat, text, word in ((_TORCHRUN, path, "attempt_" in path), (_SLURM_TASK, name, "slurm-" in name),
                                (_RANK_WORD, name, "rank" in folded)):
            m = pat.search(text) if word else None
            if m:
                rank = int(m["rank"])
                break
        m = _NODE_WORD.search(name) if "node" in folded else None
        if m:
            node = m["node"]
    return replace(src, node=src.node or node, rank=src.rank if src.rank is not None else rank)


class LogTail:
    """A log that is still being written, read as it grows: the one follower of every front end.

    Polled (`new_lines`; `run.verdict.Verdict.so_far` diagnoses them): the complete lines the log gained since the last call;
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
        import threading  # a followed log only

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


# A log file written within this long is taken as this machine's: the job ran here. An older
# file (copied from a node, kept from last week) is judged by its own facts alone.
HERE_WITHIN_S = 24 * 3600


def from_here(logs: Iterable[LogSource], stdin_is_terminal: bool, now: float) -> tuple[bool, str]:
    """Whether this machine's facts describe the machine these logs came from, and why (words for
    the user). Here: a pipe, FIFO or device (a job streaming now), a file written within
    HERE_WITHIN_S. Not here: text pasted or typed in, an older file."""
    logs = list(logs)
    if not logs:
        return True, "no log"
    for src in logs:
        if src.text is not None:
            return False, "the log was pasted"
        if src.stdin:
            if stdin_is_terminal:
                return False, "the log was typed or pasted into the terminal"
            return True, "the log was piped in"
    newest = None
    for src in logs:
        try:
            st = os.stat(src.path)
        except OSError:
            return True, "the log could not be dated"
        if not stat.S_ISREG(st.st_mode):
            return True, "the log is streamed from a pipe or a device"
        newest = st.st_mtime if newest is None else max(newest, st.st_mtime)
    age = now - (newest or now)
    if age <= HERE_WITHIN_S:
        return True, "the log was written in the last day"
    return False, f"the log was last written {_age(age)} ago"


def _age(seconds: float) -> str:
    days = seconds / 86400
    if days >= 2:
        return f"{days:.0f} days"
    return f"{seconds / 3600:.0f} hours"
