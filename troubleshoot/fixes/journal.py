"""The journal of applied fixes: one folder per application, with backups of every file.

$XDG_STATE_HOME/troubleshoot/journal/<id>/journal.json (default ~/.local/state/...), written
atomically after every step, so that after a crash it still tells what was done; backups/N
holds file N's bytes from before the change. A journal that does not parse is reported and
never trusted for undo.
"""

from __future__ import annotations

import json
import os
import secrets
from datetime import datetime, timezone
from pathlib import Path

from troubleshoot.errors import TroubleshootError
from troubleshoot.fixes.files import atomic_write

SCHEMA = 1


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
        e = cls(folder, {"schema": SCHEMA, "id": eid, "fixer": fixer, "params": params, "root": root,
                         "started": now.isoformat(timespec="seconds"), "status": "applying", "steps": [], **extra})
        e.save()
        return e

    def save(self) -> None:
        atomic_write(self.folder / "journal.json", (json.dumps(self.data, indent=2, default=str) + "\n").encode())

    def backup(self, index: int, data: bytes) -> str:
        rel = f"backups/{index}"
        atomic_write(self.folder / rel, data)
        return rel

    def backup_bytes(self, rel: str) -> bytes:
        return (self.folder / rel).read_bytes()


def load(eid: str) -> Entry:
    folder = state_dir() / eid
    path = folder / "journal.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TroubleshootError(f"no applied fix with id {eid!r} (see `troubleshoot history`)") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise TroubleshootError(f"journal {path} is corrupt ({exc}); not trusting it: restore by hand from "
                                f"{folder / 'backups'}") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("steps"), list):
        raise TroubleshootError(f"journal {path} is not a troubleshoot journal of schema {SCHEMA}; not trusting it")
    return Entry(folder, data)


def entries() -> list[tuple[str, Entry | str]]:
    """(id, entry) newest first; a corrupt journal is listed with its error instead."""
    d = state_dir()
    if not d.is_dir():
        return []
    out = []
    for folder in sorted((p for p in d.iterdir() if p.is_dir()), reverse=True):
        try:
            out.append((folder.name, load(folder.name)))
        except TroubleshootError as exc:
            out.append((folder.name, str(exc)))
    return out
