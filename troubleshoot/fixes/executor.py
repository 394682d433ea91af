"""The executor: show a plan exactly, apply it safely, verify it, undo it.

Dry run is the default. Applying: every file is backed up into the journal before it is
touched and written atomically; every step is journalled before and after it runs; the first
failure stops the plan, and everything done so far stays restorable with `undo`. Commands run
without a shell. A plan that needs root, run without root, is refused before anything happens,
with the exact `sudo` line. With `root` (--root DIR) file actions land under DIR and commands
are not run: for containers, images and tests.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from troubleshoot import safeio
from troubleshoot.errors import TroubleshootError
from troubleshoot.fixes import files, journal
from troubleshoot.fixes.plan import FILE_KINDS, Advice, EnsureLine, MergeStructured, Plan, RunCommand, SetEnv, WriteFile
from troubleshoot.textsafe import terminal_safe

COMMAND_TIMEOUT = 600


@dataclass
class Step:
    """One action made concrete: for files, the exact old and new bytes."""

    index: int
    kind: str  # write, merge, line, command, env, advice
    title: str
    path: str | None = None  # as the plan names it
    target: Path | None = None  # where it lands (under --root)
    old: bytes | None = None
    new: bytes | None = None
    mode: int | None = None
    argv: tuple[str, ...] | None = None
    undo_argv: tuple[str, ...] | None = None
    needs_root: bool = False
    runs: bool = True  # False: a command under --root, an advice
    text: str = ""
    # The new content as a function of the current one: applying recomputes it under the file's
    # lock when the file changed since the preview (another fix ran meanwhile).
    compute: Callable[[bytes | None], bytes] | None = None
    resolved_from: str | None = None  # the path as named, when a symlink led elsewhere
    check: str | None = None  # "fstab": validated with findmnt before it replaces the old content

    @property
    def changes(self) -> bool:
        if self.kind in FILE_KINDS:
            return self.old != self.new
        return self.kind == "command" and self.runs


@dataclass
class Prepared:
    plan: Plan
    root: str | None
    steps: list[Step] = field(default_factory=list)

    @property
    def needs_root(self) -> bool:
        return any(s.needs_root and s.changes for s in self.steps)


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _writable(p: Path) -> bool:
    probe = p if p.exists() else next((q for q in p.parents if q.exists()), Path("/"))
    return os.access(probe, os.W_OK)


def prepare(plan: Plan, root: str | None = None) -> Prepared:
    """Compute every change without making it (reads the current files). A root is made
    absolute here, once: what the preview shows, what is written and what is journalled agree
    even if the current folder changes later."""
    if root is not None:
        if not str(root):
            raise TroubleshootError("the root folder is an empty path; give a folder (--root DIR)")
        root = os.path.realpath(root)
    out = Prepared(plan, root)
    pending: dict[Path, bytes | None] = {}  # a later action on the same file sees the earlier one's result
    for i, a in enumerate(plan.actions):
        title = a.why or ""
        if isinstance(a, RunCommand):
            out.steps.append(Step(i, "command", title or a.shown, argv=a.argv, undo_argv=a.undo,
                                  needs_root=a.needs_root and root is None, runs=root is None))
            continue
        if isinstance(a, Advice):
            out.steps.append(Step(i, "advice", title, text=a.text, runs=False))
            continue
        if isinstance(a, SetEnv):
            out.steps.append(Step(i, "env", title or f"set {a.name}", text=a.export_line, runs=False))
            if not a.profile:
                continue
            a = EnsureLine(a.profile, a.export_line, why=f"make {a.name} permanent in {a.profile}",
                           replaces=rf"^\s*export\s+{a.name}=")
        tgt = files.target(a.path, root)
        if tgt.is_dir():
            raise TroubleshootError(f"{tgt} is a directory; the fix expects a file there")
        named = Path(root or "/").joinpath(*safeio.components(a.path))
        old = pending[tgt] if tgt in pending else files.read_bytes(tgt, root)
        compute, kind = _computer(a, str(tgt))
        new = compute(old)
        pending[tgt] = new
        needs_root = root is None and (getattr(a, "needs_root", False) or not _writable(tgt))
        out.steps.append(Step(i, kind, a.why or f"edit {a.path}", path=a.path, target=tgt, old=old, new=new,
                              mode=getattr(a, "mode", None), needs_root=needs_root, compute=compute,
                              resolved_from=str(named) if named != tgt else None, check=getattr(a, "check", None)))
    return out


def _computer(a, where: str) -> tuple[Callable[[bytes | None], bytes], str]:
    if isinstance(a, WriteFile):
        data = a.content.encode("utf-8")
        return (lambda old: data), "write"
    if isinstance(a, MergeStructured):
        return (lambda old: files.merged_structured(old, a.data, a.format, where)), "merge"
    return (lambda old: files.ensured_line(old, a.line, a.replaces)), "line"


def sudo_line(plan: Plan) -> str:
    parts = ["sudo", "troubleshoot", "fix", plan.fixer]
    for k, v in plan.params.items():
        if v is not None:
            parts += ["--param", f"{k}={v}"]
    parts += ["--apply"]
    return shlex.join(parts)


def preview(prep: Prepared, markdown: Callable[[str], str] | None = None) -> str:
    """The dry run: every command exactly as it will run, every file as a diff. `markdown`
    turns an advice's Markdown into what the reader sees (the CLI: plain text); by default it
    stays Markdown (the TUI renders it)."""
    plan = prep.plan
    lines = [f"Plan: {plan.title}  (fixer {plan.fixer}{', rung ' + plan.rung if plan.rung else ''})"]
    if prep.root:
        lines.append(f"  files under {prep.root}; commands are shown, not run (--root)")
    for n, s in enumerate(prep.steps, 1):
        if s.kind == "command":
            tag = " [root]" if s.needs_root else ""
            skip = " (not run under --root)" if not s.runs else ""
            lines.append(f"{n}. run{tag}: {shlex.join(s.argv)}{skip}")
            if s.title and s.title != shlex.join(s.argv):
                lines.append(f"   why: {s.title}")
        elif s.kind == "advice":
            lines.append(f"{n}. advice: {s.title}".rstrip(": "))
            advice = s.text.strip()
            lines += ["   " + ln for ln in (markdown(advice) if markdown else advice).splitlines()]
        elif s.kind == "env":
            lines.append(f"{n}. environment: {s.text}")
            if s.title:
                lines.append(f"   why: {s.title}")
        else:
            tag = " [root]" if s.needs_root else ""
            if not s.changes:
                lines.append(f"{n}. {s.target}: already as wanted, nothing to change")
                continue
            lines.append(f"{n}. {'create' if s.old is None else 'edit'}{tag}: {s.target}  ({s.title})")
            if s.resolved_from:
                lines.append(f"   ({s.resolved_from} is a symlink; its target inside the root is edited, "
                             f"the link is kept)")
            lines += ["   " + ln for ln in files.diff(str(s.target), s.old, s.new).split("\n")[:-1]]
    for note in plan.notes:
        lines.append(f"note: {note}")
    if plan.verify:
        lines.append(f"verify: {plan.verify.description}")
    return "\n".join(lines) + "\n"


@dataclass
class Outcome:
    entry: journal.Entry | None
    done: list[str]
    failed: str | None = None
    skipped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    verified: bool | None = None  # None: nothing to verify, or could not tell
    verify_detail: str = ""


# Tests replace this to simulate a crash between two steps.
_after_step: Callable[[int], None] = lambda index: None


def write_in(fd: int, name: str, data: bytes, mode: int | None) -> None:
    """The one place a fix's bytes reach a file (tests replace it to simulate a full disk)."""
    safeio.write_in(fd, name, data, mode)


