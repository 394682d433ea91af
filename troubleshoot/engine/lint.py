"""`rules lint`: loader problems plus checks that look at what patterns would do on real logs."""

from __future__ import annotations

import re
from pathlib import Path

from troubleshoot.engine import conditions
from troubleshoot.scan.backtrack import superlinear
from troubleshoot.engine.ruleset import RuleSet
from troubleshoot.errors import Problem
from troubleshoot.schemas.factpaths import documented_paths, open_paths

SERIES_KEYS = {"first", "last", "min", "max", "samples", "rises", "falls", "recent_first", "recent_rises",
               "recent_falls", "trend", "still_rising", "per_sample", "steady_mean"}

# Ordinary lines of a healthy training log: a pattern that matches them would flood diagnoses.
ORDINARY_LINES = (
    "",
    "Epoch 3/100:  45%|####5     | 450/1000 [01:23<01:40,  5.47it/s, loss=0.231]",
    "[2024-05-01 12:00:00,123] INFO train.py:88 step=1200 loss=1.234 lr=3.0e-04 grad_norm=0.87",
    "node01:1234:1234 [0] NCCL INFO Channel 00/02 :    0   1   2   3",
)


# Wording of hint text that lists possible causes ("another driver, such as nouveau", "this may be
# caused by ..."): a line of it names a cause that may not be the one at hand, so a pattern that
# matches inside it fires on advice rather than on the error.
HEDGES = re.compile(
    r"(?i)\b(?:such as|if you are using|if you're using|may be|might be|might have|possible (?:reasons?|causes?)|"
    r"can occur when|could be caused|is often caused|this (?:can|could|may|might) (?:happen|occur|be)|"
    r"for example|e\.g\.|make sure (?:that )?|please (?:check|make sure|ensure))")


def hedge_problems(rule) -> list[Problem]:
    """A log pattern that matches hint wording in the rule's own match examples."""
    out = []
    for example, first in zip(rule.examples.match, rule.examples.match_lines or [rule.origin.line] * len(rule.examples.match)):
        for offset, line in enumerate(example.splitlines()):
            hedge = HEDGES.search(line)
            if not hedge:
                continue
            end = re.compile(r"[.?!;](?:\s|$)").search(line, hedge.end())
            clause_end = end.start() if end else len(line)  # the hint's own sentence
            for p in rule.log:
                m = p.regex.search(line, hedge.start())
                if m and m.start() < clause_end:
                    out.append(Problem(rule.origin.path, (first or 0) + offset + 1 if first else rule.origin.line,
                                       f"rule {rule.id!r}: pattern matches hint wording ({hedge.group(0)!r}) in its own "
                                       f"match example: a text that lists possible causes is not evidence; match the "
                                       f"error itself and keep the hint as a no_match example", level="warning"))
                    break
    return out


def lint(ruleset: RuleSet, extra_areas: frozenset[str] = frozenset(), fixers: dict | None = None) -> list[Problem]:
    """Every problem of the rule set. `extra_areas`: snapshot areas that plugin probes add;
    `fixers`: the registered fixers by id (objects with `validate(params)`), to check `fixes:`."""
    from troubleshoot.engine.lintcache import PatternVerdicts

    problems = list(ruleset.problems)
    verdicts = PatternVerdicts(_check_pattern, _CODE_FILES)
    for rule in ruleset.rules:
        problems += _fact_problems(rule, extra_areas)
        if fixers is not None:
            problems += _fix_problems(rule, fixers)
        for p in rule.log + rule.with_log + rule.without_log:
            problems += _pattern_problems(rule, p, verdicts.get(p.source), p in rule.log)
        problems += hedge_problems(rule)
        problems += _placeholder_problems(rule)
    verdicts.save()
    return sorted(problems, key=lambda p: (p.path, p.line or 0))


def _placeholder_problems(rule) -> list[Problem]:
    """A `{name}` the rule may fire without: a report would show that it is missing."""
    from troubleshoot.engine.placeholders import unclosed, unguaranteed

    broken = [Problem(rule.origin.path, rule.origin.line, (
        f"rule {rule.id!r}: {text.strip()!r} opens a placeholder with fallback words that does not close on its "
        f"line: write {{name|words}} on one line"), level="error") for text in unclosed(rule)]
    return broken + [Problem(rule.origin.path, rule.origin.line, (
        f"rule {rule.id!r}: {where} names {{{name}}}, which the rule can fire without (a capture not in every "
        f"pattern or in an optional part, a fact no match.facts condition needs): write {{{name}|words for "
        f"when it is missing}} or make the rule need it"), level="error") for where, name in unguaranteed(rule)]


# The code whose verdicts PatternVerdicts keeps: a change to it checks every pattern again.
_CODE_FILES = [Path(__file__), *(Path(__file__).parents[1] / f for f in ("scan/backtrack.py", "scan/prefilter.py", "model.py"))]


def _check_pattern(source: str) -> list[tuple[str, str]]:
    """What lint finds about one pattern, as (code, detail): the same for every rule and role
    that uses it (the checks for a `match.log` pattern only are told apart by code)."""
    from troubleshoot.model import compile_ascii

    try:
        regex = compile_ascii(source)
    except re.error as exc:
        return [("compile", str(exc))]
    out = []
    why = superlinear(regex)
    if why:
        out.append(("superlinear", why))
    if regex.search(""):
        out.append(("empty", ""))
    elif sum(1 for line in ORDINARY_LINES if regex.search(line)) >= 2:
        out.append(("ordinary", ""))
    elif _prefilter_hits(source) >= 2:
        out.append(("prefilter", ""))
    return out


