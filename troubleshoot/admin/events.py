"""The event store: every check verdict, drain, resume, hold, repair, verification, escalation
and breaker change, per node and GPU, in one SQLite file (docs/admin.md has the schema).

One table of events, append-only; a `meta` table holds the schema version. A file written by a
newer version of this schema is refused rather than misread."""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Sequence

from troubleshoot.errors import TroubleshootError
from troubleshoot.userstate import state_dir

SCHEMA_VERSION = 1
KINDS = ("check", "incident", "drain", "resume", "held", "evidence", "repair", "verify", "escalate",
         "breaker", "note")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS events (
    id      INTEGER PRIMARY KEY,
    time    TEXT NOT NULL,
    node    TEXT NOT NULL,
    kind    TEXT NOT NULL,
    status  TEXT,
    class   TEXT,
    symptom TEXT,
    action  TEXT,
    gpu     TEXT,
    xid     INTEGER,
    reason  TEXT NOT NULL DEFAULT '',
    detail  TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS events_node_time ON events (node, time);
CREATE INDEX IF NOT EXISTS events_kind_time ON events (kind, time);
"""
BREAKER = "*"  # the node name of breaker events: the breaker is the store's, not a node's


def default_path() -> Path:
    return state_dir("admin") / "events.db"


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Event:
    id: int
    time: str
    node: str
    kind: str
    status: str | None = None
    cls: str | None = None
    symptom: str | None = None
    action: str | None = None
    gpu: str | None = None
    xid: int | None = None
    reason: str = ""
    detail: dict | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "time": self.time, "node": self.node, "kind": self.kind, "status": self.status,
                "class": self.cls, "symptom": self.symptom, "action": self.action, "gpu": self.gpu, "xid": self.xid,
                "reason": self.reason, "detail": self.detail or {}}


_COLUMNS = "id, time, node, kind, status, class, symptom, action, gpu, xid, reason, detail"


class EventStore:
    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else default_path()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            self._db.executescript(_SCHEMA)
            self._check_version()
        except sqlite3.DatabaseError as exc:
            raise TroubleshootError(f"{self.path}: not a troubleshoot event store ({exc})") from None
        except OSError as exc:
            raise TroubleshootError(f"{self.path}: cannot open the event store: {exc.strerror or exc}") from None

    def _check_version(self) -> None:
        row = self._db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if row is None:
            self._db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            os.chmod(self.path, 0o600)  # reasons and evidence paths of every node: the admin's only
        elif int(row[0]) > SCHEMA_VERSION:
            raise TroubleshootError(f"{self.path}: event store schema {row[0]} is newer than this troubleshoot "
                                    f"reads ({SCHEMA_VERSION}); use a newer troubleshoot")

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "EventStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def record(self, node: str, kind: str, *, status: str | None = None, cls: str | None = None,
               symptom: str | None = None, action: str | None = None, gpu: str | None = None,
               xid: int | None = None, reason: str = "", detail: dict | None = None, time: str | None = None) -> Event:
        if kind not in KINDS:
            raise ValueError(f"unknown event kind {kind!r}")
        when = time or now()
        text = json.dumps(detail or {}, sort_keys=True)
        cur = self._db.execute(f"INSERT INTO events ({_COLUMNS[4:]}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                               (when, node, kind, status, cls, symptom, action, gpu, xid, reason, text))
        return Event(cur.lastrowid, when, node, kind, status, cls, symptom, action, gpu, xid, reason, detail or {})

    def record_many(self, rows: Iterable[dict]) -> int:
        """Many events in one transaction (an import, a generated history)."""
        n = 0
        with self._db:
            self._db.execute("BEGIN")
            for r in rows:
                self.record(**r)
                n += 1
        return n

    def events(self, node: str | None = None, since: str | None = None, kinds: Sequence[str] = (),
               until: str | None = None) -> list[Event]:
        where, args = [], []
        if node is not None:
            where.append("node = ?")
            args.append(node)
        if since:
            where.append("time >= ?")
            args.append(since)
        if until:
            where.append("time <= ?")
            args.append(until)
        if kinds:
            where.append(f"kind IN ({', '.join('?' for _ in kinds)})")
            args += list(kinds)
        sql = f"SELECT {_COLUMNS} FROM events" + (f" WHERE {' AND '.join(where)}" if where else "") + " ORDER BY time, id"
        return [_event(r) for r in self._db.execute(sql, args)]

    def last(self, node: str, kinds: Sequence[str], status: str | None = None) -> Event | None:
        sql = (f"SELECT {_COLUMNS} FROM events WHERE node = ? AND kind IN ({', '.join('?' for _ in kinds)})"
               + (" AND status = ?" if status else "") + " ORDER BY time DESC, id DESC LIMIT 1")
        row = self._db.execute(sql, [node, *kinds, *([status] if status else [])]).fetchone()
        return _event(row) if row else None

    def recent_checks(self, node: str, limit: int, after: Event | None = None) -> list[str]:
        """The statuses of the node's last `limit` checks (newest first), only those recorded
        after the event `after` (by the order they were recorded, not their times: a drain and
        the check that caused it share a second)."""
        sql = ("SELECT status FROM events WHERE node = ? AND kind = 'check'" + (" AND id > ?" if after else "")
               + " ORDER BY id DESC LIMIT ?")
        return [r[0] for r in self._db.execute(sql, [node, *([after.id] if after else []), limit])]


def _event(row: tuple) -> Event:
    detail = json.loads(row[11]) if row[11] else {}
    return Event(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[8], row[9], row[10], detail)
