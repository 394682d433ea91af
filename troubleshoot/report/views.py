"""What every front end shows of a diagnosis: its view model, built by one function from the
model objects (a rule's view is in report.ruleview, an applied fix's in report.historyview).
The views are frozen records (records.record): a NamedTuple costs twice as much to define, and
this module is imported by every command that prints a diagnosis.

The text report, the Markdown report, the JSON document, `rules show`, `history` and the TUI
render these views and decide only how they look. What they show is decided here once: which
fields, in which order, how a missing value is worded, and how data is quoted. Text from rules,
logs, snapshots and journals is data: every string meant for people is terminal-safe here
(control characters shown as visible escapes; one line where a field is one line), and a
`{placeholder}` that no captured value or fact filled is worded as the missing value it stands
for. Renderers still quote for their medium (Markdown escapes, Rich `Text` objects), since a
string safe for a terminal can still be read as markup. The `record` of a view is the data as
found, for the JSON documents whose layout docs/json-output.md fixes: JSON quotes it itself.
"""

import json
import os
import re
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from troubleshoot.lazyre import lazy
from troubleshoot.records import record
from troubleshoot.textsafe import terminal_safe

if TYPE_CHECKING:
    from troubleshoot.model import Diagnosis, Evidence, Fix, Rule

# A `{name}` the engine fills from a capture or a fact (engine.diagnose reads the same form).
_PLACEHOLDER = lazy(r"\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)(?:\|([^{}\n]*))?\}")
THIS_MACHINE = "/ (this machine)"  # where a fix applied without --root changed files
LOCAL_FACTS = "this machine"  # what facts describe unless they were pasted or name their node
# Sources that are no path: a printed command names the log as LOG instead.
_NOT_A_PATH = ("the log", "stdin", "pasted log", "machine facts", LOCAL_FACTS)


def safe_line(text: object) -> str:
    """One line, terminal-safe: for fields that are one line (titles, ids, values)."""
    return terminal_safe(str(text), keep_newlines=False)


def safe_block(text: object) -> str:
    """Terminal-safe, newlines kept: for Markdown bodies and multi-line values."""
    return terminal_safe(str(text))


# ------------------------------------------------------------------ diagnoses

@record(frozen=True)
class Invocation:
    """How a printed command repeats the one that made the diagnoses (`troubleshoot fix
    --rule ...` must read the same logs, facts and rules)."""

    log_args: tuple[str, ...] = ("--log", "LOG")  # each --log as given, or --log DIR
    facts_args: tuple[str, ...] = ()  # --snapshot FILE, when the facts came from one
    hint_args: tuple[str, ...] = ()  # --rules DIR / -p MODULE

    @classmethod
    def of(cls, source: str = "the log", log_args: Sequence[str] | None = None, facts_args: Sequence[str] = (),
           hint_args: Sequence[str] = ()) -> "Invocation":
        """`log_args` by default: `--log SOURCE`, or `--log LOG` when the source is no path."""
        if log_args is None:
            log_args = ("--log", source if source not in _NOT_A_PATH else "LOG")
        return cls(tuple(log_args), tuple(facts_args), tuple(hint_args))


@record(frozen=True)
class EvidenceView:
    """A log line (`line` its number) or a fact (`path` its path), one terminal-safe line cut
    into the part before the match, the match and the rest."""

    source: str  # "log" or "fact"
    line: int | None
    before: str
    match: str
    after: str
    path: str | None  # the fact's path; for a line of pasted state, the fact it showed
    file: str | None  # the log the line came from, when several were read

    @property
    def text(self) -> str:
        return self.before + self.match + self.after


@record(frozen=True)
class FactView:
    """A fact a diagnosis used: its path, its value, and the machine it describes."""

    path: str
    value: str
    machine: str


@record(frozen=True)
class FixView:
    fixer: str
    title: str  # the fix's title, else its fixer
    params: tuple[tuple[str, str], ...]  # (name, value) but the advice text, one line each
    advice: str  # the advice's Markdown (its `text` parameter, dedented), or ""


