"""Markdown report, to paste into an issue or a chat.

Log lines, snapshot values, titles and file names are data: each is written so that it shows as
it is (escaped, in a code span, or in a fenced block that none of its lines can close), and the
whole report is terminal-safe. The explanations and advice are the rules' own Markdown. It renders
report.views.DiagnosisView objects, as the text report and the TUI do."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Sequence

from troubleshoot.report.views import DiagnosisView, EvidenceView, FixView, diagnosis_view
from troubleshoot.textsafe import markdown_code, markdown_fence, markdown_literal

if TYPE_CHECKING:
    from troubleshoot.model import Diagnosis

_PLAIN_URL = re.compile(r"https?://[^\s<>`\\]+")


def render(diagnoses: Sequence[Diagnosis], source: str = "log") -> str:
    out = ["# troubleshoot report\n", f"Source: {markdown_code(source)}\n"]
    if not diagnoses:
        out.append("No known problem found.\n")
        return "\n".join(out)
    views = [diagnosis_view(d) for d in diagnoses]
    out.append("| # | severity | symptom | diagnosis | confidence | lines |")
    out.append("|---|---|---|---|---|---|")
    for i, v in enumerate(views, 1):
        lines = f"{v.first_line}-{v.last_line} ({v.count})" if v.count else "facts"
        out.append(f"| {i} | {markdown_literal(v.severity)} | {markdown_code(v.symptom)} | {markdown_literal(v.title)} "
                   f"| {v.confidence:.2f} | {lines} |")
    out.append("")
    for i, v in enumerate(views, 1):
        out += _section(i, v)
    return "\n".join(out)


def _section(i: int, v: DiagnosisView) -> list[str]:
    out = [f"## {i}. {markdown_literal(v.title)}\n",
           f"{markdown_code(v.severity)} · symptom {markdown_code(v.symptom)} · rule {markdown_code(v.rule)} "
           f"· confidence {v.confidence:.2f}\n"]
    if v.action:
        out.append(f"**{markdown_literal(v.action)}**\n")
    out += [f"> {markdown_literal(note)}\n" for note in v.notes]
    out.append("**Evidence**\n")
    out.append(markdown_fence("\n".join(_evidence_line(e) for e in v.evidence)) + "\n")
    out.append(v.explain + "\n")
    out += _fixes(v.fixes)
    if v.references:
        out.append("**References**\n")
        out += [f"- {_reference(r)}" for r in v.references]
        out.append("")
    return out


def _evidence_line(e: EvidenceView) -> str:
    """One line per piece of evidence, whatever newlines a snapshot value holds."""
    return f"{e.line:>7} | {e.text}" if e.source == "log" else f"   fact | {e.text}"


def _fixes(fixes: Sequence[FixView]) -> list[str]:
    if not fixes:
        return []
    out = ["**Fixes**\n"]
    for f in fixes:
        params = ", ".join(markdown_code(f"{k}={value}") for k, value in f.params)
        params = "; " + params if params else ""
        out.append(f"- {markdown_literal(f.title)} ({markdown_code(f.fixer)}{params})")
        if f.advice:  # the rule's advice: Markdown of its own
            out.append("")
            out += ["  " + ln for ln in f.advice.splitlines()]
    out.append("")
    return out


def _reference(ref: str) -> str:
    """A plain URL as a link that shows it; anything else as text."""
    return f"<{ref}>" if _PLAIN_URL.fullmatch(ref) else markdown_literal(ref)
