"""hyperscan's match reports turned into candidate lines, in line order, each line once.

hyperscan reports each match by its expression and the offset where it ends (packing.py packs
both into one int; sorted, the reports are in offset order). A line is a candidate when a
report ends on it, and the patterns behind its reports are the only ones verified there.

Context patterns (wanted once per scan) report at most once per pass (SINGLEMATCH). When the
verifier does not confirm such a report, the pattern's later matches in the chunk are looked
for by a second database of the context patterns alone (the caller's `context`), and merged
into the lines still to come: lines are verified in order whatever the chunk edges, as RE2 and
`re` verify them (a late second look would count a line twice and apply captures out of order).
"""

from __future__ import annotations

from typing import Iterator, Protocol, Sequence

from troubleshoot.scan.packing import first_past, index_of, offset_of


class ContextLook(Protocol):
    """The context patterns' own database: `shared[expression]` lists the patterns behind an
    expression; `reports()` gives their matches after `frm`, packed at their lines' ends."""

    shared: dict[int, tuple[int, ...]]

    def reports(self, chunk, frm: int, stop: int, wanted: set[int], escaped) -> list[int]: ...


def ordered(chunk, reports: list[int], stop: int, escaped, shared: dict[int, tuple[int, ...]],
            single: frozenset[int], retired: set[int], context: ContextLook) -> Iterator[tuple[int, int, list[int]]]:
    """The candidate lines of chunk[:stop], in order, each once, with every pattern that may
    match it: (start, end, pattern indexes). `reports` sorted; `shared` maps an expression to
    the patterns behind it (absent: the expression is the pattern); `single`, the context
    patterns' expressions; `retired`, read as the lines are verified (it grows meanwhile)."""
    later: list[int] = []  # the context pass's reports still to come
    pending: dict[int, int] = {}  # context pattern -> the end of the line that did not confirm it
    rfind, find = chunk.rfind, chunk.find
    k = j = 0
    n = len(reports)
    while k < n or j < len(later):
        if j == len(later) or (k < n and offset_of(reports[k]) <= offset_of(later[j])):
            to = offset_of(reports[k])
        else:
            to = offset_of(later[j])
        pos = report_pos(chunk, to)
        if pos >= stop:  # an empty match after the chunk's last newline: the next chunk's line
            k, j = skip_to(reports, k, stop), skip_to(later, j, stop)
            continue
        start = rfind(b"\n", 0, pos) + 1
        end = find(b"\n", pos, stop)
        if end < 0:
            end = stop
        # A report belongs to this line when its match ends at or before the line's end (a
        # match that ends just after the newline is the next line's: see report_pos).
        limit = first_past(end)
        exprs, k = _exprs_before(reports, k, limit)
        # Checked now, not when the reports came: verifying the lines before may have retired some.
        live = _live(exprs, shared, retired) if exprs else []
        if j < len(later) and later[j] < limit:
            extra = set()
            while j < len(later) and later[j] < limit:
                c = index_of(later[j])
                extra.update(i for i in context.shared.get(c, (c,)) if i in pending and i not in retired)
                j += 1
            if extra:
                live = sorted(extra.union(live))
        if live:
            yield start, end, live
        if single.isdisjoint(exprs):
            continue
        new = {i for e in exprs if e in single for i in shared.get(e, (e,)) if i not in retired and i not in pending}
        if new:  # reported here, still not confirmed: its other matches are looked for
            for i in new:
                pending[i] = end
            found = context.reports(chunk, end + 1, stop, new, escaped)
            if found:
                later = sorted(later[j:] + found)
                j = 0


def _exprs_before(reports: list[int], k: int, limit: int) -> tuple[Sequence[int] | set[int], int]:
    """The expressions of reports[k:] below `limit` (every expression once), and where the next
    report is. Most lines have one report: no set is built for them."""
    n = len(reports)
    if k == n or reports[k] >= limit:
        return (), k
    e = index_of(reports[k])
    k += 1
    if k == n or reports[k] >= limit:
        return (e,), k
    exprs = {e}
    while k < n and reports[k] < limit:
        exprs.add(index_of(reports[k]))
        k += 1
    return exprs, k


def report_pos(chunk, to: int) -> int:
    """A byte of the line a match ending at `to` belongs to: its last byte, or, for an empty match
    at a line's start (`^$` on an empty line; what ends just after a newline is taken as one),
    that line's first byte (the chunk's end when no line starts there)."""
    if to > 0 and chunk[to - 1] != 10:  # 10: b"\n"
        return to - 1
    return to


def skip_to(reports: list[int], k: int, stop: int) -> int:
    """Past the reports from k on whose offset is `stop` or more (they belong to no line here)."""
    while k < len(reports) and offset_of(reports[k]) >= stop:
        k += 1
    return k


def _live(exprs, shared: dict[int, tuple[int, ...]], retired: set[int]) -> list[int]:
    """The patterns behind `exprs` that are not retired, in pattern order."""
    out = []
    for e in exprs:
        members = shared.get(e)
        if members is None:
            if e not in retired:
                out.append(e)
        else:
            out += [i for i in members if i not in retired]
    if len(out) > 1:
        out.sort()
    return out
