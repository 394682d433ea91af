"""`rules test`: every rule's examples must (or must not) make it fire."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Iterable, Mapping

from troubleshoot.engine import conditions
from troubleshoot.engine.diagnose import scan_patterns, trace_rule
from troubleshoot.scan import scan_text
from troubleshoot.model import Rule


@dataclass(frozen=True)
class ExampleFailure:
    rule: Rule
    kind: str  # "match" or "no_match"
    index: int
    line: int
    reason: str

    def __str__(self) -> str:
        want = "should fire but did not" if self.kind == "match" else "should not fire but did"
        return (f"{self.rule.origin.path}:{self.line}: rule {self.rule.id!r}: "
                f"examples.{self.kind}[{self.index}] {want} ({self.reason})")


def log_only(rule: Rule) -> Rule:
    """The rule as examples test it: conditions on machine facts are dropped, since an
    example is a log excerpt; conditions on captured values (`log.*`) still count."""
    kept = tuple(c for c in rule.facts if all(p.startswith(("log.", "series.")) for p in conditions.paths(c.tree)))
    return replace(rule, facts=kept)


def fires_on(rule: Rule, text: str, backend: str | None = None, facts_of: Callable[[str], Mapping] | None = None):
    """Whether the rule fires on an example. A rule that reads facts only is tested with the
    facts `facts_of` reads from the example itself (a pasted `lsmod`, `nvidia-smi`...)."""
    if not rule.log and facts_of is not None:
        return trace_rule(rule, scan_text(text, scan_patterns([rule]), backend), facts_of(text))
    rule = log_only(rule)
    scan = scan_text(text, scan_patterns([rule]), backend)
    return trace_rule(rule, scan, {})


def check_examples(rules: Iterable[Rule], backend: str | None = None,
                   facts_of: Callable[[str], Mapping] | None = None) -> tuple[int, list[ExampleFailure]]:
    checked = 0
    failures: list[ExampleFailure] = []
    for rule in rules:
        if not rule.log and facts_of is None:
            continue
        ex = rule.examples
        for kind, texts, lines in (("match", ex.match, ex.match_lines), ("no_match", ex.no_match, ex.no_match_lines)):
            for i, text in enumerate(texts):
                checked += 1
                t = fires_on(rule, text, backend, facts_of)
                if t.fired != (kind == "match"):
                    line = lines[i] if i < len(lines) else rule.origin.line
                    failures.append(ExampleFailure(rule, kind, i, line, t.reason))
    return checked, failures
