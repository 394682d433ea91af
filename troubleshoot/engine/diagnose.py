"""Rules x scan result x facts -> ranked diagnoses. Pure functions: no I/O here."""

from __future__ import annotations

import re
from typing import Iterable, Mapping

from troubleshoot.engine import conditions, xidevents
from troubleshoot.engine.fill import interpolate, lookup, render_fix, short
from troubleshoot.records import record, replace
from troubleshoot.scan import ScanPattern, ScanResult, series_view
from troubleshoot.model import SEVERITIES, Diagnosis, Evidence, Rule

LOG_ROLE = "log"
WITHOUT_ROLE = "without_log"
DOWNSTREAM_FACTOR = 0.5
MEMO_LIMIT = 4096  # distinct capture values whose `where` verdict a line filter remembers


def with_role(i: int) -> str:
    return f"with_log:{i}"


def line_filter(rule: Rule):
    """The rule's `match.where` as a predicate on one line's captures (None: every line counts)."""
    if not rule.where:
        return None
    trees = [c.tree for c in rule.where]

    def keep(captures: dict) -> bool:
        env = {"log": {k: v for k, v in captures.items() if v is not None}}
        return all(conditions.evaluate(t, env) is True for t in trees)

    # The answer depends only on the captures the conditions read: remembered per distinct
    # value of those, so a line printed every step is judged once, not once per line.
    names: list[str] = []
    for t in trees:
        for path in conditions.paths(t):
            head, _, rest = path.partition(".")
            name = rest.partition(".")[0].partition("[")[0]  # up to the first "." or "["
            if head != "log" or not name:
                return keep  # reads something else as well: no memo
            if name not in names:
                names.append(name)
    memo: dict[tuple, bool] = {}

    def keep_memo(captures: dict) -> bool:
        key = tuple(captures.get(n) for n in names)
        found = memo.get(key)
        if found is None:
            found = keep(captures)
            if len(memo) < MEMO_LIMIT:
                memo[key] = found
        return found

    return keep_memo


def leading_patterns(rules: Iterable[Rule], pack: str) -> int:
    """How many of `scan_patterns(rules)` come first from the rules of `pack` at the head of
    the list (the shipped rules, before a team's): the scanner keeps their database apart, the
    same whatever is added after them."""
    n = 0
    for r in rules:
        if r.origin.pack != pack:
            break
        n += len(r.log) + len(r.with_log) + len(r.without_log)  # what scan_patterns makes of one rule
    return n


def scan_patterns(rules: Iterable[Rule]) -> list[ScanPattern]:
    """Every pattern the scanner must look for, tagged with its rule and role."""
    out: list[ScanPattern] = []
    for r in rules:
        keep = line_filter(r)
        split = None if r.catalog is None else "xid" if r.catalog == "xid" else "entry"
        out += [ScanPattern(r.id, LOG_ROLE, p.source, keep, split) for p in r.log]
        out += [ScanPattern(r.id, with_role(i), p.source) for i, p in enumerate(r.with_log)]
        out += [ScanPattern(r.id, WITHOUT_ROLE, p.source) for p in r.without_log]
    return out


@record(frozen=True)
class ConditionResult:
    source: str
    value: object  # True, False or conditions.UNKNOWN
    missing: tuple[str, ...]
    reads: tuple[tuple[str, object], ...]


@record(frozen=True)
class RuleTrace:
    """Why a rule did or did not fire: every part's outcome."""

    rule: Rule
    log_lines: tuple  # LineHit of match.log (bounded)
    log_count: int
    capped: bool
    with_log: tuple[tuple[str, int | None], ...]  # (pattern, first line or None)
    without_log: tuple[tuple[str, int | None], ...]
    conditions: tuple[ConditionResult, ...]
    captures: Mapping[str, str]
    series: Mapping[str, dict]
    fired: bool
    reason: str


def trace_rule(rule: Rule, scan: ScanResult | None, facts: Mapping | None) -> RuleTrace:
    """Evaluate one rule against a scan and facts, recording the outcome of each part."""
    return _trace(rule, scan, xidevents.with_verdicts(facts))


