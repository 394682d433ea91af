"""Plain-text report for a terminal: the top diagnosis first, evidence with line numbers."""

from __future__ import annotations

import shlex
import shutil
import textwrap
from dataclasses import dataclass
from typing import Sequence

from troubleshoot.model import Diagnosis
from troubleshoot.report import mdtext
from troubleshoot.textsafe import terminal_safe

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


@dataclass(frozen=True)
class _Opts:
    log_args: tuple[str, ...] = ("--log", "LOG")  # how the `preview:` line names the logs read
    facts_args: tuple[str, ...] = ()  # --snapshot FILE, when the facts came from one
    hint_args: tuple[str, ...] = ()  # --rules DIR / -p MODULE: a printed command must repeat them
    rich: bool = False  # Markdown rendered for a terminal, else plain text


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
    shown = list(diagnoses)[: limit or None]
    out: list[str] = []
    n = len(diagnoses)
    out.append(st("bold", f"{n} diagnos{'i' if n == 1 else 'e'}s, most likely first") + "\n")
    if log_args is None:
        log_arg = source if source not in ("the log", "stdin", "pasted log", "machine facts", "this machine") else "LOG"
        log_args = ("--log", log_arg)
    opts = _Opts(tuple(log_args), tuple(facts_args), tuple(hint_args), colour if rich is None else rich)
    for i, d in enumerate(shown, 1):
        out.append(_one(i, d, st, full=(i == 1), opts=opts))
    if len(shown) < n:
        out.append(st("dim", f"... {n - len(shown)} more (use --all)") + "\n")
    return "\n".join(out)


def _markdown(text: str, opts: _Opts, colour: bool, indent: str) -> list[str]:
    if opts.rich:
        width = min(shutil.get_terminal_size((100, 24)).columns, 100) - len(indent)
        body = mdtext.to_terminal(text, width, colour)
    else:
        body = mdtext.to_plain(text)
    return [indent + ln if ln.strip() else "" for ln in body.splitlines()]


def _one(i: int, d: Diagnosis, st: Style, full: bool, opts: _Opts = _Opts()) -> str:
    safe = terminal_safe
    lines = []
    sev = st(d.severity, d.severity.upper())
    lines.append(f"{i}. [{sev}] {st('bold', safe(d.title, keep_newlines=False))}")
    if d.count > 1:
        where = f"{d.count} matches · lines {d.first_line}-{d.last_line}"
    elif d.count == 1:
        where = f"1 match · line {d.first_line}"
    elif any((e.path or "").startswith("run.") for e in d.evidence):
        where = "from watching the job"
    else:
        where = "from machine facts"
    about = f"   symptom {d.symptom} · rule {d.rule.id} · confidence {d.confidence:.2f} · {where}"
    lines.append(st("dim", safe(about, keep_newlines=False)))
    action = action_line(d)
    if action:
        lines.append("   " + st("bold", safe(action, keep_newlines=False)))
    seen = _seen_on(d)
    if seen:
        lines.append(st("dim", f"   seen on {seen}"))
    for note in d.notes:
        lines.append(st("dim", f"   note: {safe(mdtext.to_plain(note), keep_newlines=False)}"))
    lines.append("   evidence:")
    for e in d.evidence[: 6 if full else 2]:
        if e.source == "log":
            text = e.text
            if e.span and st.colour:
                a, b = e.span
                text = safe(text[:a], False) + st("match", safe(text[a:b], False)) + safe(text[b:], False)
            else:
                text = safe(text, keep_newlines=False)
            lines.append(f"   {e.line:>7} | {text}")
        else:
            lines.append(f"      fact | {safe(e.text, keep_newlines=False)}")
    if full:
        lines.append("")
        lines += _markdown(d.explain, opts, st.colour, "   ")
        if d.fixes:
            lines.append("")
            lines.append("   fixes:")
            for f in d.fixes:
                params = " ".join(f"{k}={v}" for k, v in f.params.items() if k != "text")
                head = f"{f.title or f.fixer}  ({f.fixer}{' ' + params if params else ''})"
                lines.append(f"   - {safe(head, keep_newlines=False)}")
                text = f.params.get("text")
                if isinstance(text, str):
                    lines += _markdown(textwrap.dedent(text).strip(), opts, st.colour, "       ")
            # The log is named whenever the diagnosis read it: its lines, or facts pasted in it.
            from_log = d.count or any(e.source == "log" for e in d.evidence)
            command = ["troubleshoot", "fix", "--rule", d.rule.id, *(opts.log_args if from_log else ()),
                       *opts.facts_args, *opts.hint_args]
            lines.append(f"   preview: {safe(shlex.join(command), keep_newlines=False)}"
                         "   (add --apply to make the changes)")
        if d.rule.references:
            lines.append("")
            lines.append("   references:")
            lines += [f"   - {safe(r, keep_newlines=False)}" for r in d.rule.references]
    return "\n".join(lines) + "\n"


def _seen_on(d: Diagnosis) -> str:
    """Where a diagnosis of several logs or nodes was seen (empty for one log)."""
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
