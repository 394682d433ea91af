"""What every front end shows of a diagnosis, a rule and an applied fix: one view model each,
built by one function from the model objects. The views are typed named tuples: as immutable
as frozen dataclasses, and a tenth of their cost to define (this module is imported by every
command that prints a diagnosis). Their annotations are evaluated where they are written (no
`from __future__ import annotations`; the model's classes are named in quotes): NamedTuple
compiles each annotation left as a string, which doubled the module's import.

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
import shlex
from typing import TYPE_CHECKING, Any, Mapping, NamedTuple, Protocol, Sequence

from troubleshoot.lazyre import lazy
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

class Invocation(NamedTuple):
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


class EvidenceView(NamedTuple):
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


class FactView(NamedTuple):
    """A fact a diagnosis used: its path, its value, and the machine it describes."""

    path: str
    value: str
    machine: str


class FixView(NamedTuple):
    fixer: str
    title: str  # the fix's title, else its fixer
    params: tuple[tuple[str, str], ...]  # (name, value) but the advice text, one line each
    advice: str  # the advice's Markdown (its `text` parameter, dedented), or ""


class DiagnosisView(NamedTuple):
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


# ------------------------------------------------------------------ rules

class RuleFixView(NamedTuple):
    fixer: str
    title: str  # "" when the rule gives none
    params: tuple[tuple[str, str], ...]  # (name, value as written: text, else JSON), terminal-safe


class RuleView(NamedTuple):
    id: str
    title: str
    symptom: str
    severity: str
    confidence: float
    origin: str  # path:line
    path: str
    line: int
    pack: str
    downstream_of: tuple[str, ...]
    refines: tuple[str, ...]
    patterns: tuple[tuple[str, str], ...]  # (log | with_log | without_log, pattern)
    facts: tuple[str, ...]  # the conditions on facts, as written
    explain: str  # the rule's Markdown with its placeholders, as written
    fixes: tuple[RuleFixView, ...]
    references: tuple[str, ...]
    examples: tuple[tuple[str, tuple[str, ...]], ...]  # ("must match" | "must not match", its lines)
    overrides: tuple[str, ...]  # the definitions of the same id this one replaced
    record: Mapping[str, Any]  # the row of `rules list --format json`


def rule_view(rule: "Rule", overrides: Sequence[object] = ()) -> RuleView:
    """The view of a rule as its file defines it: its placeholders are what the rule says, so
    they are shown as written. `overrides`: the origins of the definitions it replaced."""
    o = rule.origin
    from troubleshoot.model import as_written

    patterns = tuple((label, safe_line(src)) for label, pats in
                     (("log", rule.log), ("with_log", rule.with_log), ("without_log", rule.without_log))
                     for src in as_written(pats))
    fixes = tuple(RuleFixView(safe_line(f.fixer), safe_line(f.title or ""),
                              tuple((safe_line(k), safe_block(value_text(v))) for k, v in f.params.items()))
                  for f in rule.fixes)
    kinds = (("must match", rule.examples.match), ("must not match", rule.examples.no_match))
    examples = tuple((kind, tuple(safe_line(ln) for ln in t.rstrip().splitlines()))
                     for kind, texts in kinds for t in texts)
    overridden = tuple(str(x) for x in overrides)
    record = {"id": rule.id, "symptom": rule.symptom, "severity": rule.severity, "title": rule.title,
              "pack": o.pack, "path": o.path, "line": o.line, "overrides": list(overridden)}
    return RuleView(
        # a message catalog rule's diagnoses take each entry's symptom: its own serves the loader
        id=safe_line(rule.id), title=safe_line(rule.title),
        symptom="(by entry)" if rule.catalog not in (None, "xid") else safe_line(rule.symptom),
        severity=safe_line(rule.severity), confidence=rule.confidence, origin=safe_line(str(o)),
        path=safe_line(o.path), line=o.line, pack=safe_line(o.pack),
        downstream_of=tuple(safe_line(s) for s in rule.downstream_of),
        refines=tuple(safe_line(s) for s in rule.refines),
        patterns=patterns, facts=tuple(safe_line(c.source) for c in rule.facts), explain=safe_block(rule.explain),
        fixes=fixes, references=tuple(safe_line(r) for r in rule.references), examples=examples,
        overrides=tuple(safe_line(x) for x in overridden), record=record)


def near(path: str) -> str:
    """A path under the current folder, relative to it (shorter, and the same on every checkout)."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


# ------------------------------------------------------------------ applied fixes

class StepView(NamedTuple):
    index: int
    kind: str
    title: str
    status: str
    target: str  # the file it changed, or ""


class HistoryView(NamedTuple):
    """An applied fix as the journal records it; a journal that cannot be trusted is listed
    with status "corrupt" and why, and can be neither trusted nor undone."""

    id: str
    status: str
    fixer: str
    title: str  # the fix's title, else its fixer; for a corrupt journal, why it is not trusted
    root: str  # the folder it changed files under; "" for this machine
    where: str  # the same, worded for a column: "/ (this machine)" when there is no root
    started: str
    steps: tuple[StepView, ...]
    undoable: bool  # undo can be asked (not done already, the journal trusted)
    record: Mapping[str, Any]  # the row of `history --format json`


class JournalEntry(Protocol):
    """What a view reads of fixes.journal.Entry (the fix service sits beside the reports, so
    neither imports the other)."""

    data: Mapping[str, Any]


def history_view(eid: str, entry: JournalEntry | str) -> HistoryView:
    """`entry`: the journal's entry, or why it could not be read (journal.entries())."""
    if isinstance(entry, str):
        return HistoryView(id=safe_line(eid), status="corrupt", fixer="", title=safe_line(entry), root="",
                           where="", started="", steps=(), undoable=False,
                           record={"id": eid, "status": "corrupt", "error": entry})
    d = entry.data
    steps = tuple(StepView(index=s["index"] if isinstance(s.get("index"), int) else n,
                           kind=safe_line(s.get("kind") or ""), title=safe_line(s.get("title") or ""),
                           status=safe_line(s.get("status") or ""), target=safe_line(s.get("target") or ""))
                  for n, s in enumerate((s for s in d.get("steps") or () if isinstance(s, dict)), 1))
    root = safe_line(d.get("root") or "")
    record = {"id": eid, "fixer": d.get("fixer"), "title": d.get("title"), "status": d.get("status"),
              "started": d.get("started"), "root": d.get("root"), "params": d.get("params"),
              "verify": d.get("verify"), "rung": d.get("rung")}
    return HistoryView(id=safe_line(eid), status=safe_line(d.get("status") or "?"),
                       fixer=safe_line(d.get("fixer") or ""), title=safe_line(d.get("title") or d.get("fixer") or ""),
                       root=root, where=root or THIS_MACHINE,
                       started=safe_line(d.get("started") or ""), steps=steps,
                       undoable=d.get("status") != "undone", record=record)
