"""The journal of applied fixes: one folder per application, with backups of every file.

$XDG_STATE_HOME/troubleshoot/journal/<id>/journal.json (default ~/.local/state/...), written
atomically after every step, so that after a crash it still tells what was done; backups/N
holds file N's bytes from before the change and after/N the bytes the fix left (so that undo
can tell whether the file changed since). A journal that does not parse or does not match the
schema below is reported and never trusted for undo; only ids of folders directly in the state
directory are accepted.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
from datetime import datetime, timezone
from pathlib import Path

from troubleshoot.errors import TroubleshootError
from troubleshoot.safeio import atomic_write, locked_dir

SCHEMA = 1
ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,199}$")
STATUSES = {"applying", "applied", "failed", "verify-failed", "undone"}
STEP_KINDS = {"write", "merge", "line", "command", "env", "advice"}
STEP_STATUSES = {"pending", "done", "failed", "unchanged", "skipped", "shown"}
REL_RE = re.compile(r"^(?:backups|after)/[0-9]{1,6}$")


def state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "troubleshoot" / "journal"


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
        (folder / "backups").mkdir(parents=True, exist_ok=False)
        (folder / "after").mkdir()
        e = cls(folder, {"schema": SCHEMA, "id": eid, "fixer": fixer, "params": params, "root": root,
                         "started": now.isoformat(timespec="microseconds"), "status": "applying", "steps": [],
                         **extra})
        e.save()
        return e

    def save(self) -> None:
        atomic_write(self.folder / "journal.json", (json.dumps(self.data, indent=2, default=str) + "\n").encode())

    def backup(self, index: int, data: bytes, kind: str = "backups") -> str:
        rel = f"{kind}/{index}"
        atomic_write(self.folder / rel, data, 0o600)
        return rel

    def backup_bytes(self, rel: str) -> bytes:
        if not REL_RE.match(rel):
            raise TroubleshootError(f"journal {self.id}: bad backup name {rel!r}")
        return (self.folder / rel).read_bytes()


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
        if kind == "command" and status == "done":
            for key in ("argv", "undo"):
                v = st.get(key)
                if not (v is None and key == "undo") and not (
                        isinstance(v, list) and v and all(isinstance(a, str) for a in v)):
                    bad.append(f"{where}: {key!r} is not a list of strings")
    return bad


def load(eid: str) -> Entry:
    folder = check_id(eid)
    path = folder / "journal.json"
    try:
        if path.is_symlink():
            raise ValueError("it is a symlink")
        data = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError):
        raise TroubleshootError(f"no applied fix with id {eid!r} (see `troubleshoot history`)") from None
    except (ValueError, UnicodeDecodeError, RecursionError, OSError) as exc:
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
