"""Plain-text report for a terminal: the top diagnosis first, evidence with line numbers. It
renders report.views.DiagnosisView objects: what they hold is already terminal-safe."""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING, Sequence

from troubleshoot.report import mdtext
from troubleshoot.report.views import DiagnosisView, Invocation, diagnosis_view
from troubleshoot.textsafe import terminal_safe

if TYPE_CHECKING:
    from troubleshoot.model import Diagnosis

_COLOURS = {"error": "31", "warning": "33", "info": "36", "dim": "2", "bold": "1", "match": "1;4"}


class Style:
    def __init__(self, colour: bool):
        self.colour = colour

    def __call__(self, name: str, text: str) -> str:
        if not self.colour or not text:
            return text
        return f"\x1b[{_COLOURS[name]}m{text}\x1b[0m"


def render(diagnoses: Sequence[Diagnosis], colour: bool = False, limit: int | None = None,
           source: str = "the log", hint_args: Sequence[str] = (), rich: bool | None = None,
           log_args: Sequence[str] | None = None, facts_args: Sequence[str] = ()) -> str:
    """`rich`: render Markdown for a terminal (default: when `colour`); plain text otherwise.
    `log_args`: the words that make `troubleshoot fix --rule` read the same logs (`--log DIR`,
    each --log as given); by default `--log SOURCE`, or `--log LOG` when the source is no path
    (stdin, pasted). `facts_args`: the words that give it the same facts (`--snapshot FILE`)."""
    st = Style(colour)
    if not diagnoses:
        return f"No known problem found in {terminal_safe(source, keep_newlines=False)}.\n"
    invocation = Invocation.of(source, log_args, facts_args, hint_args)
    shown = [diagnosis_view(d, invocation) for d in list(diagnoses)[: limit or None]]
    n = len(diagnoses)
    out = [st("bold", f"{n} diagnos{'i' if n == 1 else 'e'}s, most likely first") + "\n"]
    rich = colour if rich is None else rich
    for i, v in enumerate(shown, 1):
        out.append(_one(i, v, st, full=(i == 1), rich=rich))
    if len(shown) < n:
        out.append(st("dim", f"... {n - len(shown)} more (use --all)") + "\n")
    return "\n".join(out)


def one_line(d: Diagnosis, still_running: bool = False) -> str:
    """A diagnosis on one line, as `diagnose --follow` and `run` print each as it first fires;
    `still_running`: the job is, and its full diagnosis comes when it ends."""
    v = diagnosis_view(d)
    where = f"symptom {v.symptom}, rule {v.rule}" + ("; still running, full diagnosis at the end" if still_running else "")
    return terminal_safe(f"[{v.severity}] {v.title} ({where})", keep_newlines=False)


def _markdown(text: str, rich: bool, colour: bool, indent: str) -> list[str]:
    if rich:
        width = min(shutil.get_terminal_size((100, 24)).columns, 100) - len(indent)
        body = mdtext.to_terminal(text, width, colour)
    else:
        body = mdtext.to_plain(text)
    return [indent + ln if ln.strip() else "" for ln in body.splitlines()]


_FOUND_BY = {"job": "from watching the job", "facts": "from machine facts", "printed": "from what the log printed"}


def _one(i: int, v: DiagnosisView, st: Style, full: bool, rich: bool) -> str:
    lines = [f"{i}. [{st(v.severity, v.severity.upper())}] {st('bold', v.title)}"]
    if v.count > 1:
        where = f"{v.count} matches · lines {v.first_line}-{v.last_line}"
    elif v.count == 1:
        where = f"1 match · line {v.first_line}"
    else:
        where = _FOUND_BY[v.found_by]
    lines.append(st("dim", f"   symptom {v.symptom} · rule {v.rule} · confidence {v.confidence:.2f} · {where}"))
    if v.action:
        lines.append("   " + st("bold", v.action))
    if v.seen_on:
        lines.append(st("dim", f"   seen on {v.seen_on}"))
    lines += [st("dim", f"   note: {note}") for note in v.notes]
    lines.append("   evidence:")
    for e in v.evidence[: 6 if full else 2]:
        if e.source != "log":
            lines.append(f"      fact | {e.text}")
        elif e.match and st.colour:
            lines.append(f"   {e.line:>7} | {e.before}{st('match', e.match)}{e.after}")
        else:
            lines.append(f"   {e.line:>7} | {e.text}")
    if full:
        lines += _full(v, st, rich)
    return "\n".join(lines) + "\n"


def _full(v: DiagnosisView, st: Style, rich: bool) -> list[str]:
    """What only the first diagnosis shows: the explanation, the fixes, the references."""
    lines = [""] + _markdown(v.explain, rich, st.colour, "   ")
    if v.fixes:
        lines += ["", "   fixes:"]
        for f in v.fixes:
            params = " ".join(f"{k}={value}" for k, value in f.params)
            lines.append(f"   - {f.title}  ({f.fixer}{' ' + params if params else ''})")
            if f.advice:
                lines += _markdown(f.advice, rich, st.colour, "       ")
        lines.append(f"   preview: {v.preview}   (add --apply to make the changes)")
    if v.references:
        lines += ["", "   references:"]
        lines += [f"   - {r}" for r in v.references]
    return lines
