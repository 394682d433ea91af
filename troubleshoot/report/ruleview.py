"""What every front end shows of a rule as its file defines it (`rules show`, `rules list`, the
TUI's Rules tab): its view model, built by one function, with the same rules for quoting as
report.views. Kept apart from the diagnosis's views, which every diagnosis imports."""

from typing import TYPE_CHECKING, Any, Mapping, Sequence

from troubleshoot.records import record
from troubleshoot.report.views import safe_block, safe_line, value_text

if TYPE_CHECKING:
    from troubleshoot.model import Rule


@record(frozen=True)
class RuleFixView:
    fixer: str
    title: str  # "" when the rule gives none
    params: tuple[tuple[str, str], ...]  # (name, value as written: text, else JSON), terminal-safe


@record(frozen=True)
class RuleView:
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
