"""The journal of applied fixes: one folder per application, with backups of every file.

$XDG_STATE_HOME/troubleshoot/journal/<id>/journal.json (default ~/.local/state/...), written
atomically after every step, so that after a crash it still tells what was done; backups/N
holds file N's bytes from before the change and after/N the bytes the fix left (so that undo
can tell whether the file changed since). A journal that does not parse or does not match the
schema below is reported and never trusted for undo; only ids of folders directly in the state
directory are accepted, and only when this user owns the folder and its files and no one else
may write them (the rule the caches follow): undo writes a journal's bytes wherever it says, so
one planted by another user must never be read (`sudo -E troubleshoot undo`).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import secrets
import stat
import time
from datetime import datetime, timezone
from pathlib import Path

from troubleshoot import usercache
from troubleshoot.errors import TroubleshootError
from troubleshoot.safeio import atomic_write, locked_dir, locked_fd

SCHEMA = 1
ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,199}$")
STATUSES = {"applying", "applied", "failed", "verify-failed", "undone"}
STEP_KINDS = {"write", "merge", "line", "command", "env", "advice"}
STEP_STATUSES = {"pending", "done", "failed", "unchanged", "skipped", "shown"}
REL_RE = re.compile(r"^(?:backups|after)/[0-9]{1,6}$")
FILE_STEP_KINDS = ("write", "merge", "line")
TRUST_RULE = "only journals this user owns, that no one else may write, are used"


class UntrustedJournal(TroubleshootError):
    """A journal, or a file in it, that another user could have written: never read."""


def state_dir() -> Path:
    from troubleshoot.userstate import state_dir

    return state_dir("journal")


class Entry:
    """One application of a plan; `data` is what journal.json holds."""

    def __init__(self, folder: Path, data: dict):
        self.folder = folder
        self.data = data

    @property
    def id(self) -> str:
        return self.data["id"]

    @classmethod
    def create(cls, fixer: str, params: dict, root: str | None, extra: dict) -> "Entry":
        now = datetime.now(timezone.utc)
        eid = f"{now.strftime('%Y%m%d-%H%M%S')}-{fixer}-{secrets.token_hex(2)}"
        folder = state_dir() / eid
        folder.parent.mkdir(parents=True, exist_ok=True)
        folder.mkdir(mode=0o700)  # private whatever the umask: undo trusts nothing else
        (folder / "backups").mkdir(mode=0o700)
        (folder / "after").mkdir(mode=0o700)
        e = cls(folder, {"schema": SCHEMA, "id": eid, "fixer": fixer, "params": params, "root": root,
                         "started": now.isoformat(timespec="microseconds"), "status": "applying", "steps": [],
                         **extra})
        e.save()
        return e

    def save(self) -> None:
        atomic_write(self.folder / "journal.json", (json.dumps(self.data, indent=2, default=str) + "\n").encode(),
                     0o600)

    def backup(self, index: int, data: bytes, kind: str = "backups") -> str:
        rel = f"{kind}/{index}"
        atomic_write(self.folder / rel, data, 0o600)
        return rel

    def backup_bytes(self, rel: str) -> bytes:
        if not REL_RE.match(rel):
            raise TroubleshootError(f"journal {self.id}: bad backup name {rel!r}")
        return read_private(self.folder / rel)


def read_private(path: Path) -> bytes:
    """A journal file's bytes, opened without following a link and checked as opened (so it
    cannot be swapped between the check and the read); UntrustedJournal when another user
    could have written it."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        why = usercache.untrusted_because(st) or (None if stat.S_ISREG(st.st_mode) else "is not a regular file")
        if why:
            raise UntrustedJournal(f"journal file {path} {why}; not trusting it ({TRUST_RULE})")
        return f.read()