def _trace(rule: Rule, scan: ScanResult | None, facts: Mapping | None, only_fired: bool = False) -> RuleTrace | None:
    """`trace_rule` on facts whose verdicts (Xid events') are already computed. `only_fired`:
    None for a rule that does not fire, found at its first failing part (the diagnosis needs
    the traces of the rules that fire alone; `rules why` needs every part of one)."""
    log_hits = scan.get(rule.id, LOG_ROLE) if scan else None
    withs = []
    for i, p in enumerate(rule.with_log):
        h = scan.get(rule.id, with_role(i)) if scan else None
        withs.append((p.source, h.first_line if h else None))
    without_hits = scan.get(rule.id, WITHOUT_ROLE) if scan else None
    reason = _log_reason(rule, scan, log_hits, withs, without_hits)
    if only_fired and reason:
        return None
    captures = dict(log_hits.captures) if log_hits else {}
    env = dict(facts or {})
    env["log"] = captures
    env["series"] = series_view(log_hits.series) if log_hits else {}
    evaluated = []
    for c in rule.facts:
        missing: list[str] = []
        value = conditions.evaluate(c.tree, env, missing)
        if only_fired and value is not True:
            return None
        evaluated.append((c, value, missing))
    # What each condition read, once all are evaluated: a rule that stops at one never looks.
    conds = [ConditionResult(c.source, value, tuple(missing), conditions.tree_reads(c.tree, env))
             for c, value, missing in evaluated]
    reason = reason or _condition_reason(conds)
    withouts = [(p.source, without_hits.first_line if without_hits else None) for p in rule.without_log]
    return RuleTrace(
        rule=rule,
        log_lines=tuple(log_hits.lines) if log_hits else (),
        log_count=log_hits.count if log_hits else 0,
        capped=bool(log_hits and log_hits.capped),
        with_log=tuple(withs),
        without_log=tuple(withouts),
        conditions=tuple(conds),
        captures=captures,
        series=env["series"],
        fired=not reason,
        reason=reason or "fired",
    )


def _condition_reason(conds: list[ConditionResult]) -> str:
    """Why the rule's conditions keep it from firing, or "" when they do not."""
    if any(c.value is conditions.UNKNOWN for c in conds):
        missing = sorted({m for c in conds for m in c.missing})
        return "a condition is unknown" + (f" (missing facts: {', '.join(missing)})" if missing else "")
    if any(c.value is not True for c in conds):
        return "a condition is false"
    return ""


def _log_reason(rule: Rule, scan: ScanResult | None, log_hits, withs: list, without_hits) -> str:
    """Why the rule's log parts keep it from firing, or "" when they do not."""
    if rule.log and scan is None:
        return "no log was given"
    if rule.log and not log_hits:
        return "no line matched match.log"
    if rule.catalog not in (None, "xid") and not _names_an_entry(rule, log_hits):
        return f"the lines name no {rule.catalog} entry that means something"
    if any(line is None for _, line in withs):
        return "a with_log pattern matched no line"
    if without_hits:
        return f"a without_log pattern matched line {without_hits.first_line}"
    return ""


def diagnose(rules: Iterable[Rule], scan: ScanResult | None, facts: Mapping | None = None) -> list[Diagnosis]:
    """One source's fired rules as diagnoses, refined, related and ranked best first. A rule
    that compares ranks (Rule.compare) needs peers: it fires only where several sources are
    merged (engine.merge), never here."""
    found = [d for d in fired(rules, scan, facts) if not d.rule.compare]
    return rank(found, scan.total_lines if scan else 0)


class _RuleIndex:
    """A rule list sorted for `fired`: the rules with `match.log` patterns by id (each is traced
    only when its patterns matched), the rules that read no log at all, and the rest."""

    def __init__(self, rules: list[Rule]):
        self.rules = rules
        self.by_id: dict[str, list[tuple[int, Rule]]] = {}
        self.pure: list[tuple[int, Rule]] = []  # read facts alone
        self.context: list[tuple[int, Rule]] = []  # no match.log, but context patterns
        for i, r in enumerate(rules):
            if r.log:
                self.by_id.setdefault(r.id, []).append((i, r))
            elif r.with_log or r.without_log:
                self.context.append((i, r))
            else:
                self.pure.append((i, r))


class FactTraces:
    """What `fired` keeps between calls for one rule list: the list sorted (_RuleIndex), and
    the traces of the rules that read no log per facts mapping (the same for every log judged
    by the same machine's facts), so a folder of a thousand rank logs evaluates those once,
    not once per log. Facts are keyed by the mapping's identity (each is kept, so an identity
    is never reused while this lives)."""

    def __init__(self) -> None:
        self._index: _RuleIndex | None = None
        self._by_facts: dict[int, tuple[Mapping | None, list[tuple[int, RuleTrace]]]] = {}

    def index(self, rules: list[Rule]) -> _RuleIndex:
        if self._index is None or not _same(self._index.rules, rules):
            self._index, self._by_facts = _RuleIndex(rules), {}
        return self._index

    def traces(self, index: _RuleIndex, facts: Mapping | None, judged: Mapping | None) -> list[tuple[int, RuleTrace]]:
        """(rule index, trace) of the rules that read no log and fire on `judged`, the verdicts
        of `facts`."""
        kept = self._by_facts.get(id(facts))
        if kept is None or kept[0] is not facts:
            kept = self._by_facts[id(facts)] = (facts, _fired(index.pure, None, judged))
        return kept[1]