def _pattern_problems(rule, p, found, is_log: bool) -> list[Problem]:
    out = []
    for code, detail in found:
        if code == "compile":
            msg, level = f"regex does not compile in Python's re (used where RE2 is not installed): {detail}", "error"
        elif code == "superlinear":  # RE2 runs it in linear time, but where no RE2 wheel exists the rule is refused
            msg, level = f"regex has {detail}", "error"
        elif not is_log:
            continue
        elif code == "empty":
            msg, level = "pattern matches an empty line, so every line of a log", "error"
        elif code == "ordinary":
            msg, level = "pattern matches ordinary training-log lines", "warning"
        else:
            msg, level = ("what the scanner searches for this pattern (its prefilter form, after common words and "
                          "optional ends are dropped) matches ordinary training-log lines: every such line would be "
                          "checked one by one; keep a rare literal in the pattern"), "warning"
        out.append(Problem(rule.origin.path, p.line, f"rule {rule.id!r}: {msg}", level=level))
    return out


def _prefilter_hits(source: str) -> int:
    """How many ordinary lines the hyperscan prefilter form of a pattern proposes."""
    from troubleshoot.scan.prefilter import prefilter_source

    try:
        form = re.compile(prefilter_source(source), re.MULTILINE)
    except (re.error, ValueError):
        return 0  # a form Python cannot read is hyperscan's business; the scan tests cover it
    return sum(1 for line in ORDINARY_LINES if line and form.search(line))


def _fact_problems(rule, extra_areas: frozenset[str]) -> list[Problem]:
    documented, open_ = documented_paths(), open_paths()
    captures = set(rule.captures)
    out = []
    conds = ([(c.tree, c.line) for c in rule.facts] + [(c.tree, c.line) for c in rule.where]
             + [(n.when.tree, n.when.line) for n in rule.context])
    for tree, line in conds:
        for path in conditions.qualified_paths(tree):
            norm = re.sub(r"\[\d+\]", "[]", path)
            if norm.startswith(("log.", "series.")):
                root, name = norm.split(".")[:2]
                if root == "series" and len(norm.split(".")) == 3 and norm.split(".")[2] not in SERIES_KEYS:
                    out.append(Problem(rule.origin.path, line, f"rule {rule.id!r}: {path}: a series has "
                                                               f"{', '.join(sorted(SERIES_KEYS))}"))
                if name not in captures:
                    out.append(Problem(rule.origin.path, line, f"rule {rule.id!r}: condition reads {path} but no "
                                                               f"match.log pattern captures (?P<{name}>...)"))
                continue
            if norm in documented or norm.split(".")[0].split("[")[0] in extra_areas:
                continue
            if any(norm == o or norm.startswith(o + ".") or norm.startswith(o + "[") for o in open_):
                continue
            out.append(Problem(rule.origin.path, line, f"rule {rule.id!r}: condition reads {path}, a fact no probe "
                                                       f"documents (see docs/snapshot.md)"))
    return out


_PLACEHOLDER = re.compile(r"^\{[A-Za-z_][A-Za-z0-9_.]*\}$")


def _fix_problems(rule, fixers: dict) -> list[Problem]:
    out = []
    for f in rule.fixes:
        fixer = fixers.get(f.fixer)
        if fixer is None:
            out.append(Problem(rule.origin.path, f.line, f"rule {rule.id!r}: fix names fixer {f.fixer!r}, which no "
                                                         f"installed plugin provides (see `troubleshoot fixers list`)"))
            continue
        # A `{capture}` placeholder is filled from the log at diagnosis time: check the rest, and
        # that a required parameter's placeholder names something the rule provides.
        concrete = {k: v for k, v in f.params.items() if not (isinstance(v, str) and _PLACEHOLDER.match(v))}
        placeholders = {k: f.params[k][1:-1] for k in f.params if k not in concrete}
        declared = {p.name: p for p in getattr(fixer, "params", ())}
        for key, name in placeholders.items():
            param = declared.get(key)
            if param is not None and param.required and not _provided(rule, name):
                out.append(Problem(rule.origin.path, f.line, f"rule {rule.id!r}: fixer {f.fixer!r}: required parameter "
                                   f"{key!r} is filled from {{{name}}}, which no match.log pattern captures "
                                   f"(?P<{name}>...)"))
        try:
            _relaxed(fixer, set(placeholders)).validate({**concrete, **{k: None for k in placeholders}})
        except Exception as exc:  # FixerError: the message names fixer and parameter
            out.append(Problem(rule.origin.path, f.line, f"rule {rule.id!r}: {exc}"))
    return out


def _provided(rule, name: str) -> bool:
    """Whether `{name}` in a fix is filled at diagnosis time: a capture, a fact path, a catalog value."""
    from troubleshoot.engine.catalogs import rule_words

    return name in rule.captures or "." in name or name in rule_words(rule.catalog)


def _relaxed(fixer, names: set):
    """The fixer with the parameters in `names` optional: their values exist only once the log
    is read, so only the others can be validated now."""
    import copy
    from troubleshoot.records import replace

    params = getattr(fixer, "params", None)
    if not names or not params:
        return fixer
    clone = copy.copy(fixer)
    clone.params = tuple(replace(p, required=False) if p.name in names else p for p in params)
    return clone
