"""Rule files -> Rule objects, with every problem reported as `file:line: message`.

A problem in one rule skips that rule; a file that is not valid YAML is skipped whole; nothing
here raises for bad input. The linter is this same loader plus checks that need the whole set.
The YAML of each file comes from documents (parsed once per change of the file); patterns are
checked by patterncheck, conditions parsed by the condition language (conditions).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from troubleshoot import console
from troubleshoot.engine import catalogs, conditions, yamldoc
from troubleshoot.engine.condparse import ConditionError
from troubleshoot.engine.documents import document
from troubleshoot.engine.patterncheck import check_pattern
from troubleshoot.errors import Problem
from troubleshoot.model import SEVERITIES, Condition, ContextNote, Examples, FixRef, LogPattern, Origin, Rule

RULE_KEYS = {
    "id", "symptom", "title", "severity", "confidence", "downstream_of", "refines", "match",
    "context", "explain", "fixes", "references", "examples", "action", "catalog", "compare",
    "covers",
}
COMPARE_KEYS = {"series", "worse", "by"}
XID = "xid"  # the Xid catalog (rules/xid-catalog.yaml); every other catalog is a message catalog
CONTEXT_KEYS = {"when", "confidence", "note"}
MATCH_KEYS = {"log", "with_log", "without_log", "where", "facts"}
FIX_KEYS = {"fixer", "title", "params"}
EXAMPLE_KEYS = {"match", "no_match"}
FILE_KEYS = {"rules", "disable"}
ID_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


def did_you_mean(key, known) -> str:
    """` (did you mean 'confidence'?)` for a misspelt key of a rule file, else empty."""
    return console.did_you_mean(key, known, cutoff=0.7, quoted=True)


@dataclass
class RuleFile:
    path: str
    rules: list[Rule] = field(default_factory=list)
    disable: list[tuple[str, int]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    parsed: bool = False  # its YAML was parsed now, not read from the cache


def load_rule_file(path: Path, pack: str, taxonomy: dict[str, str]) -> RuleFile:
    """Rules of one file; the parsed YAML comes from a cache keyed by the file's stamp (parsing
    YAML is most of a cold start, and rule files rarely change)."""
    kind, payload, parsed = document(path)
    out = RuleFile(path=str(path), parsed=parsed)
    if kind != "ok":
        out.problems += [Problem(path, line, msg) for line, msg in payload]
        return out
    data = yamldoc.decode(payload[0])
    traps = [yamldoc.Trap(line, msg) for line, msg in payload[1]]
    return _load_rule_file(path, pack, taxonomy, out, data, traps)


def load_rule_text(text: str, path: Path, pack: str, taxonomy: dict[str, str]) -> RuleFile:
    """Rules of a file's text not yet written (no cache): `rules new` checks what it will write."""
    out = RuleFile(path=str(path))
    try:
        data, traps = yamldoc.load(text)
    except yamldoc.YamlError as exc:
        out.problems.append(Problem(path, exc.line, exc.message))
        return out
    return _load_rule_file(path, pack, taxonomy, out, data, traps)


def _load_rule_file(path: Path, pack: str, taxonomy: dict[str, str], out: RuleFile, data, traps) -> RuleFile:
    trap_lines = {t.line for t in traps}
    out.problems += [Problem(path, t.line, t.message) for t in traps]

    if data is None:
        return out
    items: Any
    if isinstance(data, yamldoc.LDict):
        for key in data:
            if key not in FILE_KEYS:
                out.problems.append(Problem(path, data.line_of(key), f"unknown top-level key {key!r}"
                                                                   f"{did_you_mean(key, FILE_KEYS)} (expected: rules, disable)"))
        items = data.get("rules", yamldoc.LList())
        disable = data.get("disable")
        if disable is not None:
            if not isinstance(disable, list) or not all(isinstance(d, str) for d in disable):
                out.problems.append(Problem(path, data.line_of("disable"), "'disable' must be a list of rule ids"))
            else:
                out.disable = [(d, disable.line_of(i)) for i, d in enumerate(disable)]
    else:
        items = data
    if not isinstance(items, yamldoc.LList):
        out.problems.append(Problem(path, getattr(items, "line", 1), "expected a list of rules (or a mapping with a 'rules:' list)"))
        return out

    for i, item in enumerate(items):
        start = items.line_of(i)
        end = items.line_of(i + 1) if i + 1 < len(items) else 10**9
        problems: list[Problem] = []
        rule = _build_rule(item, Path(path), start, pack, taxonomy, problems)
        out.problems += problems
        if rule is not None and not problems and not any(start <= ln < end for ln in trap_lines):
            out.rules.append(rule)
    return out


