"""What `troubleshoot run` keeps of a job beside its log: the command it started, in the folder
it started it, and the facts its diagnosis read, saved as a snapshot (LOG.snapshot.json) that
`troubleshoot fix --snapshot` and the TUI replay. A fix planned from that snapshot knows the
job: the profiling plan names this job's own command line (fixers/profiling.py).

The command is recorded as the argv the job got (never a shell line: the fixers quote it with
shlex.join as text to copy) in the snapshot's `job` area: {"command": [...], "cwd": "..."}.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from typing import Mapping, Sequence

SNAPSHOT_SUFFIX = ".snapshot.json"


class JobCommand(NamedTuple):
    # Not a dataclass: it is made before the job starts, and importing `dataclasses` (and
    # `inspect`) then would delay every job by ~10 ms.
    argv: tuple[str, ...]
    cwd: str | None  # None: the folder we were started in no longer exists

    @classmethod
    def started(cls, argv: Sequence[str]) -> JobCommand:
        """The job about to start here: it inherits our working folder."""
        try:
            cwd = os.getcwd()
        except OSError:
            cwd = None
        return cls(tuple(argv), cwd)

    def facts(self) -> dict:
        """The snapshot's `job` area."""
        return {"command": list(self.argv), "cwd": self.cwd}


def snapshot_path(log_path: Path) -> Path | None:
    """Where the job's snapshot goes: beside a log that is a file of its own (None for a FIFO or
    a device, whose folder is no place of ours)."""
    try:
        regular = log_path.is_file()
    except OSError:
        regular = False
    return log_path.with_name(log_path.name + SNAPSHOT_SUFFIX) if regular else None


def snapshot_facts(machine: Mapping | None, run: Mapping | None, job: JobCommand) -> dict:
    """The snapshot of a job: the machine's facts (when probed), the watcher's `run` area (when
    watched) and the job's command."""
    from troubleshoot.probes.base import SNAPSHOT_SCHEMA

    facts = {"schema": SNAPSHOT_SCHEMA, **(machine or {})}
    if run:
        facts["run"] = dict(run)
    facts["job"] = job.facts()
    return facts


def save_snapshot(path: Path, facts: Mapping) -> None:
    """Written as a new file readable by the user alone: it holds the job's command line and the
    machine's environment facts, either of which may carry a token. Raises OSError."""
    import json  # after the job: not a cost of its start

    write_private(path, (json.dumps(facts, indent=2, default=str) + "\n").encode(), new=True)


def write_private(path: Path, data: bytes, new: bool) -> None:
    """Never through a symlink, readable by the user alone. A file named after the log must be
    `new`: the log's name was free, so a file already there was put there by someone else."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_EXCL if new else os.O_TRUNC)
    with os.fdopen(os.open(path, flags, 0o600), "wb") as f:
        f.write(data)
