"""hyperscan as the candidate finder: all patterns in one compiled database (hsdb), scanned
over the raw chunk in block mode, in place.

Each match reports its expression and end offset; the line around the end is the candidate and
the patterns behind the reporting expressions are the only ones verified on it (ordering.py).
The chunk is read with its escape sequences in: its coloured lines are gathered, stripped and
scanned again (ansi.Escaped), unless nearly every line is coloured, when whole chunks are
stripped first. Patterns hyperscan cannot take (an empty match, a construct it lacks) are
found by the next engine (RE2, else the literal finder) and merged in.
"""

from __future__ import annotations

from typing import Sequence

from troubleshoot.records import record
from troubleshoot.scan import engines, packing
from troubleshoot.scan.ansi import COLOURED_LINE_BYTES, Escaped
from troubleshoot.scan.candidates import Candidates
from troubleshoot.scan.ordering import ordered
from troubleshoot.scan.re2 import Re2Candidates
from troubleshoot.scan.result import ScanPattern


def reports(db, data, offset: int = 0, scratch=None, dead: set[int] | frozenset[int] = frozenset()) -> list[int]:
    """Match reports of `db` in `data`, each packed as (end + offset, expression id) (packing.py).
    Reports of the expressions in `dead` (nothing is looking for them any more) are dropped as
    they come."""
    out: list[int] = []
    add = out.append
    # packing.pack without its checks, once per match report (the hottest call of a scan): the
    # finder's index count was checked when it was built (packing.check_count), and hyperscan's
    # offsets are never negative.
    shift = packing.INDEX_BITS

    if dead:
        def on_match(index, _from, to, _flags, _context):
            if index not in dead:
                add((to + offset) << shift | index)
    else:
        def on_match(index, _from, to, _flags, _context):
            add((to + offset) << shift | index)

    if scratch is None:
        db.scan(data, match_event_handler=on_match)
    else:
        db.scan(data, match_event_handler=on_match, scratch=scratch)
    return out


@record(frozen=True)
class Prefilter:
    """A chunk's database pass: its match reports, and the coloured lines scanned stripped."""

    found: list[int]
    escaped: Escaped | None = None


class HyperscanCandidates(Candidates):
    """All patterns in one hyperscan database, scanned over the raw chunk in block mode. Each
    match reports its expression and end offset; the line around the end is the candidate and
    the patterns behind the reporting expressions are the only ones verified on it.

    Context patterns (only needed once) report at most once per chunk; when that report is
    not confirmed, the rest of the chunk is scanned by a second database of the context
    patterns alone that reports every match (rare: prefilter forms are nearly exact)."""

    name = "hyperscan"
    zero_copy = True  # scans the first `end` bytes of the reused read buffer in place

    def __init__(self, patterns: Sequence[ScanPattern], found, rest: SubsetCandidates | None,
                 single: frozenset[int], sources: list[str]):
        from troubleshoot.scan import hsdb

        packing.check_count(len(patterns))
        self.db = found.db
        # Its own scratch space: the database is shared (cached per process) and another thread
        # may be scanning with it at the same time.
        self.scratch = hsdb.scratch(found.db)
        self.shared = found.shared
        self.rest = rest
        self.single = single
        self.deferred = found.deferred  # not in the database: the caller looks for them afterwards
        self.context = ContextDatabase(sources, single - found.deferred)
        self.expression = {i: e for e, members in found.shared.items() for i in members}
        self.dead: set[int] = set()  # expressions whose patterns are all retired: their reports are dropped
        self.strip_all = False  # strip whole chunks (see COLOURED_LINE_BYTES)
        super().__init__(patterns)

    def _build(self) -> None:
        self.dirty = False

    def reset(self) -> None:
        super().reset()
        if self.rest is not None:
            self.rest.reset()
        self.dead = set()
        self.strip_all = False

    def pool(self, threads: int):
        from troubleshoot.scan import hsdb, pool

        return pool.Pool(self.db, threads, hsdb.scratch, reports)

    def retire(self, index: int) -> None:
        # Rebuilding the database would cost more than ignoring its reports, which the pass drops
        # as they come once every pattern behind an expression is retired.
        if self.rest is not None:
            self.rest.retire(index)
        super().retire(index)
        e = self.expression.get(index, index)
        if all(i in self.retired for i in self.shared.get(e, (e,))):
            self.dead.add(e)

    @property
    def raw_ansi(self) -> bool:
        # The next engine reads whole chunks, escapes stripped; so does this one in a log
        # coloured throughout.
        return self.rest is None and not self.strip_all

    def stripped(self, escapes: int, size: int) -> None:
        if escapes * COLOURED_LINE_BYTES < size:
            self.strip_all = False  # the colour is gone: coloured lines are gathered again

    def start(self, chunk, end: int, pool=None) -> Prefilter:
        """The database's pass over chunk[:end]; with `pool`, split at newlines into one part per
        worker and one for this thread, all scanned at once (hyperscan releases the GIL while
        it scans). Verifying waits for the whole pass: had the workers scanned the next chunk
        while this thread verified, each of their match reports would have waited for the GIL
        (on a hit-dense log that cost more than the threads saved)."""
        coloured = self.raw_ansi and chunk.find(b"\x1b", 0, end) >= 0
        with memoryview(chunk) as whole:
            dead = self.dead
            if pool is None:
                found = reports(self.db, whole[:end], 0, self.scratch, dead)
                jobs = []
            else:
                first, *rest = parts(chunk, end, pool.size + 1)
                jobs = [pool.submit(whole[a:b], a, dead) for a, b in rest]
                found = reports(self.db, whole[first[0] : first[1]], first[0], self.scratch, dead)
        escaped = self._escaped(chunk, end) if coloured else None
        if escaped is not None:
            found += escaped.reports(reports(self.db, escaped.text, 0, self.scratch, dead))
        for job in jobs:
            found += job.result()
        return Prefilter(found, escaped)

    def _escaped(self, chunk, end: int) -> Escaped:
        escaped = Escaped(chunk, end)
        if len(escaped.starts) * COLOURED_LINE_BYTES > end:
            self.strip_all = True  # from the next chunk on, while the colour lasts
        return escaped

    def spans(self, chunk, end: int, prefilter: Prefilter | None = None):
        if prefilter is None:
            prefilter = self.start(chunk, end)
        found = prefilter.found
        if self.rest is not None:
            rest = bytes(chunk if end == len(chunk) else memoryview(chunk)[:end])
            for start, _end, idxs in self.rest.spans(rest, len(rest)):
                found.extend(packing.pack(start, i) for i in idxs)  # at the line's start: that line
        if not found:
            return
        found.sort()
        yield from ordered(chunk, found, end, prefilter.escaped, self.shared, self.single, self.retired,
                           self.context)