def _build_rule(item: Any, path: Path, line: int, pack: str, taxonomy: dict[str, str],
                problems: list[Problem]) -> Rule | None:
    def problem(ln: int, msg: str) -> None:
        problems.append(Problem(path, ln, msg))

    if not isinstance(item, yamldoc.LDict):
        problem(line, "a rule must be a mapping")
        return None
    rid = item.get("id")
    label = f"rule {rid!r}: " if isinstance(rid, str) else ""
    if not _required(item, label, problem):
        return None
    confidence = _heading(item, taxonomy, label, problem)
    downstream = _str_list(item, "downstream_of", label, problem)
    for s in downstream:
        if s not in taxonomy:
            problem(item.line_of("downstream_of"), f"{label}downstream_of names unknown symptom {s!r}"
                                                   f"{did_you_mean(s, taxonomy)} (see `troubleshoot rules symptoms`)")
    refines = _str_list(item, "refines", label, problem)
    references = _str_list(item, "references", label, problem)
    for ref in references:
        if not re.match(r"^https?://\S+$", ref):
            problem(item.line_of("references"), f"{label}reference {ref!r} is not an http(s) URL")
    logs, where, facts = _match(item, label, problem)
    action, catalog = _action_and_catalog(item, logs["log"], label, problem)
    covers = _covers(item, label, problem)
    context = tuple(_context(item, label, problem))
    fixes = tuple(_fixes(item, label, problem))
    examples = _examples(item, label, problem, needs=bool(logs["log"]))
    compare = _compare(item, logs["log"], label, problem)
    if problems:
        return None
    return Rule(
        id=rid, symptom=item["symptom"], title=item["title"].strip(), severity=item["severity"],
        explain=item["explain"].strip(), origin=Origin(str(path), line, pack), confidence=confidence,
        downstream_of=tuple(downstream), refines=tuple(refines), log=logs["log"], with_log=logs["with_log"],
        without_log=logs["without_log"], where=where, facts=facts, context=context, fixes=fixes,
        references=tuple(references), examples=examples, action=action, catalog=catalog, compare=compare,
        covers=covers,
    )


def _compare(item, logs, label: str, problem) -> tuple[str, str, float] | None:
    """`compare: {series: step_ms, worse: higher, by: 0.15}`: a capture every log pattern names,
    compared across ranks."""
    spec = item.get("compare")
    if spec is None:
        return None
    line = item.line_of("compare")
    if not isinstance(spec, dict) or set(spec) - COMPARE_KEYS or "series" not in spec:
        problem(line, f"{label}compare must be a mapping of series (a capture), worse (higher or lower) and by")
        return None
    series, worse, by = spec.get("series"), spec.get("worse", "higher"), spec.get("by", 0.15)
    if not logs or any(series not in p.groups for p in logs):
        problem(line, f"{label}compare: every log pattern must capture (?P<{series}>...)")
    if worse not in ("higher", "lower"):
        problem(line, f"{label}compare: worse must be higher or lower, not {worse!r}")
    if isinstance(by, bool) or not isinstance(by, (int, float)) or not 0 < by < 10:
        problem(line, f"{label}compare: by must be a fraction above 0 (0.15: 15 %), not {by!r}")
        return None
    return (str(series), str(worse), float(by))


def _required(item, label: str, problem) -> bool:
    """Unknown keys reported; False when a required key is missing or empty (nothing else is
    checked then: the rule cannot be built)."""
    for key in item:
        if key not in RULE_KEYS:
            problem(item.line_of(key), f"{label}unknown key {key!r}{did_you_mean(key, RULE_KEYS)}")
    ok = True
    for key in ("id", "symptom", "title", "severity", "explain"):
        if key not in item:
            problem(item.line, f"{label}missing required key {key!r}")
            ok = False
        elif not isinstance(item[key], str) or not item[key].strip():
            problem(item.line_of(key), f"{label}{key!r} must be a non-empty string")
            ok = False
    return ok


def _heading(item, taxonomy: dict[str, str], label: str, problem) -> float:
    """The id, symptom and severity checked; the rule's confidence (0.7 when missing or wrong)."""
    rid = item["id"]
    if not ID_RE.match(rid):
        problem(item.line_of("id"), f"rule id {rid!r} is not kebab-case (a-z, 0-9, '-')")
    if item["symptom"] not in taxonomy:
        problem(item.line_of("symptom"), f"{label}unknown symptom {item['symptom']!r}{did_you_mean(item['symptom'], taxonomy)} "
                                             f"(`troubleshoot rules symptoms` lists them; a team adds its own in "
                                             f"a symptoms.yaml in its rule folder)")
    if item["severity"] not in SEVERITIES:
        problem(item.line_of("severity"), f"{label}severity must be one of {', '.join(SEVERITIES)}")
    confidence = item.get("confidence", 0.7)
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 <= confidence <= 1:
        problem(item.line_of("confidence"), f"{label}confidence must be a number from 0 to 1")
        return 0.7
    return float(confidence)