def _same(a: list, b: list) -> bool:
    return a is b or (len(a) == len(b) and all(x is y for x, y in zip(a, b)))


def _traces(rules: Iterable[Rule], scan: ScanResult | None, facts: Mapping | None, judged: Mapping | None,
            memo: FactTraces | None) -> list[RuleTrace]:
    """The traces of the rules that fire, in rule order. A rule with `match.log` patterns none
    of whose lines matched cannot (its trace would say "no line matched"): it is not looked at
    at all, which on a rank log that matched two patterns skips all but a handful of the rules."""
    rules = rules if isinstance(rules, list) else list(rules)
    index = memo.index(rules) if memo is not None else _RuleIndex(rules)
    out = _fired(index.context, scan, judged)
    for group, role in (scan.hits if scan is not None else ()):
        if role == LOG_ROLE:
            out += _fired(index.by_id.get(group, ()), scan, judged)
    out += memo.traces(index, facts, judged) if memo is not None else _fired(index.pure, scan, judged)
    return [t for _, t in sorted(out, key=lambda it: it[0])]  # in rule order, as if each was traced


def _fired(indexed: Iterable[tuple[int, Rule]], scan: ScanResult | None, judged: Mapping | None) -> list[tuple[int, RuleTrace]]:
    return [(i, t) for i, r in indexed if (t := _trace(r, scan, judged, only_fired=True)) is not None]


def fired(rules: Iterable[Rule], scan: ScanResult | None, facts: Mapping | None = None,
          memo: FactTraces | None = None) -> list[Diagnosis]:
    """The fired rules as diagnoses (refined ones dropped), not yet related or ranked: what
    several sources' results are merged from before ranking them together. `memo` keeps the
    traces of the rules that read no log between calls with the same facts mapping."""
    judged = xidevents.with_verdicts(facts)
    hits = _traces(rules, scan, facts, judged, memo)
    facts = judged
    by_id = {t.rule.id: t.rule for t in hits}
    refined: set[str] = set()
    covered: dict[str, set[str]] = {}  # catalog rule id -> Xid codes a more specific catalog rule explains
    for t in hits:
        for ref in t.rule.refines:
            target = by_id.get(ref)
            if t.rule.catalog == "xid" and target is not None and target.catalog == "xid":
                covered.setdefault(ref, set()).update(_parts(t, scan))
            else:
                refined.add(ref)
    hits = [t for t in hits if t.rule.id not in refined]
    entries_covered = {pair for t in hits for pair in t.rule.covers}
    diagnoses: list[Diagnosis] = []
    codes = tuple(sorted({int(c) for t in hits if t.rule.catalog == "xid" for c in _parts(t, scan) if c.isdigit()}))
    for t in hits:
        if t.rule.catalog == "xid" and scan is not None:
            diagnoses += _xid_diagnoses(t, scan, facts, covered.get(t.rule.id, set()), codes)
        elif t.rule.catalog and scan is not None:
            diagnoses += _entry_diagnoses(t, scan, facts, entries_covered)
        else:
            diagnoses.append(_diagnosis(t, facts))
    if any(d.entry for d in diagnoses):
        diagnoses = _catalog_as_fallback(diagnoses)
    if not any(d.xid for d in diagnoses):
        return diagnoses
    from troubleshoot.engine import gpufaults

    return gpufaults.follow_recovery_changes(diagnoses)


def _parts(t: RuleTrace, scan: ScanResult | None) -> set[str]:
    hits = scan.get(t.rule.id, LOG_ROLE) if scan else None
    return {c for c in hits.parts if c} if hits else set()


