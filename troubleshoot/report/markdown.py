"""Markdown report, to paste into an issue or a chat.

Log lines, snapshot values, titles and file names are data: each is written so that it shows as
it is (escaped, in a code span, or in a fenced block that none of its lines can close), and the
whole report is terminal-safe. The explanations and advice are the rules' own Markdown."""

from __future__ import annotations

import re
from typing import Sequence

from troubleshoot.model import Diagnosis, Evidence, Fix
from troubleshoot.textsafe import markdown_code, markdown_fence, markdown_literal, terminal_safe

_PLAIN_URL = re.compile(r"https?://[^\s<>`\\]+")


def render(diagnoses: Sequence[Diagnosis], source: str = "log") -> str:
    out = ["# troubleshoot report\n", f"Source: {markdown_code(source)}\n"]
    if not diagnoses:
        out.append("No known problem found.\n")
        return "\n".join(out)
    out.append("| # | severity | symptom | diagnosis | confidence | lines |")
    out.append("|---|---|---|---|---|---|")
    for i, d in enumerate(diagnoses, 1):
        lines = f"{d.first_line}-{d.last_line} ({d.count})" if d.count else "facts"
        out.append(f"| {i} | {markdown_literal(d.severity)} | {markdown_code(d.symptom)} | {markdown_literal(d.title)} "
                   f"| {d.confidence:.2f} | {lines} |")
    out.append("")
    for i, d in enumerate(diagnoses, 1):
        out += _section(i, d)
    return "\n".join(out)


def _section(i: int, d: Diagnosis) -> list[str]:
    out = [f"## {i}. {markdown_literal(d.title)}\n",
           f"{markdown_code(d.severity)} · symptom {markdown_code(d.symptom)} · rule {markdown_code(d.rule.id)} "
           f"· confidence {d.confidence:.2f}\n"]
    if d.action:
        from troubleshoot.report.text import action_line

        out.append(f"**{markdown_literal(action_line(d))}**\n")
    out += [f"> {markdown_literal(note)}\n" for note in d.notes]
    out.append("**Evidence**\n")
    out.append(markdown_fence("\n".join(_evidence_line(e) for e in d.evidence)) + "\n")
    out.append(terminal_safe(d.explain) + "\n")
    out += _fixes(d.fixes)
    if d.rule.references:
        out.append("**References**\n")
        out += [f"- {_reference(r)}" for r in d.rule.references]
        out.append("")
    return out


def _evidence_line(e: Evidence) -> str:
    """One line per piece of evidence, whatever newlines a snapshot value holds."""
    text = terminal_safe(e.text, keep_newlines=False)
    return f"{e.line:>7} | {text}" if e.source == "log" else f"   fact | {text}"


def _fixes(fixes: Sequence[Fix]) -> list[str]:
    if not fixes:
        return []
    out = ["**Fixes**\n"]
    for f in fixes:
        params = ", ".join(markdown_code(f"{k}={v}") for k, v in f.params.items() if k != "text")
        params = "; " + params if params else ""
        out.append(f"- {markdown_literal(f.title or f.fixer)} ({markdown_code(f.fixer)}{params})")
        if isinstance(f.params.get("text"), str):  # the rule's advice: Markdown of its own
            out.append("")
            out += ["  " + ln for ln in terminal_safe(f.params["text"]).strip().splitlines()]
    out.append("")
    return out


def _reference(ref: str) -> str:
    """A plain URL as a link that shows it; anything else as text."""
    return f"<{ref}>" if _PLAIN_URL.fullmatch(ref) else markdown_literal(ref)
