"""The executor: show a plan exactly, apply it safely, verify it, undo it.

Dry run is the default. Applying: every file is backed up into the journal before it is
touched and written atomically; every step is journalled before and after it runs; the first
failure stops the plan, and everything done so far stays restorable with `undo`. Commands run
without a shell. A plan that needs root, run without root, is refused before anything happens,
with the exact `sudo` line. With `root` (--root DIR) file actions land under DIR and commands
are not run: for containers, images and tests.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from troubleshoot.errors import TroubleshootError
from troubleshoot.fixes import files, journal
from troubleshoot.fixes.plan import FILE_KINDS, Advice, EnsureLine, MergeStructured, Plan, RunCommand, SetEnv, WriteFile

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
    """Compute every change without making it (reads the current files)."""
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
        old = pending[tgt] if tgt in pending else files.read_bytes(tgt)
        if isinstance(a, WriteFile):
            new, kind = a.content.encode("utf-8"), "write"
        elif isinstance(a, MergeStructured):
            new, kind = files.merged_structured(old, a.data, a.format, str(tgt)), "merge"
        else:
            new, kind = files.ensured_line(old, a.line, a.replaces), "line"
        pending[tgt] = new
        needs_root = root is None and (getattr(a, "needs_root", False) or not _writable(tgt))
        out.steps.append(Step(i, kind, a.why or f"edit {a.path}", path=a.path, target=tgt, old=old, new=new,
                              mode=getattr(a, "mode", None), needs_root=needs_root))
    return out


def sudo_line(plan: Plan) -> str:
    parts = ["sudo", "troubleshoot", "fix", plan.fixer]
    for k, v in plan.params.items():
        if v is not None:
            parts += ["--param", f"{k}={v}"]
    parts += ["--apply"]
    return shlex.join(parts)


def preview(prep: Prepared) -> str:
    """The dry run: every command exactly as it will run, every file as a diff."""
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
            lines += ["   " + ln for ln in s.text.strip().splitlines()]
        elif s.kind == "env":
            lines.append(f"{n}. environment: {s.text}")
            if s.title:
                lines.append(f"   why: {s.title}")
        else:
            tag = " [root]" if s.needs_root else ""
            if not s.changes:
                lines.append(f"{n}. {s.target}: already as wanted, no change")
                continue
            lines.append(f"{n}. {'create' if s.old is None else 'edit'}{tag}: {s.target}  ({s.title})")
            lines += ["   " + ln for ln in files.diff(str(s.target), s.old, s.new).splitlines()]
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
    verified: bool | None = None  # None: nothing to verify, or could not tell
    verify_detail: str = ""


# Tests replace this to simulate a crash between two steps.
_after_step: Callable[[int], None] = lambda index: None


def apply(prep: Prepared, run: Callable = subprocess.run) -> Outcome:
    """Apply a prepared plan; refuses (raises) before any change if root is needed and missing."""
    if prep.needs_root and not _is_root():
        need = [s.title or (shlex.join(s.argv) if s.argv else str(s.target)) for s in prep.steps if s.needs_root and s.changes]
        raise TroubleshootError(f"this fix needs root for: {'; '.join(need)}. Nothing was changed. Run: {sudo_line(prep.plan)}")
    plan = prep.plan
    try:
        entry = journal.Entry.create(plan.fixer, dict(plan.params), prep.root,
                                     {"title": plan.title, "ladder": plan.ladder, "rung": plan.rung})
    except OSError as exc:
        raise TroubleshootError(f"cannot write the journal under {journal.state_dir()} "
                                f"({exc.strerror or exc}); nothing was changed") from None
    out = Outcome(entry, done=[])
    for s in prep.steps:
        record = {"index": s.index, "kind": s.kind, "title": s.title, "status": "pending"}
        entry.data["steps"].append(record)
        try:
            if s.kind in FILE_KINDS:
                record.update(path=s.path, target=str(s.target), existed=s.old is not None)
                if not s.changes:
                    record["status"] = "unchanged"
                    entry.save()
                    continue
                if s.old is not None:
                    record["backup"] = entry.backup(s.index, s.old)
                entry.save()  # the backup is safe before the file is touched
                files.atomic_write(s.target, s.new, s.mode)
                record["status"] = "done"
                out.done.append(f"{'created' if s.old is None else 'edited'} {s.target}")
            elif s.kind == "command":
                record.update(argv=list(s.argv), undo=list(s.undo_argv) if s.undo_argv else None)
                if not s.runs:
                    record["status"] = "skipped"
                    out.skipped.append(f"not run under --root: {shlex.join(s.argv)}")
                    entry.save()
                    continue
                entry.save()
                try:
                    p = run(list(s.argv), capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
                except FileNotFoundError:
                    raise TroubleshootError(f"{s.argv[0]}: command not found") from None
                except subprocess.TimeoutExpired:
                    raise TroubleshootError(f"{shlex.join(s.argv)} timed out after {COMMAND_TIMEOUT}s") from None
                record.update(returncode=p.returncode, output=(p.stdout + p.stderr)[-2000:])
                if p.returncode != 0:
                    raise TroubleshootError(f"{shlex.join(s.argv)} exited {p.returncode}: "
                                            f"{(p.stderr or p.stdout).strip()[-300:]}")
                record["status"] = "done"
                out.done.append(f"ran {shlex.join(s.argv)}")
            else:
                record["status"] = "shown"
                entry.save()
                continue
        except (OSError, TroubleshootError) as exc:
            msg = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            if isinstance(exc, OSError) and getattr(exc, "filename", None):
                msg = f"{exc.filename}: {msg}"
            record.update(status="failed", error=msg)
            entry.data["status"] = "failed"
            try:
                entry.save()
            except OSError:
                pass  # the journal on disk still says which step was pending; its backup is saved
            out.failed = f"step {s.index + 1} ({s.title or s.kind}) failed: {msg}"
            return out
        entry.save()
        _after_step(s.index)
    entry.data["status"] = "applied"
    entry.save()
    return out


def verify(prep: Prepared, out: Outcome, probe: Callable[[tuple, str | None], dict] | None = None,
           run: Callable = subprocess.run) -> None:
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


def undo(eid: str) -> UndoResult:
    """Restore every touched file byte for byte (remove those that did not exist); report the
    commands that were run, which undo cannot take back, with their reversing command if known."""
    entry = journal.load(eid)
    if entry.data.get("status") == "undone":
        raise TroubleshootError(f"fix {eid} was already undone")
    res = UndoResult([], [], [], [])
    for rec in reversed(entry.data["steps"]):
        kind, status = rec.get("kind"), rec.get("status")
        if kind in FILE_KINDS and status in ("done", "pending", "failed"):
            tgt = Path(rec["target"])
            try:
                if rec.get("existed"):
                    if "backup" not in rec:
                        if status == "pending":
                            continue  # crashed before its backup was saved: the file was never touched
                        res.problems.append(f"{tgt}: no backup recorded; left as it is")
                        continue
                    data = entry.backup_bytes(rec["backup"])
                    if files.read_bytes(tgt) != data:
                        files.atomic_write(tgt, data)
                    res.restored.append(str(tgt))
                elif tgt.exists():
                    tgt.unlink()
                    res.removed.append(str(tgt))
            except OSError as exc:
                res.problems.append(f"{tgt}: {exc.strerror or exc}")
        elif kind == "command" and status == "done":
            hint = f" (to reverse: {shlex.join(rec['undo'])})" if rec.get("undo") else ""
            res.not_reversed.append(shlex.join(rec["argv"]) + hint)
    if not res.problems:
        entry.data["status"] = "undone"
        entry.save()
    return res


def confirm(question: str) -> bool:
    if not sys.stdin.isatty():
        return False
    try:
        return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")
    except EOFError:
        return False


def ladder_attempts(ladder: str) -> list[dict]:
    """Earlier applications on the same escalation ladder, oldest first (not undone)."""
    out = []
    for _, e in reversed(journal.entries()):
        if isinstance(e, journal.Entry) and e.data.get("ladder") == ladder and e.data.get("status") != "undone":
            out.append(e.data)
    return out