class ContextDatabase:
    """The context patterns of a scan in a database of their own, without SINGLEMATCH: every
    match of the ones whose single report a line did not confirm (ordering.py). Built the first
    time it is needed: most scans never need it. `shared[expression]` lists the patterns behind
    an expression (one expression per distinct prefilter form)."""

    def __init__(self, sources: list[str], patterns: frozenset[int]):
        self.sources = sources
        self.patterns = patterns  # the context patterns' indexes
        self.order: list[int] = []  # database id k is pattern order[k]
        self.db = self.scratch = None
        self.shared: dict[int, tuple[int, ...]] = {}
        self.built = False

    def _build(self) -> None:
        from troubleshoot.scan import hsdb

        self.built = True
        order = self.order = sorted(self.patterns)
        found = hsdb.database([self.sources[i] for i in order])
        if found is not None:
            self.shared = {order[k]: tuple(order[j] for j in v) for k, v in found.shared.items()}
            self.db, self.scratch = found.db, hsdb.scratch(found.db)

    def reports(self, chunk, frm: int, stop: int, wanted: set[int], escaped: Escaped | None) -> list[int]:
        """Every match, after `frm`, of the context patterns in `wanted`, packed as (end, pattern
        behind the expression), raw lines and stripped coloured ones alike."""
        if not self.built:
            self._build()
        if self.db is None or frm >= stop:
            return []
        db, order, scratch, shared = self.db, self.order, self.scratch, self.shared
        offset_of, index_of, pack = packing.offset_of, packing.index_of, packing.pack
        with memoryview(chunk) as view:
            out = [pack(offset_of(r) + frm, order[index_of(r)]) for r in reports(db, view[frm:stop], 0, scratch)]
        if escaped is not None:
            out += [pack(offset_of(r), order[index_of(r)])
                    for r in escaped.reports(reports(db, escaped.text, 0, scratch)) if offset_of(r) >= frm]
        return [r for r in out if not wanted.isdisjoint(shared.get(index_of(r), (index_of(r),)))]


def parts(chunk, end: int, n: int) -> list[tuple[int, int]]:
    """chunk[:end] cut into about `n` spans of whole lines."""
    out, a = [], 0
    for k in range(1, n):
        b = chunk.find(b"\n", max(a, end * k // n), end) + 1
        if b <= a:
            break
        out.append((a, b))
        a = b
    if a < end or not out:  # an empty chunk (a line that was all escape sequences) is one empty part
        out.append((a, end))
    return out


class SubsetCandidates:
    """RE2 (or the literal prefilter) over a subset of the patterns, reporting the subset's
    indices in the full list: the patterns hyperscan rejected."""

    def __init__(self, patterns: Sequence[ScanPattern], indices: list[int]):
        self.indices = indices
        sub = [patterns[i] for i in indices]
        if engines.re2_available():
            self.inner = Re2Candidates(sub)
        else:
            from troubleshoot.scan.literal import LiteralCandidates  # without RE2 only

            self.inner = LiteralCandidates(sub)
        self.position = {full: k for k, full in enumerate(indices)}

    def reset(self) -> None:
        self.inner.reset()

    def retire(self, index: int) -> None:
        k = self.position.get(index)
        if k is not None:
            self.inner.retire(k)

    def spans(self, chunk: bytes, end: int):
        for start, end, idxs in self.inner.spans(chunk, end):
            yield start, end, (self.indices if idxs is None else [self.indices[k] for k in idxs])
