"""A support bundle: one .tar.gz to attach to a ticket, holding what a person needs to help
with a failed job: the machine's snapshot, the logs, the diagnoses (JSON and the Markdown
report), the history of applied fixes, the program's version, and a manifest that lists every
member, what was redacted in it and what was cut from it.

Redaction (on unless asked otherwise) uses the snapshot's rules with one key for the whole
bundle (redact.Redactor): a host named in a log, in the snapshot and in the report has one
placeholder everywhere. Logs are cut to a size a ticket takes: the start of each (how the job
was launched: versions, configuration) and the rest from its end (where it failed), at line
breaks, with a line in the log where the middle was left out.

The archive is written to an unguessable temporary file beside its destination (mode 0600:
logs hold tokens and paths), then published whole: linked to its name, which never replaces a
file that is there, or renamed over it when asked to replace one.
"""

from __future__ import annotations

import errno
import gzip
import hashlib
import io
import json
import os
import platform
import re
import secrets
import tarfile
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from troubleshoot import __version__
from troubleshoot.errors import TroubleshootError
from troubleshoot.inputwatch import human_size
from troubleshoot.records import field, record
from troubleshoot.redact import WHAT, Redactor, counts

if TYPE_CHECKING:
    from troubleshoot.model import Diagnosis

SCHEMA = 1
TOP = "troubleshoot-bundle"  # every member lies in this folder: extracting spills nothing
# A ticket takes tens of MB; text compresses about tenfold. One log keeps 10 MiB, all logs
# together 64 MiB (a folder of a thousand rank logs keeps a share of each, never less than
# 256 KiB), so that a bundle stays near 10 MB compressed and redaction takes seconds, not minutes.
MAX_LOG_BYTES = 10 << 20
TOTAL_LOG_BYTES = 64 << 20
MIN_LOG_BYTES = 256 << 10
HEAD_SHARE = 10  # a cut log keeps its first tenth from the start, the rest from the end
_CHUNK = 8 << 20
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


@record(frozen=True)
class LogFile:
    name: str  # as the user named it (shown in the manifest, redacted)
    path: str  # a regular file


@record(frozen=True)
class Contents:
    """What goes into a bundle, gathered by the command (cli_bundle) through its context."""

    logs: tuple[LogFile, ...]
    facts: dict | None  # the machine's snapshot; None with --no-probe
    facts_origin: str | None  # "this machine", "snapshot FILE"
    diagnoses: tuple[Diagnosis, ...]
    meta: Mapping[str, Any]  # the JSON report's top-level keys besides the diagnoses (as `diagnose`)
    source: str  # what the Markdown report names as its source
    history: tuple[tuple[str, Any], ...]  # fixes.journal.entries(): (id, entry or why it is unreadable)
    names: Mapping[str, Any] | None = None  # the host area whose names redaction replaces


@record(frozen=True)
class Cut:
    """What was left out of a log: its middle, between the kept start and end."""

    original_bytes: int
    head_bytes: int
    tail_bytes: int
    left_out_bytes: int
    first_line: int  # the first line left out (1-based)
    last_line: int  # the last one

    def as_dict(self) -> dict:
        return {"original_bytes": self.original_bytes, "kept_from_start_bytes": self.head_bytes,
                "kept_from_end_bytes": self.tail_bytes, "left_out_bytes": self.left_out_bytes,
                "left_out_lines": [self.first_line, self.last_line]}


@record
class Member:
    name: str  # relative to TOP
    data: bytes
    what: str
    redacted: dict[str, int] | None = None  # placeholders by kind; None: not redacted
    extra: dict[str, Any] = field(default_factory=dict)

    def entry(self) -> dict:
        out = {"name": f"{TOP}/{self.name}", "what": self.what, "bytes": len(self.data),
               "sha256": hashlib.sha256(self.data).hexdigest(), "redacted": self.redacted}
        out.update(self.extra)
        return out


@record(frozen=True)
class Written:
    path: Path
    members: tuple[str, ...]  # archive names, manifest last
    size: int  # of the archive, in bytes