@record(frozen=True)
class DiagnosisView:
    key: str  # one per diagnosis: a rule gives one per Xid code
    rule: str
    symptom: str
    title: str
    severity: str
    confidence: float
    action: str  # "Action: ..." (what to do now, in words), or ""
    count: int  # matching log lines (0: found from facts)
    first_line: int | None
    last_line: int | None
    found_by: str  # "log" (its lines), "job" (watching it run), "printed" (facts the log printed) or "facts"
    seen_on: str  # ranks, nodes, first file and time, for several logs; "" for one
    who: str  # where it was seen first: "rank 17 on node gpu-07", a file, or "the log"
    ranks: tuple[int, ...]
    files: tuple[str, ...]  # the logs it was seen in, when several were read
    consequence: bool  # a consequence of another diagnosis found with it
    notes: tuple[str, ...]
    evidence: tuple[EvidenceView, ...]
    facts: tuple[FactView, ...]
    explain: str  # Markdown
    fixes: tuple[FixView, ...]
    preview: str  # the command that previews the fixes, or "" when there is none
    references: tuple[str, ...]
    record: Mapping[str, Any]  # the JSON document's entry (schema 1)


def diagnosis_view(d: "Diagnosis", invocation: Invocation | None = None, machine: str = LOCAL_FACTS) -> DiagnosisView:
    """The view of `d`. `invocation`: what its fix preview command repeats; `machine`: what
    the facts describe when they were not pasted into the log."""
    from troubleshoot.engine.merge import who

    fill = _filler(d.rule, d.captures)
    return DiagnosisView(
        key=d.rule.id + (f":xid{d.xid['code']}" if d.xid else "") + (f":{d.entry['key']}" if d.entry else ""),
        rule=safe_line(d.rule.id), symptom=safe_line(d.symptom), title=fill(safe_line(d.title)),
        severity=safe_line(d.severity), confidence=d.confidence, action=safe_line(action_line(d)),
        count=d.count, first_line=d.first_line, last_line=d.last_line, found_by=_found_by(d),
        seen_on=safe_line(_seen_on(d)), who=safe_line(who(d)), ranks=tuple(d.ranks),
        files=tuple(safe_line(f) for f in d.files),
        consequence=bool(d.downstream_of_found), notes=tuple(fill(safe_line(n)) for n in d.notes),
        evidence=tuple(_evidence(e) for e in d.evidence), facts=_facts(d, machine),
        explain=fill(safe_block(d.explain)), fixes=tuple(_fix(f, fill) for f in d.fixes),
        preview=_preview(d, invocation or Invocation()),
        references=tuple(safe_line(r) for r in d.rule.references), record=diagnosis_record(d))


def action_line(d: "Diagnosis") -> str:
    """"Action: reset the GPU when idle (Xid 48 on 0000:91:00)": what to do now, in words."""
    if not d.action:
        return ""
    from troubleshoot.engine.xid import load_catalog

    words = load_catalog().action_text(d.action) or d.action
    where = ""
    if d.xid:
        where = f" (Xid {d.xid.get('code')}" + (f" on {d.xid['pci']}" if d.xid.get("pci") else "") + ")"
    elif d.entry:
        where = f" ({d.entry.get('key')})"
    return f"Action: {words}{where}"


def _filler(rule: "Rule", captured: Mapping[str, str]):
    """Word each placeholder the engine left unfilled (an optional group that did not take
    part, a fact not probed). Only names the rule's own texts hold as placeholders are worded:
    braces that name nothing the rule provides (code) stay, and so do the names of captures that
    were filled, so a value from a log that spells `{name}` or `{a.b}` mostly shows as read."""
    written = _placeholders_of(rule)
    captures = (set(rule.captures) - set(captured)) & written
    catalog: frozenset[str] = frozenset()
    if rule.catalog is not None:  # what a catalog rule may name besides its captures
        from troubleshoot.engine.catalogs import rule_words

        catalog = rule_words(rule.catalog) & written

    def word(m: re.Match) -> str:
        name = m.group(1)
        if m.group(2) is not None and name in written:  # the rule's own words for a value it did not have
            return m.group(2)
        if name in captures:
            return f"[{name}: not in the log]"
        if name in catalog:
            return f"[{name}: not in the {'Xid' if rule.catalog == 'xid' else rule.catalog} catalog]"
        if "." in name and name in written:
            return f"[{name}: not in the facts]"
        return m.group(0)

    return lambda text: _PLACEHOLDER.sub(word, text) if "{" in text else text


def _placeholders_of(rule: "Rule") -> frozenset[str]:
    """The `{names}` the rule's explanation, context notes and fixes are written with."""
    texts = [rule.explain, *(n.note for n in rule.context)]
    for f in rule.fixes:
        texts.append(f.title)
        texts += [v for v in f.params.values() if isinstance(v, str)]
    return frozenset(m.group(1) for t in texts if isinstance(t, str) for m in _PLACEHOLDER.finditer(t))


