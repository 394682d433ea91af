"""Hit accounting: each line's matches tallied into its group's bounded record, in log order,
and what needs no more looking for retired from the finder.

A context pattern (with_log, without_log) is retired once seen; a group that matched HIT_CAP
lines is retired whole (it still counts as matched, the diagnosis says "at least N lines"), so
a careless `.*` cannot turn the scan into a crawl.
"""

from __future__ import annotations

from typing import Sequence

from troubleshoot.scan import verify
from troubleshoot.scan.candidates import Candidates
from troubleshoot.scan.result import GroupHits, LineHit, ScanPattern

HIT_CAP = 10_000
MAX_PARTS = 64  # distinct values of a split capture kept per group

Hits = dict[tuple[str, str], GroupHits]


def checker(patterns: Sequence[ScanPattern], hits: Hits, finder: Candidates):
    """check(raw, line, idxs): one candidate line verified, its matches counted into `hits`."""
    def check(raw: bytes, line: int, idxs) -> None:
        matches = verify.verify_line(raw, idxs, patterns, finder)
        if matches:
            apply(line, matches, patterns, hits, finder)
    return check


def apply(line: int, matches: list[tuple], patterns: Sequence[ScanPattern], hits: Hits, finder: Candidates) -> None:
    """Count one line's matches (verify.verify_line's) into `hits`, retiring what needs no more
    looking for."""
    seen_groups: set[tuple[str, str]] | None = None  # most lines match one pattern: no set for them
    for i, text, start, end, captures in matches:
        p = patterns[i]
        key = (p.group, p.role)
        rec = hits.get(key)
        if rec is None:
            rec = hits[key] = GroupHits()
        rec.patterns_hit.add(i)
        if p.role != "log":
            finder.retire(i)  # context patterns only need to be seen once
        if len(matches) > 1:
            if seen_groups is None:
                seen_groups = set()
            elif key in seen_groups:
                rec.capture(captures)
                continue
            seen_groups.add(key)
        hit = LineHit(line, text, start, end)
        rec.add(hit, captures)
        if p.split is not None:
            _add_part(rec, captures.get(p.split) or "", hit, captures)
        if rec.count >= HIT_CAP:
            rec.capped = True
            retire_group(key, patterns, finder)


def retire_seen(matches: list[tuple], patterns: Sequence[ScanPattern], counts: dict, finder: Candidates) -> None:
    """What `apply` retires for one line's matches, without keeping the hits: a context pattern
    once seen, a group's patterns once it has matched HIT_CAP lines (`counts`: lines per group)."""
    seen_groups = set()
    for m in matches:
        p = patterns[m[0]]
        key = (p.group, p.role)
        if p.role != "log":
            finder.retire(m[0])
        if key in seen_groups:
            continue
        seen_groups.add(key)
        counts[key] = n = counts.get(key, 0) + 1
        if n >= HIT_CAP:
            retire_group(key, patterns, finder)


def retire_group(key: tuple[str, str], patterns: Sequence[ScanPattern], finder: Candidates) -> None:
    """A group that matched HIT_CAP lines: none of its patterns is looked for any more."""
    for j, q in enumerate(patterns):
        if (q.group, q.role) == key:
            finder.retire(j)


def _add_part(rec: GroupHits, value: str, hit: LineHit, captures: dict) -> None:
    part = rec.parts.get(value)
    if part is None:
        if len(rec.parts) >= MAX_PARTS:
            return  # bounded: the group's own count and lines still hold every hit
        part = rec.parts[value] = GroupHits()
    part.add(hit, captures)