def _xid_diagnoses(t: RuleTrace, scan: ScanResult, facts: Mapping | None, skip: set[str],
                   codes: tuple[int, ...]) -> list[Diagnosis]:
    """One diagnosis per Xid code of a catalog rule, with the verdict's symptom, severity and action."""
    from troubleshoot.engine import gpufaults

    hits = scan.get(t.rule.id, LOG_ROLE)
    out = []
    for code, part in (hits.parts.items() if hits else ()):
        if code in skip:
            continue
        sub = replace(t, log_lines=tuple(part.lines), log_count=part.count, capped=part.capped,
                      captures=dict(part.captures))
        v = (gpufaults.log_verdict(int(code), [h.text for h in part.lines], codes, facts, sub.captures.get("pci"))
             if code.isdigit() else None)
        if v is None:
            out.append(_diagnosis(sub, facts))
            continue
        extra = gpufaults.catalog_words(v)
        rule = replace(t.rule, symptom=v.symptom, severity=v.severity,
                       title=interpolate(t.rule.title, {**sub.captures, **extra}, facts))
        d = _diagnosis(replace(sub, rule=rule), facts, extra)
        notes = d.notes + ((f"Xid {v.code}: {v.detail}",) if v.detail else ())
        out.append(replace(d, action=v.action, notes=notes,
                           xid={"code": v.code, "pci": sub.captures.get("pci"), "name": v.name}))
    return out


def _names_an_entry(rule: Rule, hits) -> bool:
    from troubleshoot.engine import catalogs

    catalog = catalogs.load(rule.catalog)
    return any((e := catalog.lookup(text)) is not None and e.symptom for text in hits.parts)


def _entry_diagnoses(t: RuleTrace, scan: ScanResult, facts: Mapping | None,
                     covered: set[tuple[str, str]]) -> list[Diagnosis]:
    """One diagnosis per message-catalog entry a rule's lines name, with the entry's symptom,
    severity and action; an entry that means nothing, or that a fired rule covers, gives none."""
    from troubleshoot.engine import catalogs

    hits = scan.get(t.rule.id, LOG_ROLE)
    catalog = catalogs.load(t.rule.catalog)
    by_entry: dict[str, list] = {}
    for text, part in (hits.parts.items() if hits else ()):
        e = catalog.lookup(text)
        if e is not None and e.symptom and (catalog.id, e.key) not in covered:
            by_entry.setdefault(e.key, []).append(part)
    out = []
    for key, parts in by_entry.items():
        e = catalog.entry(key)
        lines = sorted((h for p in parts for h in p.lines), key=lambda h: h.line)
        sub = replace(t, log_lines=tuple(lines), log_count=sum(p.count for p in parts),
                      capped=any(p.capped for p in parts), captures=dict(parts[0].captures))
        extra = e.words(catalog)
        rule = replace(t.rule, symptom=e.symptom, severity=e.severity,
                       title=interpolate(t.rule.title, {**sub.captures, **extra}, facts))
        d = _diagnosis(replace(sub, rule=rule), facts, extra)
        out.append(replace(d, action=e.action or t.rule.action,
                           entry={"catalog": catalog.id, "version": catalog.version, "key": e.key, "code": e.code}))
    return out


def _catalog_as_fallback(diagnoses: list[Diagnosis]) -> list[Diagnosis]:
    """A message catalog speaks where no rule written for the message does: an entry's
    diagnosis whose lines another rule's diagnosis already shows, or whose symptom another
    rule already found in this log, is left out. Its first step is not: a written diagnosis of
    those lines that names none takes the entry's (the catalog's next step for the message)."""
    seen = [(d, {e.line for e in d.evidence if e.source == "log" and e.line is not None}) for d in diagnoses]
    written = [(d, lines) for d, lines in seen if d.entry is None]
    shown = set().union(*(lines for _, lines in written))
    symptoms = {d.symptom for d, _ in written}
    kept, steps = [], {}
    for d, lines in seen:
        if d.entry is not None and (d.symptom in symptoms or lines <= shown):
            for line in lines if d.action else ():
                steps.setdefault(line, d.action)
        else:
            kept.append((d, lines))
    return [_with_step(d, lines, steps) for d, lines in kept]


def _with_step(d: Diagnosis, lines: set, steps: Mapping[int, str]) -> Diagnosis:
    """A written diagnosis without a first step, given the step of the first of its lines an
    entry left out named."""
    if d.entry is not None or d.action is not None:
        return d
    step = next((steps[line] for line in sorted(lines) if line in steps), None)
    return d if step is None else replace(d, action=step)


def _series_words(series: Mapping[str, dict]) -> dict[str, str]:
    """`{series.NAME.KEY}` for explanations: a followed number as a person reads it."""
    out = {}
    for name, d in series.items():
        for key, value in d.items():
            if isinstance(value, float):
                value = f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"
            out[f"series.{name}.{key}"] = str(value)
    return out