def _match(item, label: str, problem) -> tuple[dict[str, tuple[LogPattern, ...]], tuple[Condition, ...],
                                                  tuple[Condition, ...]]:
    """The `match:` mapping: ({log, with_log, without_log: patterns}, where, facts)."""
    match = item.get("match", yamldoc.LDict())
    logs: dict[str, tuple[LogPattern, ...]] = {"log": (), "with_log": (), "without_log": ()}
    if not isinstance(match, yamldoc.LDict):
        problem(item.line_of("match"), f"{label}'match' must be a mapping")
        return logs, (), ()
    for key in match:
        if key not in MATCH_KEYS:
            problem(match.line_of(key), f"{label}unknown key 'match.{key}'{did_you_mean(key, MATCH_KEYS)} "
                                        f"(expected: {', '.join(sorted(MATCH_KEYS))})")
    for key in logs:
        logs[key] = tuple(_patterns(match, key, label, problem))
    facts = tuple(_conditions(match, "facts", label, problem))
    where = tuple(_conditions(match, "where", label, problem))
    if where and not logs["log"]:
        problem(match.line_of("where"), f"{label}'match.where' filters match.log lines; the rule has no match.log")
    for c in where:
        outside = [p for p in conditions.paths(c.tree) if not p.startswith("log.")]
        if outside:
            problem(c.line, f"{label}'match.where' sees only the line's captures (log.NAME), not {outside[0]}")
    if "log" not in match and "facts" not in match:
        problem(match.line if match else item.line, f"{label}needs 'match.log' or 'match.facts'")
    return logs, where, facts


def _action_and_catalog(item, log_patterns, label: str, problem) -> tuple[str | None, str | None]:
    """`action:` must be in the Xid catalog's action vocabulary; `catalog: xid` needs a log
    pattern that captures `xid` (the code each line is looked up by)."""
    action, catalog = item.get("action"), item.get("catalog")
    if action is not None:
        from troubleshoot.engine.xid import actions

        if not isinstance(action, str) or action not in actions():
            problem(item.line_of("action"), f"{label}action must be one of {', '.join(actions())}")
            action = None
    if catalog is not None:
        known = (XID, *catalogs.names())
        capture = "xid" if catalog == XID else "entry"
        if catalog not in known:
            problem(item.line_of("catalog"), f"{label}catalog must be one of {', '.join(known)}")
            catalog = None
        elif not any(capture in p.groups for p in log_patterns):
            problem(item.line_of("catalog"), f"{label}'catalog: {catalog}' needs a match.log pattern capturing (?P<{capture}>...)")
            catalog = None
    return action, catalog


def _covers(item, label: str, problem) -> tuple[tuple[str, str], ...]:
    """`covers: {cuda-runtime: [cudaErrorMemoryAllocation]}`: entries of message catalogs this
    rule explains better; each must exist, so a catalog regenerated without it fails the load."""
    spec = item.get("covers")
    if spec is None:
        return ()
    line = item.line_of("covers")
    if not isinstance(spec, dict) or not all(isinstance(v, list) for v in spec.values()):
        problem(line, f"{label}covers must map a message catalog to a list of its entry keys")
        return ()
    out = []
    for name, keys in spec.items():
        if name not in catalogs.names():
            problem(line, f"{label}covers: no message catalog {name!r}{did_you_mean(str(name), catalogs.names())}")
            continue
        cat = catalogs.load(name)
        for key in keys:
            if not isinstance(key, str) or cat.entry(key) is None:
                problem(line, f"{label}covers: catalog {name!r} has no entry {key!r}")
            else:
                out.append((name, key))
    return tuple(out)


def _str_list(item, key: str, label: str, problem) -> list[str]:
    value = item.get(key)
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        problem(item.line_of(key), f"{label}{key!r} must be a list of strings")
        return []
    return list(value)


def _patterns(match, key: str, label: str, problem):
    value = match.get(key)
    if value is None:
        return
    if isinstance(value, str):
        value = yamldoc.LList([value])
        value.line, value.item_lines = match.line_of(key), [match.line_of(key)]
    if not isinstance(value, list):
        problem(match.line_of(key), f"{label}'match.{key}' must be a list of regexes")
        return
    for i, src in enumerate(value):
        ln = value.line_of(i)
        if not isinstance(src, str) or not src:
            problem(ln, f"{label}'match.{key}' entries must be non-empty strings")
            continue
        expanded, wrong = catalogs.expand(src)
        if wrong:
            problem(ln, f"{label}'match.{key}' {wrong}")
            continue
        for one in expanded:
            complaint = check_pattern(one)
            if complaint:
                problem(ln, f"{label}{complaint}")
                break
            yield LogPattern(source=one, line=ln, written=src if one != src else None)


