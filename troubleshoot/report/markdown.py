"""Markdown report, to paste into an issue or a chat."""

from __future__ import annotations

from typing import Sequence

from troubleshoot.model import Diagnosis


def render(diagnoses: Sequence[Diagnosis], source: str = "log") -> str:
    out = ["# troubleshoot report\n", f"Source: `{source}`\n"]
    if not diagnoses:
        out.append("No known problem found.\n")
        return "\n".join(out)
    out.append("| # | severity | symptom | diagnosis | confidence | lines |")
    out.append("|---|---|---|---|---|---|")
    for i, d in enumerate(diagnoses, 1):
        lines = f"{d.first_line}-{d.last_line} ({d.count})" if d.count else "facts"
        out.append(f"| {i} | {d.severity} | `{d.symptom}` | {_cell(d.title)} | {d.confidence:.2f} | {lines} |")
    out.append("")
    for i, d in enumerate(diagnoses, 1):
        out.append(f"## {i}. {d.title}\n")
        out.append(f"`{d.severity}` · symptom `{d.symptom}` · rule `{d.rule.id}` · confidence {d.confidence:.2f}\n")
        if d.action:
            from troubleshoot.report.text import action_line

            out.append(f"**{action_line(d)}**\n")
        for note in d.notes:
            out.append(f"> {note}\n")
        out.append("**Evidence**\n")
        out.append("```text")
        for e in d.evidence:
            out.append(f"{e.line:>7} | {e.text}" if e.source == "log" else f"   fact | {e.text}")
        out.append("```\n")
        out.append(d.explain + "\n")
        if d.fixes:
            out.append("**Fixes**\n")
            for f in d.fixes:
                params = ", ".join(f"`{k}={v}`" for k, v in f.params.items() if k != "text")
                out.append(f"- {f.title or f.fixer} (`{f.fixer}`{'; ' + params if params else ''})")
                if isinstance(f.params.get("text"), str):
                    out.append("")
                    out += ["  " + ln for ln in f.params["text"].strip().splitlines()]
            out.append("")
        if d.rule.references:
            out.append("**References**\n")
            out += [f"- <{r}>" for r in d.rule.references]
            out.append("")
    return "\n".join(out)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")