def _diagnosis(t: RuleTrace, facts: Mapping | None, extra: Mapping[str, str] | None = None) -> Diagnosis:
    rule = t.rule
    values = dict(t.captures)
    words = {**values, **_series_words(t.series), **(extra or {})}  # what `{name}` placeholders may use
    evidence = [Evidence(source="log", text=h.text, line=h.line, span=(h.start, h.end)) for h in t.log_lines]
    pasted = (facts or {}).get(PASTED_LINES) or {}
    for cond, c in zip(rule.facts, t.conditions):
        for path, value in c.reads:
            if path.startswith(("log.", "series.")) or any(e.path == path for e in evidence):
                continue
            evidence.append(Evidence(source="fact", text=f"{path} = {short(value)}", path=path, value=value))
        evidence += _pasted_evidence(cond.tree, pasted, evidence)
    confidence = rule.confidence
    explain = interpolate(rule.explain, words, facts, markdown=True)
    said = []
    env = dict(facts or {})
    env["log"] = values
    env["series"] = t.series
    for ctx in rule.context:
        if conditions.evaluate(ctx.when.tree, env) is True:
            confidence = min(1.0, max(0.0, confidence + ctx.confidence))
            if ctx.note:
                said.append(interpolate(ctx.note, values, facts, markdown=True))
            for path in conditions.paths(ctx.when.tree):
                if not path.startswith(("log.", "series.")) and not any(e.path == path for e in evidence):
                    value = lookup(env, path)
                    evidence.append(Evidence(source="fact", text=f"{path} = {short(value)}", path=path, value=value))
            evidence += _pasted_evidence(ctx.when.tree, pasted, evidence)
    if said:
        where = "From the log" if pasted else "On this machine"
        explain += f"\n\n**{where}:** " + " ".join(said)
    notes = []
    if t.log_count > len(t.log_lines):
        first, last = t.log_lines[0].line, t.log_lines[-1].line
        if t.capped:
            notes.append(f"matched at least {t.log_count} lines (counting stopped there), first {first}, "
                         f"last counted {last}")
        else:
            notes.append(f"matched {t.log_count} lines, first {first}, last {last}")
    if "{" in rule.title:
        rule = replace(rule, title=interpolate(rule.title, words, facts))
    return Diagnosis(
        rule=rule,
        confidence=round(confidence, 3),
        explain=explain,
        evidence=tuple(evidence),
        fixes=tuple(render_fix(f, words, facts) for f in rule.fixes),
        count=t.log_count,
        first_line=t.log_lines[0].line if t.log_lines else None,
        last_line=t.log_lines[-1].line if t.log_lines else None,
        captures=values,
        notes=tuple(notes),
        action=rule.action,
        series=dict(t.series) if rule.compare else {},
    )


# Facts read from state dumps pasted into the log carry the line that showed them (troubleshoot.paste).
PASTED_LINES = "_pasted_lines"


def _pasted_evidence(tree, pasted: Mapping, evidence: list) -> list:
    """The pasted lines behind the facts a condition reads, as log evidence."""
    out: list = []
    if not pasted:
        return out
    for path in conditions.qualified_paths(tree):
        where = pasted.get(re.sub(r"\[\d+\]", "[]", path))
        if where and not any(e.source == "log" and e.line == where[0] for e in evidence + out):
            out.append(Evidence(source="log", text=where[1], line=where[0], path=path))
    return out


def relate(diagnoses: list[Diagnosis], where: str = "the same log") -> list[Diagnosis]:
    """Mark each diagnosis whose rule names a found symptom in `downstream_of` as its consequence
    (confidence halved, a note says which)."""
    found = {}
    for d in diagnoses:
        found.setdefault(d.symptom, d)
    adjusted = []
    for d in diagnoses:
        causes = tuple(s for s in d.rule.downstream_of if s in found and s != d.symptom
                       and d.symptom not in found[s].rule.downstream_of)
        if causes:
            names = ", ".join(f"{s} ({found[s].rule.id})" for s in causes)
            d = replace(d, confidence=round(d.confidence * DOWNSTREAM_FACTOR, 3), downstream_of_found=causes,
                        notes=d.notes + (f"likely a consequence of {names}, found in {where}",))
        adjusted.append(d)
    return adjusted


def rank(diagnoses: list[Diagnosis], total_lines: int) -> list[Diagnosis]:
    """Causes before their consequences, then severity, then confidence weighted by recency."""
    adjusted = relate(diagnoses)

    def key(d: Diagnosis):
        if d.last_line and total_lines:
            position = d.last_line / total_lines
        else:
            position = 0.9
        score = d.confidence * (0.75 + 0.25 * position)
        return (1 if d.downstream_of_found else 0, SEVERITIES.index(d.severity), -score, d.first_line or 0, d.rule.id)

    return sorted(adjusted, key=key)