def _conditions(match, key: str, label: str, problem):
    value = match.get(key)
    if value is None:
        return
    if isinstance(value, str):
        value = yamldoc.LList([value])
        value.line, value.item_lines = match.line_of(key), [match.line_of(key)]
    if not isinstance(value, list):
        problem(match.line_of(key), f"{label}'match.{key}' must be a list of conditions")
        return
    for i, src in enumerate(value):
        ln = value.line_of(i)
        if not isinstance(src, str) or not src.strip():
            problem(ln, f"{label}conditions must be non-empty strings (quote them in YAML)")
            continue
        cond = _condition(src, ln, label, problem)
        if cond is not None:
            yield cond


def _condition(src: str, line: int, label: str, problem) -> Condition | None:
    try:
        return Condition(source=src, tree=conditions.parse(src), line=line)
    except ConditionError as exc:
        problem(line, f"{label}condition {src!r}: {exc}")
        return None


def _mappings(item, key: str, allowed: set, label: str, problem, shape: str):
    """(line, entry) for each mapping of the list under `key`; unknown keys reported."""
    value = item.get(key)
    if value is None:
        return
    if not isinstance(value, list):
        problem(item.line_of(key), f"{label}'{key}' must be a list of {shape}")
        return
    for i, entry in enumerate(value):
        ln = value.line_of(i)
        if not isinstance(entry, yamldoc.LDict):
            problem(ln, f"{label}each entry of '{key}' must be a mapping: {shape}")
            continue
        for k in entry:
            if k not in allowed:
                problem(entry.line_of(k), f"{label}unknown {key} key {k!r}{did_you_mean(k, allowed)}")
        yield ln, entry


def _context(item, label: str, problem):
    for ln, entry in _mappings(item, "context", CONTEXT_KEYS, label, problem, "{when, confidence, note}"):
        when, note, delta = entry.get("when"), entry.get("note", ""), entry.get("confidence", 0)
        if not isinstance(when, str) or not when.strip():
            problem(entry.line_of("when"), f"{label}context needs a 'when' condition")
            continue
        if not isinstance(note, str):
            problem(entry.line_of("note"), f"{label}context note must be a string")
            continue
        if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not -1 <= delta <= 1:
            problem(entry.line_of("confidence"), f"{label}context confidence must be a number from -1 to 1 (a change)")
            continue
        cond = _condition(when, entry.line_of("when"), label, problem)
        if cond is not None:
            yield ContextNote(when=cond, confidence=float(delta), note=note, line=ln)


def _fixes(item, label: str, problem):
    for ln, fix in _mappings(item, "fixes", FIX_KEYS, label, problem, "{fixer, title, params}"):
        fixer = fix.get("fixer")
        if not isinstance(fixer, str) or not ID_RE.match(fixer):
            problem(fix.line_of("fixer"), f"{label}fix needs a kebab-case 'fixer' id")
            continue
        title = fix.get("title", "")
        if not isinstance(title, str):
            problem(fix.line_of("title"), f"{label}fix title must be a string")
            continue
        params = fix.get("params", {}) or {}
        if not isinstance(params, dict):
            problem(fix.line_of("params"), f"{label}fix params must be a mapping")
            continue
        yield FixRef(fixer=fixer, title=title, params=_plain(params), line=ln)


def _plain(value):
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _examples(item, label: str, problem, needs: bool) -> Examples:
    value = item.get("examples")
    if value is None:
        if needs:
            problem(item.line, f"{label}a log rule needs 'examples' with 'match' and 'no_match'")
        return Examples()
    if not isinstance(value, yamldoc.LDict):
        problem(item.line_of("examples"), f"{label}'examples' must be a mapping with 'match' and 'no_match'")
        return Examples()
    for key in value:
        if key not in EXAMPLE_KEYS:
            problem(value.line_of(key), f"{label}unknown key 'examples.{key}'{did_you_mean(key, EXAMPLE_KEYS)}")
    lists: dict[str, tuple[tuple[str, ...], tuple[int, ...]]] = {}
    for key in ("match", "no_match"):
        v = value.get(key)
        if v is None:
            if needs:
                problem(value.line, f"{label}'examples.{key}' needs at least one log excerpt")
            lists[key] = ((), ())
            continue
        if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
            problem(value.line_of(key), f"{label}'examples.{key}' must be a list of strings")
            lists[key] = ((), ())
            continue
        if needs and not v:
            problem(value.line_of(key), f"{label}'examples.{key}' needs at least one log excerpt")
        lists[key] = (tuple(v), tuple(v.line_of(i) for i in range(len(v))))
    return Examples(match=lists["match"][0], no_match=lists["no_match"][0],
                    match_lines=lists["match"][1], no_match_lines=lists["no_match"][1])