def log_cap(max_each: int | None, count: int) -> int | None:
    """The bytes each of `count` logs keeps: `max_each` (None: whole logs), shared out so that
    all of them stay within TOTAL_LOG_BYTES unless that leaves one less than MIN_LOG_BYTES."""
    if max_each is None or count == 0:
        return max_each
    return min(max_each, max(TOTAL_LOG_BYTES // count, MIN_LOG_BYTES))


def write(contents: Contents, out: Path, *, redact: bool = True, force: bool = False,
          max_log_bytes: int | None = MAX_LOG_BYTES) -> Written:
    """Pack `contents` into the .tar.gz `out` (see the module); a one-line TroubleshootError
    when it cannot be written or `out` exists and `force` is not given."""
    red = _redactor(contents) if redact else None
    members = [_version()]
    if contents.facts is not None:
        members.append(_snapshot(contents, red))
    cap = log_cap(max_log_bytes, len(contents.logs))
    members += [_log(i, log, cap, red) for i, log in enumerate(contents.logs, 1)]
    members += [_diagnoses_json(contents, red), _report(contents, red), _history(contents, red)]
    members.append(_manifest(contents, members, red, cap))
    return _publish(members, out, force)


def _redactor(contents: Contents) -> Redactor:
    names = contents.names
    if names is None and contents.facts is not None:
        names = contents.facts.get("host")
    return Redactor(names if isinstance(names, Mapping) else None)


def _text_member(name: str, text: str, what: str, red: Redactor | None, **extra) -> Member:
    if red is not None:
        text = red.text(text)
    return Member(name, text.encode("utf-8", "surrogateescape"), what,
                  counts(text) if red is not None else None, dict(extra))


def _version() -> Member:
    text = f"troubleshoot {__version__}\nPython {platform.python_version()} on {platform.system()} " \
           f"{platform.release()} {platform.machine()}\n"
    return Member("version.txt", text.encode(), "the versions of troubleshoot and Python that made the bundle")


def _snapshot(contents: Contents, red: Redactor | None) -> Member:
    facts = contents.facts or {}
    origin = contents.facts_origin or "machine facts"
    what = f"the machine's facts ({red.text(origin) if red is not None else origin})"
    if red is not None and facts.get("redacted") is not True:  # a redacted snapshot is not redacted twice
        facts = red.facts(facts)
    text = json.dumps(facts, indent=2, default=str) + "\n"
    return Member("snapshot.json", text.encode("utf-8", "surrogateescape"), what,
                  counts(text) if red is not None else None)


def _log(index: int, log: LogFile, cap: int | None, red: Redactor | None) -> Member:
    data, cut = read_capped(log.path, cap)
    text = data.decode("utf-8", "surrogateescape")  # bytes that are no UTF-8 come back as they were
    name = red.text(log.name) if red is not None else log.name
    base = _UNSAFE_NAME.sub("_", os.path.basename(name)).strip("._")[:100] or "log"
    what = f"log {name}" + (", cut to its start and end" if cut else "")
    return _text_member(f"logs/{index:03d}-{base}", text, what, red, source=name,
                        cut=cut.as_dict() if cut else None)


def read_capped(path: str, cap: int | None) -> tuple[bytes, Cut | None]:
    """A log's bytes, or (over `cap`) its start and end at line breaks with a line between
    them that says what was left out."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size  # a log still growing is read as it was now
            if cap is None or size <= cap:
                return f.read(size), None
            head = f.read(cap // HEAD_SHARE)
            head = head[:head.rfind(b"\n") + 1] or head  # a first line longer than the share is cut
            f.seek(size - (cap - len(head)))
            tail = f.read(cap - len(head))
            nl = tail.find(b"\n")
            tail = tail[nl + 1:] if 0 <= nl < len(tail) - 1 else tail
            start, end = len(head), size - len(tail)
            lines = _newlines(f, start, end)
    except OSError as exc:
        raise TroubleshootError(f"cannot read log {path}: {exc.strerror or exc}") from None
    first = head.count(b"\n") + 1
    cut = Cut(size, len(head), len(tail), end - start, first, first + max(lines, 1) - 1)
    note = (f"[troubleshoot bundle: lines {cut.first_line}-{cut.last_line} ({human_size(cut.left_out_bytes)}) "
            f"left out here; kept the first {human_size(cut.head_bytes)} and the last {human_size(cut.tail_bytes)} "
            f"of {human_size(size)}]\n")
    sep = b"" if head.endswith(b"\n") else b"\n"
    return head + sep + note.encode() + tail, cut


def _newlines(f, start: int, end: int) -> int:
    f.seek(start)
    n, left = 0, end - start
    while left > 0:
        chunk = f.read(min(_CHUNK, left))
        if not chunk:
            break
        n += chunk.count(b"\n")
        left -= len(chunk)
    return n


def _diagnoses_json(contents: Contents, red: Redactor | None) -> Member:
    from troubleshoot.report import jsonfmt

    doc = json.loads(jsonfmt.render(contents.diagnoses, dict(contents.meta)))
    if red is not None:
        doc = _with_spans_checked(doc, red.data(doc))
    text = json.dumps(doc, indent=2) + "\n"
    return Member("diagnoses.json", text.encode("utf-8", "surrogateescape"),
                  "the diagnoses, as `troubleshoot diagnose --format json` writes them (docs/json-output.md)",
                  counts(text) if red is not None else None)


def _with_spans_checked(doc: dict, redacted: dict) -> dict:
    """A log line that redaction changed keeps no match span: its offsets no longer hold."""
    for d, r in zip(doc.get("diagnoses") or (), redacted.get("diagnoses") or ()):
        for e, re_ in zip(d.get("evidence") or (), r.get("evidence") or ()):
            if e.get("text") != re_.get("text") and "span" in re_:
                re_["span"] = None
    return redacted


def _report(contents: Contents, red: Redactor | None) -> Member:
    from troubleshoot.report import markdown

    diagnoses = red.diagnoses(contents.diagnoses) if red is not None else list(contents.diagnoses)
    source = red.text(contents.source) if red is not None else contents.source
    text = markdown.render(diagnoses, source)
    return Member("report.md", text.encode("utf-8", "surrogateescape"),
                  "the diagnoses, as `troubleshoot diagnose --format markdown` writes them",
                  counts(text) if red is not None else None)


def _history(contents: Contents, red: Redactor | None) -> Member:
    from troubleshoot.report.historyview import history_view

    records = []
    for eid, entry in contents.history:
        rec = dict(history_view(eid, entry).record)
        if not isinstance(entry, str):
            rec["steps"] = entry.data.get("steps")
        records.append(rec)
    doc: Any = {"schema": 1, "history": records}
    if red is not None:
        doc = red.data(doc)
    text = json.dumps(doc, indent=2, default=str) + "\n"
    return Member("history.json", text.encode("utf-8", "surrogateescape"),
                  "the fixes applied on this machine, newest first, with their steps (`troubleshoot history`); "
                  "no backups of the files they changed", counts(text) if red is not None else None)


def _manifest(contents: Contents, members: Sequence[Member], red: Redactor | None, cap: int | None) -> Member:
    origin = contents.facts_origin
    doc = {
        "schema": SCHEMA,
        "troubleshoot": __version__,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "facts": (red.text(origin) if red is not None and origin else origin),
        "redaction": ({"enabled": True, "replaced": list(WHAT),
                       "placeholders": "<kind-12345678>: one per value, the same in every member of this bundle; "
                                       "`redacted` in each member counts them by kind"}
                      if red is not None else {"enabled": False}),
        "logs": {"max_bytes_each": cap,
                 "kept": "whole when smaller; else the start (a tenth) and the end, at line breaks"},
        "members": [m.entry() for m in members]
                   + [{"name": f"{TOP}/manifest.json", "what": "this list of the members"}],
    }
    return Member("manifest.json", (json.dumps(doc, indent=2) + "\n").encode(), "this list of the members")


def _publish(members: Sequence[Member], out: Path, force: bool) -> Written:
    folder = out.parent if str(out.parent) else Path(".")
    tmp = folder / f".{out.name[:200]}.{secrets.token_hex(8)}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise TroubleshootError(f"cannot write {out}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as raw:
            os.fchmod(raw.fileno(), 0o600)  # whatever the umask
            _archive(raw, members)
            raw.flush()
            os.fsync(raw.fileno())
        _place(tmp, out, force)
    except BaseException as exc:
        _unlink(tmp)
        if isinstance(exc, OSError):
            raise TroubleshootError(f"cannot write {out}: {exc.strerror or exc}") from None
        raise
    size = out.stat().st_size
    return Written(out, tuple(f"{TOP}/{m.name}" for m in members), size)


def _archive(raw, members: Sequence[Member]) -> None:
    now = time.time()
    # no file name in the gzip header: the temporary name would show there
    with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=int(now)) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for m in members:
            info = tarfile.TarInfo(f"{TOP}/{m.name}")
            info.size, info.mtime, info.mode = len(m.data), int(now), 0o600
            info.uid = info.gid = 0
            info.uname = info.gname = ""  # the archive names no local account
            tar.addfile(info, io.BytesIO(m.data))


def _place(tmp: Path, out: Path, force: bool) -> None:
    """The finished archive under its name: replacing a file only when `force`."""
    if force:
        os.replace(tmp, out)
        return
    try:
        os.link(tmp, out)  # fails when the name is taken, whatever appeared there since the check
    except FileExistsError:
        raise TroubleshootError(f"{out} already exists; give --force to replace it") from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
            raise
        if os.path.lexists(out):  # a file system without hard links: checked, then renamed
            raise TroubleshootError(f"{out} already exists; give --force to replace it") from None
        os.rename(tmp, out)
        return
    _unlink(tmp)


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
