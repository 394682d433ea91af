"""The data that flows one way through troubleshoot: rules -> diagnoses (-> fix plans)."""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from troubleshoot.lazyre import lazy
from troubleshoot.records import deferrable, field, record

if TYPE_CHECKING:
    from troubleshoot.engine.condtree import Node

SEVERITIES = ("error", "warning", "info")


@record(frozen=True)
class Origin:
    """Where a rule came from: the file and line, and the pack (shipped, a team folder...)."""

    path: str
    line: int
    pack: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


@functools.lru_cache(maxsize=None)
def compile_ascii(source: str) -> re.Pattern:
    """Rule patterns as Python's `re` reads them (ASCII classes, as RE2): compiled on first use,
    since RE2 does the scanning and most runs never need the `re` form. Python's warning that a
    class like `[--x]` may mean something else in a later Python is not the user's to read on
    every run: the pattern means today what RE2, the engine that scans, reads."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return re.compile(_re2_spaces(source), re.ASCII)


# RE2's \s is [\t\n\f\r ]; Python's, even under re.ASCII, adds \v: a line with a vertical tab
# would match in one engine and not in the other.
RE2_SPACE, RE2_NOT_SPACE, RE2_SPACE_CHARS = r"[\t\n\f\r ]", r"[^\t\n\f\r ]", r"\t\n\f\r "


def _re2_spaces(source: str) -> str:
    """`source` with \\s and \\S spelled as RE2 reads them (\\S inside a bracket is left as it is:
    it cannot be spelled there, and no shipped pattern has it)."""
    if "\\s" not in source and "\\S" not in source:
        return source
    out, i, in_class = [], 0, False
    while i < len(source):
        ch = source[i]
        if ch == "\\" and i + 1 < len(source):
            nxt = source[i + 1]
            if nxt == "s":
                out.append(RE2_SPACE_CHARS if in_class else RE2_SPACE)
            elif nxt == "S" and not in_class:
                out.append(RE2_NOT_SPACE)
            else:
                out.append(source[i : i + 2])
            i += 2
            continue
        if ch == "[" and not in_class:
            in_class = True
            out.append(ch)
            i += 1
            if source[i : i + 1] == "^":
                out.append("^")
                i += 1
            if source[i : i + 1] == "]":  # a ']' first in a bracket is a member
                out.append("]")
                i += 1
            continue
        if ch == "]" and in_class:
            in_class = False
        out.append(ch)
        i += 1
    return "".join(out)


def _group_names(source: str) -> list[str]:
    """The names of a pattern's `(?P<name>` groups, in order, as a regex of an escaped `(?P<`, an
    ASCII identifier and `>` would find them: without a regex compiled in every diagnosis."""
    names = []
    at = source.find("(?P<")
    while at >= 0:
        end = source.find(">", at + 4)
        name = source[at + 4 : end] if end > 0 else ""
        if name.isascii() and name.isidentifier():
            names.append(name)
        at = source.find("(?P<", at + 4)
    return names


@record(frozen=True)
class LogPattern:
    source: str
    line: int
    written: str | None = None  # as the rule file writes it, where the loader expanded it ({catalog:NAME})

    @property
    def regex(self) -> re.Pattern:
        return compile_ascii(self.source)

    @property
    def groups(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(_group_names(self.source)))


def as_written(patterns: Sequence[LogPattern]) -> list[str]:
    """Patterns as the rule file writes them: a `{catalog:NAME}` pattern once, not once per
    printed form the loader made of it."""
    return list(dict.fromkeys(p.written or p.source for p in patterns))


@record(frozen=True)
class Condition:
    source: str
    tree: Node
    line: int


@record(frozen=True)
class ContextNote:
    """Facts that confirm or refute a diagnosis: when `when` holds, confidence moves by
    `confidence` and `note` (with `{fact.path}` values filled in) joins the explanation."""

    when: Condition
    confidence: float
    note: str
    line: int = 0


@record(frozen=True)
class FixRef:
    """A rule's request for a fixer: parameters may hold `{capture}` placeholders."""

    fixer: str
    title: str
    params: Mapping[str, Any]
    line: int = 0


@record(frozen=True)
class Examples:
    match: tuple[str, ...] = ()
    no_match: tuple[str, ...] = ()
    match_lines: tuple[int, ...] = ()
    no_match_lines: tuple[int, ...] = ()


@deferrable("explain", "context", "fixes", "references", "examples")  # read for the rules that fire
@record(frozen=True)
class Rule:
    id: str
    symptom: str
    title: str
    severity: str
    explain: str
    origin: Origin
    confidence: float = 0.7
    downstream_of: tuple[str, ...] = ()
    refines: tuple[str, ...] = ()
    log: tuple[LogPattern, ...] = ()
    with_log: tuple[LogPattern, ...] = ()
    without_log: tuple[LogPattern, ...] = ()
    where: tuple[Condition, ...] = ()
    facts: tuple[Condition, ...] = ()
    context: tuple[ContextNote, ...] = ()
    fixes: tuple[FixRef, ...] = ()
    references: tuple[str, ...] = ()
    examples: Examples = Examples()
    action: str | None = None  # recovery action (the Xid catalog's vocabulary), or None
    # "xid" or a message catalog's name (rules/catalogs/): symptom, severity and action of each
    # line come from the catalog's entry for it
    catalog: str | None = None
    # (series, worse, by): a rule that fires only across ranks, on the ranks whose followed number
    # (a capture) is worse ("higher" or "lower") than the others' median by more than `by` (0.15: 15 %)
    compare: tuple[str, str, float] | None = None
    # (catalog, entry key) pairs this rule explains better than the catalog's own rules: where it
    # fires, their diagnoses of these entries are left out
    covers: tuple[tuple[str, str], ...] = ()

    @property
    def captures(self) -> tuple[str, ...]:
        names: list[str] = []
        for p in self.log:
            names += [g for g in p.groups if g not in names]
        return tuple(names)


@record(frozen=True)
class Evidence:
    source: str  # "log" or "fact"
    text: str
    line: int | None = None  # log line number (1-based), for log evidence
    span: tuple[int, int] | None = None  # matched part of `text`
    path: str | None = None  # fact path, for fact evidence
    value: Any = None
    file: str | None = None  # the log the line came from, when a diagnosis read several


@record(frozen=True)
class Fix:
    fixer: str
    title: str
    params: Mapping[str, Any]


@record(frozen=True)
class Diagnosis:
    rule: Rule
    confidence: float
    explain: str
    evidence: tuple[Evidence, ...]
    fixes: tuple[Fix, ...]
    count: int = 0  # matching log lines (0 for a facts-only diagnosis)
    first_line: int | None = None
    last_line: int | None = None
    captures: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    downstream_of_found: tuple[str, ...] = ()
    # Where it was seen when several logs or machines were diagnosed together (pipeline.Sources).
    ranks: tuple[int, ...] = ()
    nodes: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    first_seen: str | None = None  # the timestamp of its first line, as the log wrote it
    action: str | None = None  # what to do now (ignore, restart-app, reset-gpu, reboot, ...), None if the rule has none
    xid: Mapping[str, Any] | None = None  # {code, pci, name} when the diagnosis came from an Xid
    # {catalog, version, key, code} when the diagnosis came from a message catalog's entry
    entry: Mapping[str, Any] | None = None
    series: Mapping[str, Any] = field(default_factory=dict)  # the followed numbers, for a rule that compares ranks

    @property
    def symptom(self) -> str:
        return self.rule.symptom

    @property
    def severity(self) -> str:
        return self.rule.severity

    @property
    def title(self) -> str:
        return self.rule.title