def _found_by(d: "Diagnosis") -> str:
    if d.count:
        return "log"
    # facts only, each shown beside the line of the log that printed it (a pasted dump, a pasted
    # monitoring loop's readings), else the watcher's readings of a job it ran, else facts
    if any(e.source == "log" for e in d.evidence):
        return "printed"
    return "job" if any((e.path or "").startswith("run.") for e in d.evidence) else "facts"


def _seen_on(d: "Diagnosis") -> str:
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
    return " · ".join(parts)


def _evidence(e: "Evidence") -> EvidenceView:
    # Cut before quoting: a visible escape is longer than its character, and the span counts characters.
    a, b = e.span if e.source == "log" and e.span else (0, 0)
    return EvidenceView(e.source, e.line, safe_line(e.text[:a]), safe_line(e.text[a:b]), safe_line(e.text[b:]),
                        None if e.path is None else safe_line(e.path), None if e.file is None else safe_line(e.file))


def _facts(d: "Diagnosis", machine: str) -> tuple[FactView, ...]:
    # A fact the log printed about its machine comes with the line that showed it (the engine
    # words such a diagnosis "From the log"); several nodes name themselves.
    if any(e.source == "log" and e.path for e in d.evidence):
        machine = "the log"
    elif d.nodes:
        machine = f"node{'s' if len(d.nodes) > 1 else ''} {', '.join(d.nodes)}"
    return tuple(FactView(safe_line(e.path), safe_line(e.text.split(" = ", 1)[-1]), safe_line(machine))
                 for e in d.evidence if e.source == "fact")


def _fix(f: "Fix", fill) -> FixView:
    text = f.params.get("text")
    advice = ""
    if isinstance(text, str):
        import textwrap  # its wrapper's regexes cost a start 2-5 ms to compile: only for advice text

        advice = fill(safe_block(textwrap.dedent(text).strip()))
    params = tuple((safe_line(k), fill(safe_line(value_text(v)))) for k, v in f.params.items() if k != "text")
    return FixView(safe_line(f.fixer), fill(safe_line(f.title or f.fixer)), params, advice)


def value_text(value: Any) -> str:
    """A parameter's value as written in a rule file: text as it is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _preview(d: "Diagnosis", inv: Invocation) -> str:
    if not d.fixes:
        return ""
    # The log is named whenever the diagnosis read it: its lines, or facts pasted in it.
    from_log = d.count or any(e.source == "log" for e in d.evidence)
    command = ["troubleshoot", "fix", "--rule", d.rule.id, *(inv.log_args if from_log else ()),
               *inv.facts_args, *inv.hint_args]
    import shlex  # here: a diagnosis without fixes prints no command

    return safe_line(shlex.join(command))


def diagnosis_record(d: "Diagnosis") -> dict:
    """The diagnosis as the JSON document holds it (schema 1, docs/json-output.md): its texts
    worded as every view words them (a placeholder the log did not fill says so)."""
    fill = _filler(d.rule, d.captures)
    evidence = []
    for e in d.evidence:
        if e.source == "log":
            evidence.append({"source": "log", "line": e.line, "text": e.text,
                             "span": list(e.span) if e.span else None, "file": e.file})
        else:
            evidence.append({"source": "fact", "path": e.path, "value": e.value, "text": e.text})
    return {
        "rule": d.rule.id,
        "symptom": d.symptom,
        "title": fill(d.title),
        "severity": d.severity,
        "confidence": round(d.confidence, 3),
        "action": d.action,
        "xid": dict(d.xid) if d.xid else None,
        "catalog": dict(d.entry) if d.entry else None,
        "count": d.count,
        "first_line": d.first_line,
        "last_line": d.last_line,
        "evidence": evidence,
        "captures": dict(d.captures),
        "explain": fill(d.explain),
        "fixes": [{"fixer": f.fixer, "title": fill(f.title), "params": dict(f.params)} for f in d.fixes],
        "references": list(d.rule.references),
        "notes": [fill(n) for n in d.notes],
        "origin": {"path": d.rule.origin.path, "line": d.rule.origin.line, "pack": d.rule.origin.pack},
        "ranks": list(d.ranks),
        "nodes": list(d.nodes),
        "files": list(d.files),
        "first_seen": d.first_seen,
    }


def near(path: str) -> str:
    """A path under the current folder, relative to it (shorter, and the same on every checkout)."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel
