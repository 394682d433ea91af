"""Fix plans: what a fixer proposes, as typed actions the executor can show, apply and undo.

Commands are argv lists, never shell strings: a value that came from a log or a parameter is
one argv element (or data inside a file), so it can never be run as shell code.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any, Mapping, Union


@dataclass(frozen=True)
class RunCommand:
    argv: tuple[str, ...]
    why: str = ""
    needs_root: bool = False
    # The command that reverses it, if any (shown by `undo`, which runs no commands itself).
    undo: tuple[str, ...] | None = None

    kind = "command"

    def __post_init__(self):
        if isinstance(self.argv, str) or not self.argv or not all(isinstance(a, str) for a in self.argv):
            raise TypeError("RunCommand.argv must be a non-empty sequence of strings (never a shell string)")
        object.__setattr__(self, "argv", tuple(self.argv))

    @property
    def shown(self) -> str:
        return shlex.join(self.argv)


@dataclass(frozen=True)
class WriteFile:
    """Create or replace a whole file."""

    path: str
    content: str
    why: str = ""
    mode: int | None = None  # for a new file; an existing file keeps its mode
    needs_root: bool = False

    kind = "write"


@dataclass(frozen=True)
class MergeStructured:
    """Merge keys into a JSON or YAML mapping, keeping every other key (daemon.json)."""

    path: str
    data: Mapping[str, Any]
    format: str = "json"  # "json" or "yaml"
    why: str = ""
    needs_root: bool = False

    kind = "merge"


@dataclass(frozen=True)
class SetOption:
    """Set `name=value` in one comma-separated field of a line (fstab's mount options), in
    place: every other option, and every other byte of the line, is kept."""

    field: int  # whitespace-separated field, counted from 0 (fstab's options are field 3)
    name: str
    value: str
    # A size (tmpfs's size=): the line's own value stays when it is larger, so the edit never
    # shrinks what the system mounts at boot.
    never_lower: bool = False


@dataclass(frozen=True)
class LineMatch:
    """Which line an EnsureLine changes and how, decided on the file's content when the change
    is made (not when it is planned)."""

    pattern: str  # regex searched in each line, without its line ending
    skip_comments: bool = True  # a line whose first non-blank character is '#' never matches
    option: SetOption | None = None  # edit one option of the matching line instead of replacing it whole
    append: bool = True  # no line matches: append the line (False: leave the file, or its absence, as it is)


@dataclass(frozen=True)
class LineSet:
    """The rule for an EnsureLine's own line, and more lines with their rules: all are made in
    the same single write, so a reader (or a crash) never sees a file with only some of them."""

    first: str | LineMatch | None
    more: tuple[tuple[str, str | LineMatch | None], ...]


@dataclass(frozen=True)
class EnsureLine:
    """Make sure a line is in a file: replace the first line matching `replaces` (a regex, or
    a LineMatch for comment-aware matching, option edits and replace-only changes), else
    append. The file is created if missing (unless a LineMatch says not to append). A LineSet
    makes sure of several lines at once (see `ensure_lines`)."""

    path: str
    line: str
    why: str = ""
    replaces: str | LineMatch | LineSet | None = None
    needs_root: bool = False
    check: str | None = None  # "fstab": the new content must pass `findmnt --verify` before it replaces the old
    mode: int | None = None  # for a new file; an existing file keeps its mode

    kind = "line"


def ensure_lines(path: str, lines: tuple[tuple[str, str | LineMatch | None], ...], **kw: Any) -> EnsureLine:
    """One EnsureLine for several (line, rule) pairs of one file, changed in one write."""
    (line, rule), *more = lines
    return EnsureLine(path, line, replaces=LineSet(rule, tuple(more)), **kw)


@dataclass(frozen=True)
class SetEnv:
    """An environment variable for the job: printed as `export`, and written to a shell
    profile when `profile` is given (e.g. "~/.bashrc")."""

    name: str
    value: str
    why: str = ""
    profile: str | None = None

    kind = "env"

    @property
    def export_line(self) -> str:
        return f"export {self.name}={shlex.quote(self.value)}"


@dataclass(frozen=True)
class Advice:
    """A change only the user can make (code, batch size, hardware): shown, never applied."""

    text: str
    why: str = ""

    kind = "advice"


Action = Union[RunCommand, WriteFile, MergeStructured, EnsureLine, SetEnv, Advice]
FILE_KINDS = ("write", "merge", "line")


@dataclass(frozen=True)
class Verify:
    """How to prove the fix took: a condition on a fresh snapshot (only `probes` are run), or
    a command whose exit status 0 means success."""

    description: str
    condition: str | None = None
    probes: tuple[str, ...] = ()
    argv: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Plan:
    fixer: str
    title: str
    params: Mapping[str, Any]
    actions: tuple[Action, ...]
    verify: Verify | None = None
    notes: tuple[str, ...] = ()
    # For escalation ladders: a key the journal groups attempts by (e.g. "gpu-fault:0000:3b:00").
    ladder: str | None = None
    rung: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)
