"""Plain-text report for a terminal: the top diagnosis first, evidence with line numbers."""

from __future__ import annotations

import shlex
import textwrap
from typing import Sequence

from troubleshoot.model import Diagnosis

_COLOURS = {"error": "31", "warning": "33", "info": "36", "dim": "2", "bold": "1", "match": "1;4"}


class Style:
    def __init__(self, colour: bool):
        self.colour = colour

    def __call__(self, name: str, text: str) -> str:
        if not self.colour or not text:
            return text
        return f"\x1b[{_COLOURS[name]}m{text}\x1b[0m"


def action_line(d: Diagnosis) -> str:
    """"Action: reset the GPU when idle (Xid 48 on 0000:91:00)": what to do now, in words."""
    if not d.action:
        return ""
    from troubleshoot.engine.xid import load_catalog

    words = load_catalog().action_text(d.action) or d.action
    where = ""
    if d.xid:
        where = f" (Xid {d.xid.get('code')}" + (f" on {d.xid['pci']}" if d.xid.get("pci") else "") + ")"
    return f"Action: {words}{where}"


def render(diagnoses: Sequence[Diagnosis], colour: bool = False, limit: int | None = None,
           source: str = "the log") -> str:
    st = Style(colour)
    if not diagnoses:
        return f"No known problem found in {source}.\n"
    shown = list(diagnoses)[: limit or None]
    out: list[str] = []
    n = len(diagnoses)
    out.append(st("bold", f"{n} diagnos{'i' if n == 1 else 'e'}s, most likely first") + "\n")
    log_arg = source if source not in ("the log", "stdin", "pasted log", "machine facts", "this machine") else "LOG"
    for i, d in enumerate(shown, 1):
        out.append(_one(i, d, st, full=(i == 1), log_arg=log_arg))
    if len(shown) < n:
        out.append(st("dim", f"... {n - len(shown)} more (use --all)") + "\n")
    return "\n".join(out)


def _one(i: int, d: Diagnosis, st: Style, full: bool, log_arg: str = "LOG") -> str:
    lines = []
    sev = st(d.severity, d.severity.upper())
    lines.append(f"{i}. [{sev}] {st('bold', d.title)}")
    if d.count > 1:
        where = f"{d.count} matches · lines {d.first_line}-{d.last_line}"
    elif d.count == 1:
        where = f"1 match · line {d.first_line}"
    elif any((e.path or "").startswith("run.") for e in d.evidence):
        where = "from watching the job"
    else:
        where = "from machine facts"
    lines.append(st("dim", f"   symptom {d.symptom} · rule {d.rule.id} · confidence {d.confidence:.2f} · {where}"))
    action = action_line(d)
    if action:
        lines.append("   " + st("bold", action))
    seen = _seen_on(d)
    if seen:
        lines.append(st("dim", f"   seen on {seen}"))
    for note in d.notes:
        lines.append(st("dim", f"   note: {note}"))
    lines.append("   evidence:")
    for e in d.evidence[: 6 if full else 2]:
        if e.source == "log":
            text = e.text
            if e.span and st.colour:
                a, b = e.span
                text = text[:a] + st("match", text[a:b]) + text[b:]
            lines.append(f"   {e.line:>7} | {text}")
        else:
            lines.append(f"      fact | {e.text}")
    if full:
        lines.append("")
        lines += ["   " + ln if ln else "" for ln in d.explain.splitlines()]
        if d.fixes:
            lines.append("")
            lines.append("   fixes:")
            for f in d.fixes:
                params = " ".join(f"{k}={v}" for k, v in f.params.items() if k != "text")
                lines.append(f"   - {f.title or f.fixer}  ({f.fixer}{' ' + params if params else ''})")
                text = f.params.get("text")
                if isinstance(text, str):
                    lines += ["       " + ln for ln in textwrap.dedent(text).strip().splitlines()]
            lines.append(f"   preview: troubleshoot fix --rule {d.rule.id}"
                         + (f" --log {shlex.quote(log_arg)}" if d.count else "") + "   (add --apply to make the changes)")
        if d.rule.references:
            lines.append("")
            lines.append("   references:")
            lines += [f"   - {r}" for r in d.rule.references]
    return "\n".join(lines) + "\n"


def _seen_on(d: Diagnosis) -> str:
    """Where a diagnosis of several logs or nodes was seen (empty for one log)."""
    from troubleshoot.textsafe import terminal_safe

    parts = []
    if d.ranks:
        parts.append(f"rank{'s' if len(d.ranks) > 1 else ''} {', '.join(map(str, d.ranks))}")
    if d.nodes:
        parts.append(f"node{'s' if len(d.nodes) > 1 else ''} {', '.join(d.nodes)}")
    if len(d.files) > 1 or (d.files and parts):
        first = d.files[0] + (f" (+{len(d.files) - 1} more)" if len(d.files) > 1 else "")
        parts.append(f"first in {first}")
    if d.first_seen:
        parts.append(f"at {d.first_seen}")
    return terminal_safe(" · ".join(parts), keep_newlines=False)