def _check_folders(folder: Path, eid: str) -> None:
    """The journal's folder and every backup in it pass the trust rule (a missing folder: no
    such journal). Each file is checked again as it is opened."""
    try:
        st = os.stat(folder, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        raise TroubleshootError(f"no applied fix with id {eid!r} (see `troubleshoot history`)") from None
    if not stat.S_ISDIR(st.st_mode):
        raise TroubleshootError(f"no applied fix with id {eid!r} (see `troubleshoot history`)")
    _trust(folder, usercache.untrusted_because(st))
    for sub in (folder / "backups", folder / "after"):
        if not os.path.lexists(sub):
            continue
        _trust(sub, usercache.untrusted(sub))
        try:
            names = os.listdir(sub)
        except OSError as exc:
            raise UntrustedJournal(f"journal {sub} cannot be read ({exc.strerror or exc}); not trusting it") from None
        for name in names:
            _trust(sub / name, usercache.untrusted(sub / name))


def _trust(where: Path, why: str | None) -> None:
    if why:
        raise UntrustedJournal(f"journal {where} {why}; not trusting it ({TRUST_RULE})")


def check_id(eid: str) -> Path:
    """The folder of journal `eid`, which must be a plain folder directly in the state directory."""
    if not isinstance(eid, str) or not ID_RE.match(eid):
        raise TroubleshootError(f"{eid!r} is not a fix id (see `troubleshoot history`)")
    folder = state_dir() / eid
    if folder.is_symlink():
        raise TroubleshootError(f"journal {folder} is a symlink; not trusting it")
    return folder


@contextlib.contextmanager
def locked():
    """The journal lock: one apply's bookkeeping or one undo at a time."""
    with locked_dir(state_dir()):
        yield


def validate(data, folder_name: str) -> list[str]:
    """What is wrong with a journal's content (empty when it can be trusted)."""
    if not isinstance(data, dict):
        return ["not a JSON object"]
    bad = []
    if data.get("schema") != SCHEMA:
        bad.append(f"schema is not {SCHEMA}")
    if data.get("id") != folder_name:
        bad.append("its id is not its folder's name")
    for key in ("fixer", "started"):
        if not isinstance(data.get(key), str):
            bad.append(f"{key!r} is not text")
    if data.get("status") not in STATUSES:
        bad.append(f"unknown status {data.get('status')!r}")
    root = data.get("root")
    if root is not None and (not isinstance(root, str) or not root.startswith("/")):
        bad.append("'root' is not an absolute path")
    steps = data.get("steps")
    if not isinstance(steps, list):
        return bad + ["'steps' is not a list"]
    for n, st in enumerate(steps):
        where = f"step {n + 1}"
        if not isinstance(st, dict):
            bad.append(f"{where} is not an object")
            continue
        kind, status = st.get("kind"), st.get("status")
        if kind not in STEP_KINDS:
            bad.append(f"{where}: unknown kind {kind!r}")
        if status not in STEP_STATUSES:
            bad.append(f"{where}: unknown status {status!r}")
        if kind in ("write", "merge", "line") and status in ("pending", "done", "failed"):
            target = st.get("target")
            if not isinstance(target, str) or not target.startswith("/") or "\x00" in target \
                    or ".." in target.split("/"):
                bad.append(f"{where}: 'target' is not an absolute path")
            elif isinstance(root, str) and root and not (target == root or target.startswith(root.rstrip("/") + "/")):
                bad.append(f"{where}: target {target} is outside the root {root}")
            if not isinstance(st.get("existed"), bool):
                bad.append(f"{where}: 'existed' is not true or false")
            for key in ("backup", "after"):
                if key in st and not (isinstance(st[key], str) and REL_RE.match(st[key])):
                    bad.append(f"{where}: bad {key!r}")
            if "seq" in st and (not isinstance(st["seq"], int) or isinstance(st["seq"], bool)):
                bad.append(f"{where}: 'seq' is not a whole number")
            if "wrote" in st and not isinstance(st["wrote"], bool):
                bad.append(f"{where}: 'wrote' is not true or false")
        if kind == "command" and status == "done":
            for key in ("argv", "undo"):
                v = st.get(key)
                if not (v is None and key == "undo") and not (
                        isinstance(v, list) and v and all(isinstance(a, str) for a in v)):
                    bad.append(f"{where}: {key!r} is not a list of strings")
    return bad


def load(eid: str) -> Entry:
    folder = check_id(eid)
    _check_folders(folder, eid)
    path = folder / "journal.json"
    try:
        data = json.loads(read_private(path).decode("utf-8"))
    except (FileNotFoundError, NotADirectoryError):
        raise TroubleshootError(f"no applied fix with id {eid!r} (see `troubleshoot history`)") from None
    except (ValueError, UnicodeDecodeError, RecursionError, OSError) as exc:
        if isinstance(exc, OSError) and exc.errno == errno.ELOOP:
            exc = ValueError("it is a symlink")
        raise TroubleshootError(f"journal {path} is corrupt ({exc}); not trusting it: restore by hand from "
                                f"{folder / 'backups'}") from None
    bad = validate(data, eid)
    if bad:
        raise TroubleshootError(f"journal {path} is not a valid troubleshoot journal ({'; '.join(bad[:3])}); "
                                f"not trusting it: restore by hand from {folder / 'backups'}")
    return Entry(folder, data)


def entries() -> list[tuple[str, Entry | str]]:
    """(id, entry) newest first by the time each was started (not by id); a corrupt journal is
    listed with its error instead, by its folder's time."""
    d = state_dir()
    if not d.is_dir():
        return []
    out = []
    for folder in (p for p in d.iterdir() if p.is_dir() and not p.is_symlink()):
        try:
            e = load(folder.name)
            out.append((_when(e.data["started"], folder), folder.name, e))
        except TroubleshootError as exc:
            out.append((_when(None, folder), folder.name, str(exc)))
    out.sort(key=lambda t: (t[0], t[1]), reverse=True)
    return [(eid, e) for _, eid, e in out]


def _when(started: str | None, folder: Path) -> float:
    try:
        t = datetime.fromisoformat(started)  # type: ignore[arg-type]
        return (t if t.tzinfo else t.replace(tzinfo=timezone.utc)).timestamp()
    except (TypeError, ValueError):
        try:
            return folder.stat().st_mtime
        except OSError:
            return 0.0


def step_wrote(rec: dict) -> bool:
    """Whether a file step may have changed its file. Done: yes. Failed: no, it says so with
    "wrote": false (a file step fails before or in its write, and a write replaces the file
    whole or not at all); journals from before "wrote" was recorded count a failed step that
    saved its "after" copy. Cut short (pending): only when it saved its "after" copy, which
    happens just before the write."""
    status = rec.get("status")
    if status == "done":
        return True
    return status in ("pending", "failed") and "after" in rec and rec.get("wrote", True) is not False


def last_written(e: Entry) -> int:
    """The sequence number of the entry's last file write (0: it wrote none that was numbered)."""
    return max((r["seq"] for r in e.data["steps"] if r.get("kind") in FILE_STEP_KINDS and step_wrote(r)
                and isinstance(r.get("seq"), int)), default=0)


def latest_to_undo() -> Entry | None:
    """The fix plain `undo` takes: of those not undone, the one whose files were written last.
    Applies can run at once, so the last one started is not always the last one to write, and
    undoing an earlier writer first would find its files changed. Ties (fixes that wrote no
    numbered file) go to the last one started."""
    live = [(n, e) for n, (_, e) in enumerate(entries()) if isinstance(e, Entry) and e.data.get("status") != "undone"]
    if not live:
        return None
    return max(live, key=lambda t: (last_written(t[1]), -t[0]))[1]


def next_sequence() -> int:
    """A number larger than every one this user's applies drew before, recorded by each file
    step before it writes: the order of writes across applies running at once. The counter
    never goes below the clock (in ns), so a counter file that was lost or damaged never makes
    a later write look older."""
    d = state_dir()
    d.mkdir(parents=True, exist_ok=True)
    fd = os.open(d / "sequence", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with locked_fd(fd):
            try:
                last = int(os.pread(fd, 32, 0).decode().strip() or 0)
            except ValueError:
                last = 0
            n = max(last + 1, time.time_ns())
            data = f"{n}\n".encode()
            os.pwrite(fd, data, 0)
            os.ftruncate(fd, len(data))
            os.fsync(fd)
            return n
    finally:
        os.close(fd)
