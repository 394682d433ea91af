"""Fixes for every front end: plan (from a diagnosis, or from a fixer id and parameters),
preview, apply with a confirmation, verify, undo.

`troubleshoot fix` / `undo` and the TUI's fix preview both go through a `FixService` (made by
`context.CommandContext.fix_service`), so that the same plan is previewed, applied, journalled
and verified the same way whichever front end asked. A plan that changes nothing (every file
already as wanted, nothing to run) is neither applied nor journalled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from troubleshoot.errors import TroubleshootError
from troubleshoot.fixes import executor

if TYPE_CHECKING:
    from troubleshoot.fixes.api import Fixer
    from troubleshoot.fixes.executor import Outcome, Prepared, UndoResult
    from troubleshoot.model import Diagnosis


@dataclass(frozen=True)
class Request:
    """One fixer to plan, with its raw parameters (validated when planned)."""

    fixer: str
    params: Mapping[str, object]


@dataclass
class Plans:
    prepared: list[Prepared] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # fixes that could not be planned, one line each


@dataclass
class Applied:
    """What became of one plan: `outcome` None when it changed nothing and was not applied."""

    prep: Prepared
    outcome: Outcome | None

    @property
    def stopped(self) -> bool:
        """The plan failed or did not verify: the plans after it are not applied."""
        out = self.outcome
        return out is not None and (bool(out.failed) or out.verified is False)


class NotConfirmed(TroubleshootError):
    """The user did not confirm a plan; nothing of it was changed."""


def requests_of(diagnosis: Diagnosis, extra: Mapping[str, object] | None = None) -> list[Request]:
    """The fixes a diagnosis names, with `extra` parameters over theirs."""
    return [Request(f.fixer, {**f.params, **(extra or {})}) for f in diagnosis.fixes]


def rule_requests(rule, diagnoses: Sequence[Diagnosis], extra: Mapping[str, object] | None = None,
                  read_logs: bool = True) -> list[Request] | None:
    """The fixes of `rule`'s diagnosis among `diagnoses` (the pipeline's, with the command's
    facts). Without logs (`read_logs` False) a rule's fixes are rendered with no captures.
    None: logs were read and the rule did not fire on them."""
    if not rule.fixes:
        raise TroubleshootError(f"rule {rule.id!r} names no fixes")
    found = next((d for d in diagnoses if d.rule.id == rule.id), None)
    if found is not None:
        return requests_of(found, extra)
    if read_logs:
        return None
    from troubleshoot.engine.diagnose import render_fix

    return [Request(f.fixer, {**f.params, **(extra or {})}) for f in (render_fix(ref, {}, None) for ref in rule.fixes)]


def changes(prep: Prepared) -> bool:
    """Whether applying the plan would do anything (a step that changes, or a rung of an
    escalation ladder, which is recorded even when it changes no file)."""
    return any(s.changes for s in prep.steps) or bool(prep.plan.ladder)


@dataclass
class FixService:
    fixers: Mapping[str, Fixer]
    # The facts a fixer plans with; asked with True when the fixer needs them (probe if need
    # be), with False for what is at hand only.
    facts: Callable[[bool], Mapping | None]
    # Probes of some areas again after a fix, under a root when given: its verification.
    probe_areas: Callable[[tuple, str | None], dict]
    root: str | None = None

    def plan(self, requests: Sequence[Request], strict: bool = True) -> Plans:
        """Every request planned and prepared (files read, nothing changed). `strict`: the first
        fixer that is missing or refuses raises; otherwise each such is an entry of `errors`."""
        out = Plans()
        missing = [r.fixer for r in requests if r.fixer not in self.fixers]
        if missing and strict:
            raise TroubleshootError(f"no fixer {missing[0]!r} (see `troubleshoot fixers list`)")
        out.errors += [f"no fixer {fid!r} is installed" for fid in missing]
        wanted = [r for r in requests if r.fixer in self.fixers]
        facts = self.facts(any(self.fixers[r.fixer].needs_snapshot for r in wanted)) if wanted else None
        for r in wanted:
            fixer = self.fixers[r.fixer]
            try:
                plan = fixer.plan(fixer.validate(dict(r.params)), facts)
                out.prepared.append(executor.prepare(plan, self.root))
            except TroubleshootError as exc:
                if strict:
                    raise
                out.errors.append(f"{r.fixer}: {exc}")
        return out

    def preview(self, prep: Prepared, markdown: Callable[[str], str] | None = None) -> str:
        return executor.preview(prep, markdown=markdown)

    def apply(self, prepared: Sequence[Prepared], confirm: Callable[[Prepared], bool],
              on_applied: Callable[[Applied], None] | None = None) -> list[Applied]:
        """Apply each plan that changes something, in order: a plan that needs root without it
        raises before anything of it changes, `confirm(prep)` is asked before each (False raises
        NotConfirmed), each applied plan is verified and reported to `on_applied` as it ends.
        A plan that failed or did not verify stops the ones after it."""
        done: list[Applied] = []
        for prep in prepared:
            if not changes(prep):
                result = Applied(prep, None)
            else:
                if prep.needs_root and not executor._is_root():
                    raise TroubleshootError(f"this fix needs root; nothing was changed. Run: "
                                            f"{executor.sudo_line(prep.plan)}"
                                            + (f" (with --root {self.root})" if self.root else ""))
                if not confirm(prep):
                    raise NotConfirmed(f"not applied: no confirmation for '{prep.plan.title}'")
                out = executor.apply(prep)
                executor.verify(prep, out, probe=self.probe_areas)
                result = Applied(prep, out)
            done.append(result)
            if on_applied is not None:
                on_applied(result)
            if result.stopped:
                break
        return done

def undo(eid: str, force: bool = False) -> UndoResult:
    """Restore the files of an applied fix (the journal's `eid`): the CLI's `undo`, the TUI's
    History. Needs no fixer, so no plugin is loaded for it."""
    return executor.undo(eid, force=force)


def latest_to_undo():
    """The journal entry plain `undo` takes, or None."""
    from troubleshoot.fixes import journal

    return journal.latest_to_undo()