def run_command(argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    """Run a plan's command from the file system's root: started in the user's folder, a
    `python -m pip` (or any Python tool) would import look-alike modules from it first, as root."""
    env = dict(os.environ, PYTHONSAFEPATH="1")
    return subprocess.run(argv, cwd="/", env=env, **kwargs)


def apply(prep: Prepared, run: Callable = run_command) -> Outcome:
    """Apply a prepared plan; refuses (raises) before any change if root is needed and missing."""
    if prep.needs_root and not _is_root():
        need = [s.title or (shlex.join(s.argv) if s.argv else str(s.target)) for s in prep.steps if s.needs_root and s.changes]
        raise TroubleshootError(f"this fix needs root for: {'; '.join(need)}. Nothing was changed. Run: {sudo_line(prep.plan)}")
    plan = prep.plan
    try:
        entry = journal.Entry.create(plan.fixer, dict(plan.params), os.path.realpath(prep.root) if prep.root is not None
                                     else None, {"title": plan.title, "ladder": plan.ladder, "rung": plan.rung})
    except OSError as exc:
        raise TroubleshootError(f"cannot write the journal under {journal.state_dir()} "
                                f"({exc.strerror or exc}); nothing was changed") from None
    out = Outcome(entry, done=[])
    with safeio.locked_dir(entry.folder):  # an undo of this id waits until the apply is over
        return _apply_steps(prep, entry, out, run)


def _apply_steps(prep: Prepared, entry: journal.Entry, out: Outcome, run: Callable) -> Outcome:
    for s in prep.steps:
        record = {"index": s.index, "kind": s.kind, "title": s.title, "status": "pending"}
        entry.data["steps"].append(record)
        try:
            if s.kind in FILE_KINDS:
                _apply_file(prep, s, entry, record, out)
            elif s.kind == "command":
                _run_command(s, entry, record, out, run)
            else:
                record["status"] = "shown"
        except (OSError, TroubleshootError) as exc:
            return _failed(s, entry, record, out, exc)
        try:
            entry.save()
        except OSError as exc:
            out.failed = (f"step {s.index + 1} ({s.title or s.kind}) was done, but the journal {entry.folder} could not "
                          f"record it ({exc.strerror or exc}); stopped there. `troubleshoot undo {entry.id}` compares "
                          f"each file with what the fix wrote before restoring it")
            return out
        _after_step(s.index)
    entry.data["status"] = "applied"
    try:
        entry.save()
    except OSError as exc:
        out.notes.append(f"the journal {entry.folder} could not be marked applied ({exc.strerror or exc}); "
                         f"undo still works")
    return out


def _apply_file(prep: Prepared, s: Step, entry: journal.Entry, record: dict, out: Outcome) -> None:
    record.update(path=s.path, target=str(s.target), existed=s.old is not None)
    if not s.changes:
        record["status"] = "unchanged"
        return
    with files.locked_folder(s.target, prep.root) as (fd, name):
        current = safeio.read_in(fd, name)
        new = s.new
        if current != s.old and s.compute is not None:
            new = s.compute(current)  # another change landed since the preview: keep it
            out.notes.append(f"{s.target} changed since the preview; the change was made on its current content")
        record["existed"] = current is not None
        if current == new:
            record["status"] = "unchanged"
            return
        if s.check == "fstab":
            files.check_fstab(current, new, on_this_machine=prep.root is None)
        _journal_before_writing(entry, s, record, current, new)
        write_in(fd, name, new, s.mode)
        record.update(status="done", wrote=True)
    out.done.append(f"{'created' if current is None else 'edited'} {s.target}")


def _journal_before_writing(entry: journal.Entry, s: Step, record: dict, current: bytes | None, new: bytes) -> None:
    """The old bytes, the new bytes and the write's place in the order of writes, all on disk
    before the file is touched: undo restores the one and compares with the other."""
    try:
        if current is not None:
            record["backup"] = entry.backup(s.index, current)
        record["after"] = entry.backup(s.index, new, "after")
        record["seq"] = journal.next_sequence()
        entry.save()
    except OSError as exc:
        raise TroubleshootError(f"cannot save the backups in the journal {entry.folder} ({exc.strerror or exc}); "
                                f"{s.target} was not changed") from None


def _run_command(s: Step, entry: journal.Entry, record: dict, out: Outcome, run: Callable) -> None:
    record.update(argv=list(s.argv), undo=list(s.undo_argv) if s.undo_argv else None)
    if not s.runs:
        record["status"] = "skipped"
        out.skipped.append(f"not run under --root: {shlex.join(s.argv)}")
        return
    entry.save()
    try:
        p = run(list(s.argv), capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
    except FileNotFoundError:
        raise TroubleshootError(f"{s.argv[0]}: command not found") from None
    except subprocess.TimeoutExpired:
        raise TroubleshootError(f"{shlex.join(s.argv)} timed out after {COMMAND_TIMEOUT}s") from None
    record.update(returncode=p.returncode, output=(p.stdout + p.stderr)[-2000:])
    if p.returncode != 0:
        raise TroubleshootError(f"{shlex.join(s.argv)} exited {p.returncode}: {(p.stderr or p.stdout).strip()[-300:]}")
    record["status"] = "done"
    out.done.append(f"ran {shlex.join(s.argv)}")


def _error_text(s: Step, exc: Exception) -> str:
    """One line naming the file the user knows: a file step's target, never a temp file."""
    if not isinstance(exc, OSError):
        return str(exc)
    text = exc.strerror or str(exc)
    where = s.target if s.kind in FILE_KINDS and s.target is not None else exc.filename
    return f"{where}: {text}" if where else text


def _failed(s: Step, entry: journal.Entry, record: dict, out: Outcome, exc: Exception) -> Outcome:
    msg = _error_text(s, exc)
    if not record.get("wrote"):
        record.update(status="failed", error=msg)
    if s.kind in FILE_KINDS and not record.get("wrote"):
        # A file step fails before its write or in it, and a write either replaces the file
        # whole or leaves it as it was: this step changed nothing, and undo must not touch it.
        record["wrote"] = False
    entry.data["status"] = "failed"
    try:
        entry.save()
    except OSError:
        pass  # the journal on disk still says which step was pending; undo compares before restoring
    out.failed = f"step {s.index + 1} ({s.title or s.kind}) failed: {msg}"
    return out


def verify(prep: Prepared, out: Outcome, probe: Callable[[tuple, str | None], dict] | None = None,
           run: Callable = run_command) -> None:
    """Run the plan's verification and record its verdict in the journal."""
    v = prep.plan.verify
    if v is None or out.failed or out.entry is None:
        return
    from troubleshoot.engine import conditions

    if v.condition:
        facts = probe(v.probes, prep.root) if probe else {}
        missing: list[str] = []
        value = conditions.evaluate(conditions.parse(v.condition), facts, missing)
        out.verified = True if value is True else (False if value is False else None)
        out.verify_detail = f"{v.condition}: {'unknown (' + ', '.join(missing) + ')' if value is conditions.UNKNOWN else value}"
    elif v.argv and prep.root is None:
        try:
            p = run(list(v.argv), capture_output=True, text=True, timeout=120)
            out.verified = p.returncode == 0
            out.verify_detail = f"{shlex.join(v.argv)} exited {p.returncode}"
        except (OSError, subprocess.TimeoutExpired) as exc:
            out.verified = None
            out.verify_detail = f"{shlex.join(v.argv)}: {exc}"
    else:
        out.verify_detail = "not checked under --root"
    out.entry.data["verify"] = {"description": v.description, "ok": out.verified, "detail": out.verify_detail}
    if out.verified is False:
        out.entry.data["status"] = "verify-failed"
    out.entry.save()


@dataclass
class UndoResult:
    restored: list[str]
    removed: list[str]
    not_reversed: list[str]
    problems: list[str]
    forced: list[str] = field(default_factory=list)


@dataclass
class Conflict:
    target: str
    fix_left: bytes | None  # None: not recorded (a journal from before this check)
    now: bytes | None

    @property
    def diff(self) -> str:
        return files.diff(self.target, self.fix_left, self.now or b"") if self.fix_left is not None else ""


class UndoConflict(TroubleshootError):
    """Files changed since the fix: undo would throw those changes away."""

    def __init__(self, eid: str, conflicts: list[Conflict]):
        self.eid = eid
        self.conflicts = conflicts
        names = terminal_safe(", ".join(c.target for c in conflicts), keep_newlines=False)
        super().__init__(f"not undone: changed since fix {eid} was applied: {names}. Undo would lose those "
                         f"changes; check the diff, then `troubleshoot undo {eid} --force` to restore anyway")


_UNDOABLE = ("done", "pending", "failed")


def undo(eid: str, force: bool = False) -> UndoResult:
    """Restore every touched file byte for byte (remove those that did not exist); report the
    commands that were run, which undo cannot take back, with their reversing command if known.

    A file that changed since the fix left it is not touched unless `force`: UndoConflict names
    every such file with its diff (what the fix left -> what is there now)."""
    with journal.locked():
        folder = journal.check_id(eid)
        with safeio.locked_dir(folder) if folder.is_dir() else contextlib.nullcontext():
            return _undo(journal.load(eid), eid, force)


def _undo(entry: journal.Entry, eid: str, force: bool) -> UndoResult:
    if entry.data.get("status") == "undone":
        raise TroubleshootError(f"fix {eid} was already undone")
    root = entry.data.get("root")
    recs = list(reversed(entry.data["steps"]))
    # Only steps that may have written are undone: restoring the backup of a step that never
    # wrote would throw away whatever the file became since.
    writes = [r for r in recs if r.get("kind") in FILE_KINDS and r.get("status") in _UNDOABLE and journal.step_wrote(r)]
    conflicts = _conflicts(entry, writes, root)
    if conflicts and not force:
        raise UndoConflict(eid, conflicts)
    res = UndoResult([], [], [], [], forced=[c.target for c in conflicts])
    undone = {id(r) for r in writes}
    for rec in recs:
        if id(rec) in undone:
            _restore(entry, rec, root, res)
        elif rec.get("kind") == "command" and rec.get("status") == "done":
            hint = f" (to reverse: {shlex.join(rec['undo'])})" if rec.get("undo") else ""
            res.not_reversed.append(shlex.join(rec["argv"]) + hint)
    if not res.problems:
        entry.data["status"] = "undone"
        entry.save()
    return res


def _conflicts(entry: journal.Entry, writes: list[dict], root: str | None) -> list[Conflict]:
    """The files undo would throw changes away in: each differs from what its step wrote (and
    from what it held before). Later steps are undone first, so each step expects the file as
    the later steps' undo leaves it."""
    state: dict[str, bytes | None] = {}
    conflicts: list[Conflict] = []
    for rec in writes:
        key = rec["target"]
        try:
            now = state[key] if key in state else files.read_bytes(Path(key), root)
            before = entry.backup_bytes(rec["backup"]) if "backup" in rec else None
            after = entry.backup_bytes(rec["after"]) if "after" in rec else None
        except journal.UntrustedJournal:
            raise
        except (OSError, TroubleshootError):
            continue  # reported when restoring
        if rec.get("existed") and before is None:
            continue
        if "after" in rec and now != before and now != after:
            conflicts.append(Conflict(key, after, now))
        state[key] = before
    return conflicts


def _restore(entry: journal.Entry, rec: dict, root: str | None, res: UndoResult) -> None:
    """Put one file back as it was before its step: its backup, or no file at all."""
    tgt = Path(rec["target"])
    if rec.get("existed") and "backup" not in rec:
        res.problems.append(f"{tgt}: no backup recorded; left as it is")
        return
    try:
        with files.locked_folder(tgt, root) as (fd, name):
            current = safeio.read_in(fd, name)
            if rec.get("existed"):
                data = entry.backup_bytes(rec["backup"])
                if current != data:
                    write_in(fd, name, data, None)
                res.restored.append(str(tgt))
            elif current is not None:
                os.unlink(name, dir_fd=fd)
                res.removed.append(str(tgt))
    except journal.UntrustedJournal:
        raise
    except (OSError, TroubleshootError) as exc:
        res.problems.append(f"{tgt}: {exc.strerror if isinstance(exc, OSError) and exc.strerror else exc}")


def confirm(question: str) -> bool:
    if not sys.stdin.isatty():
        return False
    try:
        return input(f"{terminal_safe(question, keep_newlines=False)} [y/N] ").strip().lower() in ("y", "yes")
    except EOFError:
        return False


def ladder_attempts(ladder: str) -> list[dict]:
    """Earlier applications on the same escalation ladder, oldest first (not undone)."""
    out = []
    for _, e in reversed(journal.entries()):
        if isinstance(e, journal.Entry) and e.data.get("ladder") == ladder and e.data.get("status") != "undone":
            out.append(e.data)
    return out
