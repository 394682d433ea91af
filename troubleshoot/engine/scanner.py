"""Streaming log scanner: finds which patterns match on which lines of a log of any size.

The log is read into a reused buffer in newline-aligned chunks of about 1 MiB. A fast
engine finds the few candidate lines of each chunk — hyperscan (all patterns in one compiled
database, cached on disk), else RE2 (one combined program), else a literal prefilter (pure
Python) — and only those lines are decoded, cleaned and verified with the pattern's own regex
(RE2 where installed, else `re`), which decides the match and extracts captures. All three
engines give identical results: the fast pass only proposes lines. Memory stays bounded and
does not grow with the log: one buffer, and per pattern group a count, the first and last few
lines and the latest captures, never the lines themselves.

On more than one core a large log file is cut into ranges of whole lines, one per core, each
scanned by a forked process (scanproc) whose matches this process then applies in log order;
where forking is not safe (another thread runs, a pipe) hyperscan's pass over each chunk is
shared with worker threads instead (scanpool). Either way the result is the one-thread result.

Line numbers count `\\n` like `grep -n`. A `\\r` inside a line (progress bars) splits it into
segments that are matched separately; ANSI escape sequences are removed before matching;
invalid UTF-8 becomes U+FFFD.
"""

from __future__ import annotations

import functools
import io
import os
import re
import stat
from collections import deque
from dataclasses import dataclass, field
from typing import BinaryIO, Callable, Iterable, NamedTuple, Sequence

from troubleshoot.engine import backtrack, rewindow, scanpool, utf8view
from troubleshoot.engine.literals import required_literals
from troubleshoot.engine.values import parse_bytes

try:  # RE2 wheels exist for common Linux/macOS platforms; everything works without.
    import re2 as _re2
except ImportError:  # pragma: no cover - exercised by the fallback tests via force_backend
    _re2 = None

# About 1 MiB: large enough that per-chunk costs vanish, small enough that the buffer, an
# ANSI-stripped copy and glibc's allocator together stay far below the RSS budget.
CHUNK_SIZE = 1 << 20
# Compiling the hyperscan database costs ~0.5 s for the shipped rules; below this size (and
# without a cached database) RE2, which builds in ~20 ms, finishes first.
HYPERSCAN_MIN_BYTES = 16 << 20
# A pattern that matched this many lines stops being checked: it still counts as matched, the
# diagnosis says "at least N lines", and a careless `.*` cannot turn the scan into a crawl.
HIT_CAP = 10_000
# A line longer than this is matched in windows of this size (a match across a window edge is
# lost; such lines are binary dumps, not error messages), so memory stays bounded.
LONG_LINE = 16 << 20
KEEP_FIRST = 3
KEEP_LAST = 3
MAX_EVIDENCE_CHARS = 400

# One leading \x1b (not one per alternative): `re` then skips to each escape at memchr speed.
# Every escape form of ECMA-48 goes as a terminal consumes it: CSI (colours, cursor), OSC (title,
# clipboard, links) and the two-byte ones (`ESC c` resets the terminal, `ESC 7` saves the
# cursor, `ESC ( B` picks a character set). An ESC that starts none goes too, so that one pass
# leaves no ESC behind: a second pass (the chunk, then its line) finds nothing more to join
# ("\x1b\x1b]0;t\x07[0m" must not become a colour code once the title is gone).
ANSI_BYTES = re.compile(rb"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b\n]*(?:\x07|\x1b\\)|[ -/]*[0-~])?")
_CR_TO_LF = bytes.maketrans(b"\r", b"\n")
# Gathering a chunk's coloured lines costs per line, stripping the whole chunk per byte: with more
# than one coloured line per this many bytes (a log coloured throughout) whole chunks are stripped.
COLOURED_LINE_BYTES = 1024

MAX_PARTS = 64  # distinct values of a split capture kept per group


@dataclass(frozen=True)
class ScanPattern:
    """One regex to look for, belonging to a group (a rule) under a role (log, with_log...).

    `where`, when given, decides per matching line from that line's captures whether the
    line counts (a rule's `match.where`)."""

    group: str
    role: str
    regex: re.Pattern | str  # a compiled `re` pattern, or its source (compiled only when needed)
    where: Callable[[dict], bool] | None = None
    split: str | None = None  # a capture whose values get their own hits (Xid codes: one diagnosis each)

    @property
    def source(self) -> str:
        return self.regex if isinstance(self.regex, str) else self.regex.pattern

    @property
    def compiled(self) -> re.Pattern:
        if isinstance(self.regex, str):
            from troubleshoot.model import compile_ascii

            return compile_ascii(self.regex)
        return self.regex


RECENT = 8  # samples a series' recent trend looks back over
MAX_SERIES_KEYS = 64  # distinct values of a `key` capture followed per capture name


@dataclass
class Series:
    """A numeric capture followed across lines: enough to see a value climbing (a leak), over
    the whole log and over its last RECENT samples."""

    first: float
    last: float
    min: float
    max: float
    samples: int = 1
    rises: int = 0
    falls: int = 0
    recent: deque = field(default_factory=lambda: deque(maxlen=RECENT))

    def add(self, x: float) -> None:
        if not self.recent:
            self.recent.append(self.last)
        self.rises += x > self.last
        self.falls += x < self.last
        self.samples += 1
        self.last = x
        self.min = min(self.min, x)
        self.max = max(self.max, x)
        self.recent.append(x)

    def as_dict(self) -> dict:
        recent = list(self.recent) or [self.last]
        steps = list(zip(recent, recent[1:]))
        base = recent[0]
        return {"first": self.first, "last": self.last, "min": self.min, "max": self.max,
                "samples": self.samples, "rises": self.rises, "falls": self.falls,
                "recent_first": base, "recent_rises": sum(b > a for a, b in steps),
                "recent_falls": sum(b < a for a, b in steps),
                "trend": (self.last - base) / abs(base) if base else 0.0}


def series_view(series: dict[str, "Series"]) -> dict[str, dict]:
    """What conditions see as `series.NAME`. A capture followed per value of a `key` capture
    (one series per GPU of an `nvidia-smi` loop) shows its most climbing series."""
    out: dict[str, dict] = {}
    for name, s in series.items():
        base = name.split("@", 1)[0]
        d = s.as_dict()
        old = out.get(base)
        if old is None or (d["rises"] - d["falls"], d["samples"]) > (old["rises"] - old["falls"], old["samples"]):
            out[base] = d
    return out


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return float(parse_bytes(text))
    except ValueError:
        return None


@dataclass
class LineHit:
    line: int
    text: str
    start: int
    end: int


@dataclass
class GroupHits:
    """What one group's patterns of one role found: bounded, whatever the log size."""

    count: int = 0
    first: list[LineHit] = field(default_factory=list)
    last: deque = field(default_factory=lambda: deque(maxlen=KEEP_LAST))
    captures: dict[str, str] = field(default_factory=dict)
    series: dict[str, Series] = field(default_factory=dict)
    patterns_hit: set[int] = field(default_factory=set)
    capped: bool = False  # stopped counting at HIT_CAP: `count` is a lower bound
    parts: dict[str, "GroupHits"] = field(default_factory=dict)  # per value of ScanPattern.split

    def add(self, hit: LineHit, captures: dict[str, str]) -> None:
        self.count += 1
        if len(self.first) < KEEP_FIRST:
            self.first.append(hit)
        else:
            self.last.append(hit)
        self.capture(captures)

    def capture(self, captures: dict[str, str]) -> None:
        key = captures.get("key")
        for k, v in captures.items():
            if v is None:
                continue
            self.captures[k] = v
            x = _number(v) if k != "key" else None
            if x is not None:
                name = k if key is None else f"{k}@{key}"  # one series per GPU, device, rank...
                s = self.series.get(name)
                if s is None:
                    if len(self.series) < MAX_SERIES_KEYS * 4:
                        self.series[name] = Series(x, x, x, x)
                else:
                    s.add(x)

    @property
    def lines(self) -> list[LineHit]:
        return self.first + list(self.last)

    @property
    def first_line(self) -> int | None:
        return self.first[0].line if self.first else None

    @property
    def last_line(self) -> int | None:
        if self.last:
            return self.last[-1].line
        return self.first[-1].line if self.first else None


@dataclass
class ScanResult:
    total_lines: int
    total_bytes: int
    hits: dict[tuple[str, str], GroupHits]
    backend: str

    def get(self, group: str, role: str) -> GroupHits | None:
        return self.hits.get((group, role))


def clean_line(raw: bytes) -> Sequence[str]:
    """Decode one raw line and split it into the segments that patterns see."""
    if b"\x1b" in raw:
        raw = ANSI_BYTES.sub(b"", raw)
    text = raw.decode("utf-8", errors="replace")
    return text.split("\r") if "\r" in text else (text,)


class _Candidates:
    """Finds candidate line spans in a chunk; subclasses differ only in speed.

    Patterns that only need to be seen once (with_log, without_log) are retired after their
    first hit, so a context pattern that matches every other line stops costing anything.
    """

    name = "abstract"
    zero_copy = False  # True: spans() takes the read buffer and an end, without a copy
    raw_ansi = False  # True: spans() takes the chunk with its escape sequences still in
    deferred: frozenset[int] = frozenset()  # patterns left for a second pass (hyperscan only)

    def __init__(self, patterns: Sequence[ScanPattern]):
        self.patterns = patterns
        self.verifiers: list = []
        self.active = list(range(len(patterns)))
        self.retired: set[int] = set()
        self.dirty = False
        self._build()

    def retire(self, index: int) -> None:
        self.retired.add(index)
        if index in self.active:
            self.active.remove(index)
            self.dirty = True

    def _build(self) -> None:
        raise NotImplementedError

    def pool(self, threads: int):
        """Worker threads that can run this finder's first pass (None: it runs in one thread)."""
        return None

    def stripped(self, escapes: int, size: int) -> None:
        """Hears how many escape sequences were stripped from the last chunk of `size` bytes."""

    def spans(self, chunk: bytes, end: int) -> Iterable[tuple[int, int, Sequence[int] | None]]:
        """Yield (line_start, line_end, pattern indices or None for 'try all') for the lines of
        chunk[:end] (all of it unless the finder is `zero_copy`), in line order, each line once."""
        raise NotImplementedError


def _line_span(chunk: bytes, pos: int) -> tuple[int, int]:
    start = chunk.rfind(b"\n", 0, pos) + 1
    end = chunk.find(b"\n", pos)
    return start, (len(chunk) if end < 0 else end)


class _Re2Candidates(_Candidates):
    """One RE2 alternation over the whole chunk, then an RE2 set on each hit line."""

    name = "re2"

    def _build(self) -> None:
        opts = _quiet_options()
        opts.never_nl = True  # a match never spans lines, like a line-by-line scan
        opts.never_capture = True
        opts.max_mem = 256 << 20
        sources = [_re2_source(self.patterns[i]) for i in self.active]
        # \r only matters to anchors: without any, the chunk need not be copied to split it.
        self.anchored = any("^" in s or "$" in s for s in sources)
        # (?m): ^ and $ anchor at each line (and each \r segment), as they do per segment in `re`.
        combined = "|".join(f"(?:{s})" for s in sources)
        self.combined = _re2.compile(f"(?m){combined}".encode(), opts) if sources else None
        self.set = _re2.Set.SearchSet(opts)
        for s in sources:
            self.set.Add(f"(?m){s}".encode())
        if sources:
            self.set.Compile()
        self.dirty = False

    def spans(self, chunk: bytes, end: int):
        copy = utf8view.repaired(chunk)  # RE2 reads valid UTF-8 only, the verifier any bytes
        return self._spans(chunk) if copy is None else utf8view.mapped_back(self._spans(copy), copy, chunk)

    def _spans(self, chunk: bytes):
        if self.dirty:  # patterns retired since the last chunk (or by a caller that read ahead)
            self._build()
        scan = chunk.translate(_CR_TO_LF) if self.anchored and b"\r" in chunk else chunk
        pos = 0
        while self.combined is not None and pos < len(scan):
            m = self.combined.search(scan, pos)
            if m is None or (m.start() == len(scan) and scan.endswith(b"\n")):
                return  # (an empty match after the last newline is no line of this chunk)
            start, end = _line_span(chunk, m.start())
            pos = end + 1
            active = self.active
            # In pattern order, as the other engines give them: the first pattern of a group that
            # matches supplies the evidence span.
            yield start, end, sorted(active[k] for k in self.set.Match(scan[start:end]))
            if self.dirty:
                self._build()


class _LiteralCandidates(_Candidates):
    """Pure-Python fallback: each pattern's required literal found with bytes.find."""

    name = "re"

    def _build(self) -> None:
        self.by_literal: dict[bytes, list[int]] = {}
        self.by_folded: dict[bytes, list[int]] = {}
        self.always: list[int] = []
        for i in self.active:
            p = self.patterns[i]
            lits = required_literals(p.compiled)
            if not lits:
                self.always.append(i)
                continue
            table = self.by_folded if p.compiled.flags & re.IGNORECASE else self.by_literal
            for lit in lits:
                key = lit.lower() if table is self.by_folded else lit
                table.setdefault(key.encode(), []).append(i)
        self.dirty = False

    def spans(self, chunk: bytes, end: int):
        if self.dirty:
            self._build()
        found: dict[int, set[int]] = {}
        for table, text in ((self.by_literal, chunk), (self.by_folded, chunk.lower() if self.by_folded else b"")):
            for lit, idxs in table.items():
                pos = text.find(lit)
                while pos >= 0:
                    start, end = _line_span(chunk, pos)
                    found.setdefault(start, set()).update(idxs)
                    pos = text.find(lit, end + 1) if end + 1 < len(text) else -1
        # Patterns without a literal are tried on every line; the others still only where theirs is.
        starts = _line_starts(chunk) if self.always else sorted(found)
        retired, always = self.retired, self.always
        for start in starts:
            idxs = found.get(start)
            wanted = idxs.union(always) if idxs else always
            live = sorted(i for i in wanted if i not in retired)  # retired by the lines before
            if live:
                _, end = _line_span(chunk, start)
                yield start, end, live


def _line_starts(chunk: bytes):
    start, n = 0, len(chunk)
    while start < n:
        yield start
        start = chunk.find(b"\n", start)
        start = n if start < 0 else start + 1


def _re2_source(p: "ScanPattern") -> str:
    """The pattern as RE2 reads it. A source string carries its flags inline; a pattern
    compiled with flag arguments gets them spelled inline."""
    if isinstance(p.regex, str):
        return p.regex
    flags = ""
    if p.regex.flags & re.IGNORECASE and "(?i" not in p.regex.pattern:
        flags += "i"
    if p.regex.flags & re.MULTILINE:
        flags += "m"
    if p.regex.flags & re.DOTALL:
        flags += "s"
    return f"(?{flags}:{p.regex.pattern})" if flags else p.regex.pattern


def _quiet_options():
    opts = _re2.Options()
    opts.log_errors = False  # RE2 would print every rejected pattern to stderr itself
    return opts


@functools.lru_cache(maxsize=None)
def _re2_compile(source: str):
    """Compiled once per process: the loader's check and the scan's verifier share it."""
    return _re2.compile(source, _quiet_options())


def re2_available() -> bool:
    return _re2 is not None


def re2_compatible(source: str) -> str | None:
    """None if RE2 compiles the pattern, else its complaint (RE2 missing: None)."""
    if _re2 is None:
        return None
    try:
        _re2_compile(source)
    except Exception as exc:  # re2 raises its own error type
        return str(exc) or type(exc).__name__
    return None


class ScanCancelled(Exception):
    """The caller's cancel flag was set: the scan stopped between two chunks."""


def _stream_size(stream) -> int | None:
    """Bytes left in a regular file, an in-memory stream or a stream that tells (`bytes_left()`,
    as logfiles.Peeked does); None for pipes and the unknown."""
    if isinstance(stream, io.BytesIO):
        # Not len(getbuffer()): that copies the bytes the stream still shares with its caller.
        try:
            at = stream.tell()
            end = stream.seek(0, io.SEEK_END)
            stream.seek(at)
        except (ValueError, OSError):
            return None
        return end - at
    bytes_left = getattr(stream, "bytes_left", None)
    if bytes_left is not None:
        return bytes_left()
    try:
        st = os.fstat(stream.fileno())
    except (AttributeError, ValueError, OSError, io.UnsupportedOperation):
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


def make_candidates(patterns: Sequence[ScanPattern], backend: str | None = None,
                    size: int | None = None, defer: tuple[tuple[int, ...], ...] = ()) -> _Candidates:
    """The fastest candidate finder for these patterns: `backend` forces one ("hyperscan",
    "re2", "re"); by default hyperscan when its database is cached or the input is large
    enough to repay compiling it, else RE2, else the literal prefilter."""
    if backend == "re" or (_re2 is None and backend != "hyperscan" and not hyperscan_available()):
        return _LiteralCandidates(patterns)
    if backend in (None, "hyperscan") and hyperscan_available() and patterns:
        from troubleshoot.engine import hsdb

        want = backend == "hyperscan" or size is None or size >= HYPERSCAN_MIN_BYTES
        sources = [_re2_source(p) for p in patterns]
        single = frozenset(i for i, p in enumerate(patterns) if p.role != "log")
        found = hsdb.database(sources, compile_if_missing=want, single=single, defer=defer)
        if found is not None:
            rest = None
            if found.rejected:
                # Patterns hyperscan cannot take (an empty match, a construct it lacks) are
                # found by the next engine and merged in.
                rest = _SubsetCandidates(patterns, sorted(found.rejected))
            return _HyperscanCandidates(patterns, found, rest, single, sources)
    if _re2 is None:
        return _LiteralCandidates(patterns)
    try:
        return _Re2Candidates(patterns)
    except Exception:
        # A pattern RE2 rejects (lint reports it) must not stop the scan.
        return _LiteralCandidates(patterns)


class _HyperscanCandidates(_Candidates):
    """All patterns in one hyperscan database, scanned over the raw chunk in block mode. Each
    match reports its expression and end offset; the line around the end is the candidate and
    the patterns behind the reporting expressions are the only ones verified on it.

    Context patterns (only needed once) report at most once per chunk; when that report is
    not confirmed, the rest of the chunk is scanned by a second database of the context
    patterns alone that reports every match (rare: prefilter forms are nearly exact)."""

    name = "hyperscan"
    zero_copy = True  # scans the first `end` bytes of the reused read buffer in place

    def __init__(self, patterns, found, rest: "_SubsetCandidates | None", single: frozenset[int],
                 sources: list[str]):
        from troubleshoot.engine import hsdb

        self.db = found.db
        # Its own scratch space: the database is shared (cached per process) and another thread
        # may be scanning with it at the same time.
        self.scratch = hsdb.scratch(found.db)
        self.shared = found.shared
        self.rest = rest
        self.single = single
        self.sources = sources
        self._context = None  # (database, subset index -> pattern index, ..., scratch), built when first needed
        self.deferred = found.deferred  # not in the database: the caller looks for them afterwards
        self.expression = {i: e for e, members in found.shared.items() for i in members}
        self.dead: set[int] = set()  # expressions whose patterns are all retired: their reports are dropped
        self.strip_all = False  # strip whole chunks (see COLOURED_LINE_BYTES)
        super().__init__(patterns)

    def _build(self) -> None:
        self.dirty = False

    def pool(self, threads: int) -> scanpool.Pool:
        from troubleshoot.engine import hsdb

        return scanpool.Pool(self.db, threads, hsdb.scratch)

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

    def start(self, chunk, end: int, pool=None) -> "_Prefilter":
        """The database's pass over chunk[:end]; with `pool`, split at newlines into one part per
        worker and one for this thread, all scanned at once (hyperscan releases the GIL while
        it scans). Verifying waits for the whole pass: had the workers scanned the next chunk
        while this thread verified, each of their match reports would have waited for the GIL
        (on a hit-dense log that cost more than the threads saved)."""
        coloured = self.raw_ansi and chunk.find(b"\x1b", 0, end) >= 0
        with memoryview(chunk) as whole:
            dead = self.dead
            if pool is None:
                found = scanpool.reports(self.db, whole[:end], 0, self.scratch, dead)
                jobs = []
            else:
                first, *rest = _parts(chunk, end, pool.size + 1)
                jobs = [pool.submit(whole[a:b], a, dead) for a, b in rest]
                found = scanpool.reports(self.db, whole[first[0] : first[1]], first[0], self.scratch, dead)
        escaped = self._escaped(chunk, end) if coloured else None
        if escaped is not None:
            found += escaped.reports(scanpool.reports(self.db, escaped.text, 0, self.scratch, dead))
        for job in jobs:
            found += job.result()
        return _Prefilter(found, escaped)

    def _escaped(self, chunk, end: int) -> "_Escaped":
        escaped = _Escaped(chunk, end)
        if len(escaped.starts) * COLOURED_LINE_BYTES > end:
            self.strip_all = True  # from the next chunk on, while the colour lasts
        return escaped

    def spans(self, chunk, end: int, prefilter: "_Prefilter | None" = None):
        if prefilter is None:
            prefilter = self.start(chunk, end)
        reports = prefilter.found
        escaped = prefilter.escaped
        if self.rest is not None:
            rest = bytes(chunk if end == len(chunk) else memoryview(chunk)[:end])
            for start, _end, idxs in self.rest.spans(rest, len(rest)):
                reports.extend(start << 20 | i for i in idxs)  # at the line's start: that line
        if not reports:
            return
        reports.sort()
        yield from self._ordered(chunk, reports, end, escaped)

    def _ordered(self, chunk, reports: list[int], stop: int, escaped: "_Escaped | None"):
        """The candidate lines of chunk[:stop], in order, each once, with every pattern that may
        match it. A context pattern reports once per pass (SINGLEMATCH); when the line of that
        report does not confirm it, the context database's pass over the rest of the chunk
        finds its other matches, which are merged into the lines still to come. So lines are
        verified in order whatever the chunk edges, as RE2 and `re` verify them (a late second
        look would count a line twice and apply its captures out of order)."""
        shared, single, retired = self.shared, self.single, self.retired
        later: list[int] = []  # the context pass's reports still to come: end << 20 | pattern
        pending: dict[int, int] = {}  # context pattern -> the end of the line that did not confirm it
        rfind, find = chunk.rfind, chunk.find
        k = j = 0
        n = len(reports)
        while k < n or j < len(later):
            if j == len(later) or (k < n and reports[k] >> 20 <= later[j] >> 20):
                to = reports[k] >> 20
            else:
                to = later[j] >> 20
            pos = _report_pos(chunk, to, stop)
            if pos >= stop:  # an empty match after the chunk's last newline: the next chunk's line
                k, j = _skip_to(reports, k, stop), _skip_to(later, j, stop)
                continue
            start = rfind(b"\n", 0, pos) + 1
            end = find(b"\n", pos, stop)
            if end < 0:
                end = stop
            # A report belongs to this line when its match ends at or before the line's end (a
            # match that ends just after the newline is the next line's: see _report_pos).
            limit = end + 1 << 20
            e = reports[k] & 0xFFFFF if k < n and reports[k] < limit else -1
            k += e >= 0
            if k < n and reports[k] < limit:  # more than one report: every expression once
                exprs = {e} if e >= 0 else set()
                while k < n and reports[k] < limit:
                    exprs.add(reports[k] & 0xFFFFF)
                    k += 1
                # Checked now, not when the reports came: verifying the lines before may have retired some.
                live = _live(exprs, shared, retired)
            elif e >= 0:
                exprs = (e,)
                live = _live(exprs, shared, retired)
            else:
                exprs, live = (), []
            if j < len(later) and later[j] < limit:
                extra = set()
                ctx_shared = self._context[2]
                while j < len(later) and later[j] < limit:
                    c = later[j] & 0xFFFFF
                    extra.update(i for i in ctx_shared.get(c, (c,)) if i in pending and i not in retired)
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
                found = self._context_reports(chunk, end + 1, stop, new, escaped)
                if found:
                    later = sorted(later[j:] + found)
                    j = 0

    def _context_reports(self, chunk, frm: int, stop: int, wanted: set[int], escaped: "_Escaped | None") -> list[int]:
        """Every match, after `frm`, of the context patterns in `wanted`: (end << 20 | pattern) by
        the context database (one expression per distinct form; `self._context[2]` maps it to
        its patterns), raw lines and stripped coloured ones alike."""
        if self._context is None:
            from troubleshoot.engine import hsdb

            order = sorted(self.single - self.deferred)
            found = hsdb.database([self.sources[i] for i in order])
            if found is None:
                self._context = (None, order, {}, None)
            else:
                shared = {order[k]: tuple(order[j] for j in v) for k, v in found.shared.items()}
                self._context = (found.db, order, shared, hsdb.scratch(found.db))
        db, order, shared, scratch = self._context
        if db is None or frm >= stop:
            return []
        with memoryview(chunk) as view:
            out = [(r >> 20) + frm << 20 | order[r & 0xFFFFF] for r in scanpool.reports(db, view[frm:stop], 0, scratch)]
        if escaped is not None:
            out += [r >> 20 << 20 | order[r & 0xFFFFF]
                    for r in escaped.reports(scanpool.reports(db, escaped.text, 0, scratch)) if r >> 20 >= frm]
        return [r for r in out if not wanted.isdisjoint(shared.get(r & 0xFFFFF, (r & 0xFFFFF,)))]


def _report_pos(chunk, to: int, stop: int) -> int:
    """A byte of the line a match ending at `to` belongs to: its last byte, or, for an empty match
    at a line's start (`^$` on an empty line; what ends just after a newline is taken as one),
    that line's first byte (`stop` when no line starts there)."""
    if to > 0 and chunk[to - 1] != 10:  # 10: b"\n"
        return to - 1
    return to


def _skip_to(reports: list[int], k: int, stop: int) -> int:
    while k < len(reports) and reports[k] >> 20 >= stop:
        k += 1
    return k


class _Escaped:
    """The lines of a chunk that hold escape sequences, stripped of them and joined, for a
    second scan: only these lines can match differently once stripped (the verifier reads
    every line stripped), and in most logs they are few, so gathering them costs less than
    stripping the whole chunk would."""

    def __init__(self, chunk, end: int):
        starts: list[int] = []
        pieces = []
        find, rfind = chunk.find, chunk.rfind
        add_start, add_piece = starts.append, pieces.append
        pos = find(b"\x1b", 0, end)
        while pos >= 0:
            start = rfind(b"\n", 0, pos) + 1
            stop = find(b"\n", pos, end)
            if stop < 0:
                stop = end
            add_start(start)
            add_piece(chunk[start:stop])
            pos = find(b"\x1b", stop, end)
        self.starts = starts  # where each line starts in the chunk
        self.text = ANSI_BYTES.sub(b"", b"\n".join(pieces))

    def reports(self, found: list[int]) -> list[int]:
        """Reports in `text` as reports on the chunk's lines, each at its line's start (which
        `_report_pos` reads as that line)."""
        starts, text = self.starts, self.text
        n = len(text)
        if len(found) <= 16:  # counting newlines up to each report beats indexing every line
            return [starts[text.count(b"\n", 0, _report_pos(text, r >> 20, n))] << 20 | (r & 0xFFFFF) for r in found]
        from bisect import bisect_right

        offsets, at = [], 0  # where each stripped line starts in `text`
        for piece in text.split(b"\n"):
            offsets.append(at)
            at += len(piece) + 1
        return [starts[bisect_right(offsets, _report_pos(text, r >> 20, n)) - 1] << 20 | (r & 0xFFFFF) for r in found]


class _Prefilter(NamedTuple):
    """A chunk's database pass: its match reports, and the coloured lines scanned stripped."""

    found: list[int]
    escaped: "_Escaped | None" = None


def _parts(chunk, end: int, n: int) -> list[tuple[int, int]]:
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


def _live(exprs: set[int], shared: dict[int, tuple[int, ...]], retired: set[int]) -> list[int]:
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


class _SubsetCandidates:
    """RE2 (or the literal prefilter) over a subset of the patterns, reporting the subset's
    indices in the full list."""

    def __init__(self, patterns: Sequence[ScanPattern], indices: list[int]):
        self.indices = indices
        sub = [patterns[i] for i in indices]
        self.inner = _Re2Candidates(sub) if _re2 is not None else _LiteralCandidates(sub)
        self.position = {full: k for k, full in enumerate(indices)}

    def retire(self, index: int) -> None:
        k = self.position.get(index)
        if k is not None:
            self.inner.retire(k)

    def spans(self, chunk: bytes, end: int):
        for start, end, idxs in self.inner.spans(chunk, end):
            yield start, end, (self.indices if idxs is None else [self.indices[k] for k in idxs])


def hyperscan_available() -> bool:
    from troubleshoot.engine import hsdb

    return hsdb.available()


class _Verifiers(dict):
    """Per-pattern verifiers, compiled on first use: a scan that never sees a candidate
    line for a pattern never compiles it."""

    def __init__(self, patterns: Sequence[ScanPattern], backend: str | None):
        super().__init__()
        self.patterns = patterns
        self.backend = backend

    def __missing__(self, i: int):
        v = self[i] = _verifier(self.patterns[i], self.backend)
        return v


def _verifier(p: ScanPattern, backend: str | None) -> Callable[[str], "tuple | None"]:
    """The function that decides a candidate segment: (start, end, captures) or None. RE2
    (linear time, whatever the pattern) when installed, else the pattern's own `re` in bounded
    windows (rewindow). A pattern `re` may take exponential time on is left to RE2 whichever
    engine was asked for; without RE2 it never matches (the loader refuses it there)."""
    found = _re2_verifier(p) if backend != "re" else None
    if found is None and backtrack.superlinear(p.compiled) is not None:
        return _re2_verifier(p) or _never
    return found or rewindow.finder(p.compiled)


def _re2_verifier(p: ScanPattern):
    if _re2 is None:
        return None
    try:
        return _re2_finder(_re2_compile(_re2_source(p)))
    except Exception:
        return None


def _never(seg: str) -> None:
    return None


def _re_finder(rx: re.Pattern):
    search = rx.search

    def find(seg: str):
        m = search(seg)
        return None if m is None else (m.start(), m.end(), m.groupdict())
    return find


def _re2_finder(rx):
    """RE2's matcher called directly on the UTF-8 bytes of the segment: the Python wrapper's
    search() maps every offset back to characters and builds a match object, which cost
    more than the match itself on a short line."""
    low = getattr(rx, "_regexp", None)
    anchor = getattr(getattr(_re2, "_Anchor", None), "UNANCHORED", None)
    if low is None or anchor is None or not hasattr(low, "Match"):
        return _re_finder(rx)  # another re2 wrapper: its public API reads like `re`'s
    match = low.Match
    names = sorted(rx.groupindex.items(), key=lambda kv: kv[1])

    def find(seg: str):
        data = seg.encode("utf-8", "surrogatepass")
        spans = match(anchor, data, 0, len(data))
        start, end = spans[0]
        if start < 0:
            return None
        captures = {}
        for name, k in names:
            a, b = spans[k]
            captures[name] = None if a < 0 else data[a:b].decode("utf-8", "replace")
        if len(data) != len(seg):  # not ASCII: byte offsets to character offsets
            start = len(data[:start].decode("utf-8", "replace"))
            end = start + len(data[spans[0][0] : spans[0][1]].decode("utf-8", "replace"))
        return start, end, captures
    return find


def scan_stream(stream: BinaryIO, patterns: Sequence[ScanPattern], backend: str | None = None,
                chunk_size: int = CHUNK_SIZE, cancel=None,
                progress: Callable[[int], None] | None = None, threads: int | None = None,
                fork: bool | None = None, defer: bool = True) -> ScanResult:
    """Scan a binary stream once; return per (group, role) bounded hit records.

    `cancel` (anything with `is_set()`, e.g. a threading.Event) is checked before each chunk:
    when set, ScanCancelled is raised. `progress` is called with the bytes read so far.
    $TROUBLESHOOT_SCAN_ENGINE forces an engine as `backend` does (the benchmark compares them).
    `threads`: helpers beside this thread (None: one per further core, up to scanpool.MAX_THREADS
    in all, none on one core or for a small input; see scanpool). A regular file of
    FORK_MIN_BYTES or more, read by a process that runs no other thread, is cut into one range
    per helper, each scanned by a forked process (scanproc); otherwise the helpers are threads
    that share hyperscan's pass over each chunk. `fork` True forks wherever the stream is a file
    (tests), False never. Every helper has ended when this returns. `defer` (a file only): the
    context patterns hyperscan is slow at are looked for in a second pass, and only for rules
    whose own patterns matched: the hits of a rule that cannot fire may lack its context lines
    (`rules why`, which shows them, passes False)."""
    backend = backend or os.environ.get("TROUBLESHOOT_SCAN_ENGINE") or None
    size = _stream_size(stream)
    if size is None or size > STEADY_HEAP_BYTES:
        _steady_heap()
    span = file_span(stream)
    # A file can be read again: context patterns hyperscan is slow at wait for a second pass,
    # made only if their rule's own patterns matched (see _second_pass).
    finder = make_candidates(patterns, backend, size, _deferrable(patterns) if defer and span is not None else ())
    finder.verifiers = _Verifiers(patterns, backend)
    if threads is None:
        threads = scanpool.scan_threads(size, PARALLEL_MIN_BYTES)
    found = None
    if threads and span is not None and fork is not False and (fork or (size or 0) >= FORK_MIN_BYTES and
                                                              _forkable()):
        found = _scan_forked(span, patterns, finder, threads + 1, chunk_size, cancel, progress)
    if found is None:
        hits: dict[tuple[str, str], GroupHits] = {}
        pool = finder.pool(threads) if threads else None
        try:
            chunks = _Chunks(stream, chunk_size, progress)
            line = _scan_chunks(chunks, finder, _checker(patterns, hits, finder), 1, cancel, pool)
        finally:
            if pool is not None:
                pool.close()
        found = ScanResult(total_lines=line - 1, total_bytes=chunks.total, hits=hits, backend=finder.name)
    if finder.deferred:
        _second_pass(found, span, patterns, finder.deferred, chunk_size, cancel)
    return found


def _forkable() -> bool:
    # scanproc brings pickle, select and signal (5 ms of a start): only a large file loads it.
    from troubleshoot.engine import scanproc

    return scanproc.forkable()


def _deferrable(patterns: Sequence[ScanPattern]) -> tuple[tuple[int, ...], ...]:
    """The context patterns of each (group, role) whose group has patterns of its own: wanted
    only when those matched, so they can wait for a second pass (hsdb.database(defer=...))."""
    with_log = {p.group for p in patterns if p.role == "log"}
    units: dict[tuple[str, str], list[int]] = {}
    for i, p in enumerate(patterns):
        if p.role != "log" and p.group in with_log:
            units.setdefault((p.group, p.role), []).append(i)
    return tuple(tuple(u) for u in units.values())


def _second_pass(found: ScanResult, span: FileSpan, patterns: Sequence[ScanPattern], deferred: frozenset[int],
                 chunk_size: int, cancel) -> None:
    """The deferred context patterns whose group's own patterns matched, looked for over the
    same bytes of the file: their hits are those a single pass would have made (a deferred unit
    is a whole (group, role), which nothing else fills)."""
    wanted = sorted(i for i in deferred if (patterns[i].group, "log") in found.hits)
    if not wanted:
        return
    again = scan_stream(_FileRange(span.fd, span.at, span.at + found.total_bytes), [patterns[i] for i in wanted],
                        chunk_size=chunk_size, cancel=cancel, threads=0)
    found.hits.update(again.hits)


# Below this many bytes a scan stays in one thread: starting workers would cost more than it saves.
PARALLEL_MIN_BYTES = 4 << 20
# Below this many bytes a scan does not fork: a child and its report cost a few milliseconds.
FORK_MIN_BYTES = 8 << 20
# A child stops (and the parent scans the rest of its range) once its report reaches this size:
# the parent holds the reports of the ranges after its own until it gets to them (pickled; each
# batch is unpickled only to be applied).
REPORT_BYTES = 8 << 20


def _scan_chunks(chunks: "_Chunks", finder: _Candidates, check, line: int, cancel=None, pool=None,
                 between: Callable[[], object] | None = None, last_line: bool = True) -> int:
    """Verify every chunk; return the number of the line after the last one. `between()` is
    called after each chunk and stops the scan by returning true; `last_line` false leaves an
    unfinished last line (no newline after it) unread."""
    while True:
        if cancel is not None and cancel.is_set():
            raise ScanCancelled()
        got = chunks.next()
        if got is None or (got[2] and not last_line):
            return line
        chunk, end = _prepared(got[0], got[1], finder)
        prefilter = finder.start(chunk, end, pool) if pool is not None else None
        line = _verify_chunk(chunk, end, line, finder, check, prefilter) + got[2]
        if between is not None and between():
            return line


def _checker(patterns: Sequence[ScanPattern], hits: dict, finder: _Candidates):
    def check(raw: bytes, line: int, idxs) -> None:
        matches = _verify_line(raw, idxs, patterns, finder)
        if matches:
            _apply(line, matches, patterns, hits, finder)
    return check


class FileSpan(NamedTuple):
    """A stream whose unread bytes are those of a file descriptor from `at` to its end."""

    fd: int
    at: int
    seek: Callable[[int], object]  # leaves the stream at a file offset, as if read to there


def file_span(stream) -> FileSpan | None:
    """The stream as a regular file read by offsets; None unless it is a plain binary file (or a
    stream that says what file it reads, `file_span()`), never a decompressing reader: its
    offsets are not the file's."""
    span = getattr(stream, "file_span", None)
    if span is not None:
        return span()
    if type(stream) not in (io.BufferedReader, io.FileIO):
        return None
    try:
        fd = stream.fileno()
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return FileSpan(fd, stream.tell(), stream.seek)
    except (OSError, ValueError):
        return None


class _FileRange:
    """Bytes `start` to `stop` (None: the end) of a file, read by offset: readinto() for _Chunks."""

    def __init__(self, fd: int, start: int, stop: int | None):
        self.fd, self.at, self.stop = fd, start, stop

    def readinto(self, view) -> int:
        if self.stop is not None and len(view) > self.stop - self.at:
            view = view[: max(self.stop - self.at, 0)]
        n = os.preadv(self.fd, [view], self.at) if len(view) else 0
        self.at += n
        return n


def _cuts(fd: int, start: int, parts: int, least: int) -> list[int] | None:
    """[start, ..., size]: the file from `start` cut into `parts` ranges of whole lines (each cut
    just after a newline); None when a range would be under `least` bytes or a cut finds no
    newline within a chunk's length."""
    size = os.fstat(fd).st_size
    if size - start < parts * least:
        return None
    cuts = [start]
    for k in range(1, parts):
        at = start + (size - start) * k // parts
        nl = os.pread(fd, CHUNK_SIZE, at).find(b"\n")
        if nl < 0 or not cuts[-1] < at + nl + 1 < size:
            return None
        cuts.append(at + nl + 1)
    cuts.append(size)
    return cuts


def _scan_forked(span: FileSpan, patterns: Sequence[ScanPattern], finder: _Candidates, parts: int,
                 chunk_size: int, cancel, progress) -> ScanResult | None:
    """The file cut into `parts` ranges: the first scanned here, each other by a forked child
    (scanproc), whose matches are then applied here in log order; the rest of the file (a last
    line without its newline, lines written meanwhile) and any range a child left are scanned
    here. None, with nothing read, when the file is too small to cut or a fork fails."""
    from troubleshoot.engine import scanproc

    fd = span.fd
    cuts = _cuts(fd, span.at, parts, chunk_size)
    if cuts is None:
        return None
    counters = scanproc.Counters(len(cuts) - 2, progress, cuts[-1] - cuts[0])
    children: list[scanproc.Child] = []
    hits: dict[tuple[str, str], GroupHits] = {}
    check = _checker(patterns, hits, finder)
    try:
        for k in range(1, len(cuts) - 1):
            work = functools.partial(_child_scan, fd=fd, start=cuts[k], stop=cuts[k + 1], patterns=patterns,
                                     finder=finder, chunk_size=chunk_size, progress=counters.child(k - 1))
            try:
                scanproc.start(work, children)
            except OSError:  # no more processes or memory for one: the scan runs here (threads)
                return None

        def between() -> None:
            for c in children:
                c.drain()

        def waiting() -> bool:
            counters.report()
            return cancel is not None and cancel.is_set()

        own = _Chunks(_FileRange(fd, cuts[0], cuts[1]), chunk_size, counters.own())
        line = _scan_chunks(own, finder, check, 1, cancel, None, between)
        at = cuts[1]
        for k, child in enumerate(children, 1):
            got = child.messages(waiting)
            if cancel is not None and cancel.is_set():
                raise ScanCancelled()
            try:
                end_of = scanproc.load(got[-1]) if got else None
            except Exception:  # pickle's errors vary; a damaged report is a child that failed
                end_of = None
            if isinstance(end_of, tuple):
                _, lines, done = end_of
                for batch in got[:-1]:
                    _replay(scanproc.load(batch), line, patterns, hits, finder)
                line += lines
                at = cuts[k] + done
            else:  # the child failed: this process scans its range
                at = cuts[k]
            if k < len(children) and at < cuts[k + 1]:
                gap = _Chunks(_FileRange(fd, at, cuts[k + 1]), chunk_size, counters.own())
                line = _scan_chunks(gap, finder, check, line, cancel)
                at = cuts[k + 1]
        rest = _Chunks(_FileRange(fd, at, None), chunk_size, counters.own())
        line = _scan_chunks(rest, finder, check, line, cancel)
        end = at + rest.total
        counters.report(end - span.at)
    finally:
        for c in children:
            c.kill()
    span.seek(end)
    return ScanResult(total_lines=line - 1, total_bytes=end - span.at, hits=hits, backend=finder.name)


def _child_scan(send, fd: int, start: int, stop: int, patterns: Sequence[ScanPattern], finder: _Candidates,
                chunk_size: int, progress) -> None:  # pragma: no cover - runs in a forked child
    """A child's range: each matching line's matches sent in batches (one per chunk), then
    ("end", lines, bytes done). It retires what it has seen as a one-process scan of its range
    would (`_retire_seen`); the parent retires at least as much by the time it gets to these
    lines, so what the child sends is all the parent can need. An unfinished last line (a
    file without its final newline) is left to the parent."""
    counts: dict = {}
    batch: list = []

    def check(raw: bytes, line: int, idxs) -> None:
        matches = _verify_line(raw, idxs, patterns, finder)
        if matches:
            batch.append((line, matches))
            _retire_seen(matches, patterns, counts, finder)

    sent = 0

    def flush() -> bool:  # a batch per chunk; true once the report is as large as it may grow
        nonlocal sent
        if batch:
            sent += send(batch)
            batch.clear()
        return sent >= REPORT_BYTES

    chunks = _Chunks(_FileRange(fd, start, stop), chunk_size, progress)
    line = _scan_chunks(chunks, finder, check, 0, between=flush, last_line=False)
    send(("end", line, chunks.done))


def _retire_seen(matches: list[tuple], patterns: Sequence[ScanPattern], counts: dict, finder: _Candidates) -> None:
    """What `_apply` retires for one line's matches, without keeping the hits: a context pattern
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
            _retire_group(key, patterns, finder)


def _retire_group(key: tuple[str, str], patterns: Sequence[ScanPattern], finder: _Candidates) -> None:
    """A group that matched HIT_CAP lines: none of its patterns is looked for any more."""
    for j, q in enumerate(patterns):
        if (q.group, q.role) == key:
            finder.retire(j)


def _replay(batch: list, base: int, patterns: Sequence[ScanPattern], hits: dict, finder: _Candidates) -> None:
    """A child's matches applied here: a pattern retired by the time its line comes (by an earlier
    range) is skipped, as a one-process scan would not have looked for it."""
    retired = finder.retired
    for line, matches in batch:
        if retired:
            matches = [m for m in matches if m[0] not in retired]
            if not matches:
                continue
        _apply(base + line, matches, patterns, hits, finder)


class _Chunks:
    """A stream read in chunks of whole lines into one reused buffer. A line longer than
    LONG_LINE comes out in windows (numbered as one line); the unfinished last line comes out
    at the end with `final` set (it counts as a line)."""

    def __init__(self, stream, chunk_size: int, progress=None):
        self.buf = bytearray(2 * chunk_size)
        self.size = chunk_size
        self.read_into = _reader(stream)
        self.progress = progress
        self.total = 0
        self.done = 0  # bytes of the chunks handed out so far (not the line carried over)
        self.tail: tuple[int, int] = (0, 0)  # the unfinished line: start, stop
        self.eof = False

    def next(self) -> tuple[bytearray, int, int] | None:
        """(buffer, end, final) with whole lines in buffer[:end]; None at the end."""
        if self.eof:
            return None
        a, b = self.tail
        buf = self.buf
        have = b - a
        if have:
            buf[:have] = buf[a:b]  # each read lands after the bytes carried over
        size = self.size
        window = max(size, LONG_LINE)
        looked = 0  # buf[:looked] holds no newline
        while True:
            first = buf.find(b"\n", looked, have)
            if first > window or (first < 0 and have > window):
                # A line longer than LONG_LINE: matched in windows of that length, numbered as one
                # line. Each window starts a whole number of windows into the line, wherever the
                # reads fell, so a scan that started elsewhere in the file cuts it the same way.
                self.tail = (window, have)
                self.done = self.total - (have - window)
                return buf, window, 0
            if first >= 0:
                cut = buf.rfind(b"\n", first, have)
                self.tail = (cut + 1, have)
                self.done = self.total - (have - cut - 1)
                return buf, cut + 1, 0
            looked = have
            if len(buf) - have < size:
                buf.extend(bytes(len(buf)))
            n = self.read_into(buf, have, size)
            if not n:
                self.eof = True
                return (buf, have, 1) if have else None
            self.total += n
            if self.progress is not None:
                self.progress(self.total)
            have += n


# Above this many bytes a scan asks glibc to keep chunk-sized blocks on the heap (see below).
STEADY_HEAP_BYTES = 8 << 20


@functools.lru_cache(maxsize=None)
def _steady_heap() -> None:
    """Each chunk makes a few short-lived blocks of about a chunk's size (the ANSI-stripped
    copy, a read() result). glibc serves blocks that large with a fresh mmap and returns them
    on free, so every chunk paid for faulting in a MiB of new pages (a third of a scan's CPU,
    as system time). Serving them from the heap and not trimming it reuses the same pages; the
    heap stays as large as the largest few blocks, which are bounded by the chunk size."""
    if not os.confstr_names.get("CS_GNU_LIBC_VERSION") or not _glibc():
        return
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
        mallopt(-3, 64 << 20)  # M_MMAP_THRESHOLD
        mallopt(-1, 64 << 20)  # M_TRIM_THRESHOLD
    except (OSError, AttributeError):
        pass


def _glibc() -> bool:
    try:
        return bool(os.confstr("CS_GNU_LIBC_VERSION"))
    except (ValueError, OSError):
        return False


def _reader(stream) -> Callable[[bytearray, int, int], int]:
    """read_into(buf, at, size): up to `size` bytes from the stream into buf[at:]; 0 at the end."""
    readinto = getattr(stream, "readinto", None)
    if readinto is not None:
        def read_into(buf: bytearray, at: int, size: int) -> int:
            with memoryview(buf) as view:
                return readinto(view[at : at + size]) or 0
        return read_into

    def read_copy(buf: bytearray, at: int, size: int) -> int:
        data = stream.read(size)
        buf[at : at + len(data)] = data
        return len(data)
    return read_copy


def _prepared(buf: bytearray, end: int, finder: _Candidates) -> tuple[bytes | bytearray, int]:
    """What the finder reads of buf[:end]: the buffer itself, or a copy (stripped of escape
    sequences unless the finder strips the lines that hold them itself)."""
    if finder.raw_ansi:
        return buf, end
    if buf.find(b"\x1b", 0, end) >= 0:
        # Never removes a newline, so line numbers hold.
        with memoryview(buf) as view:
            chunk, escapes = ANSI_BYTES.subn(b"", view[:end])
        finder.stripped(escapes, end)
        return chunk, len(chunk)
    finder.stripped(0, end)
    if finder.zero_copy:
        return buf, end
    with memoryview(buf) as view:
        return bytes(view[:end]), end


def _verify_chunk(chunk, end: int, line_base: int, finder: _Candidates, check,
                  prefilter: "_Prefilter | None" = None) -> int:
    """Hand each candidate line of chunk[:end] (whole lines) to `check(raw, line, idxs)`; return
    the line number after them. Newlines are counted once: up to each candidate, then the rest."""
    counted_to = 0
    line = line_base
    count = chunk.count
    spans = finder.spans(chunk, end) if prefilter is None else finder.spans(chunk, end, prefilter)
    for start, stop, idxs in spans:  # in line order, each line once (every finder's promise)
        line += count(b"\n", counted_to, start)
        counted_to = start
        check(chunk[start:stop], line, idxs)
    return line + count(b"\n", counted_to, end)


def _verify_line(raw: bytes, idxs: Sequence[int] | None, patterns: Sequence[ScanPattern],
                 finder: _Candidates) -> list[tuple]:
    """What each candidate pattern finds on one line, in pattern order: (pattern index, evidence
    text, start, end, captures), for the first segment it matches whose `where` holds. Depends on
    the line alone, so a forked scanner can work it out and the parent apply it."""
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    segments = clean_line(raw)
    verifiers = finder.verifiers
    out = []
    for i in (list(finder.active) if idxs is None else idxs):
        where = patterns[i].where
        find = verifiers[i]
        for seg in segments:
            found = find(seg)
            if found is None:
                continue
            start, end, captures = found
            if where is not None and not where(captures):
                continue
            out.append((i, *_evidence(seg, start, end), captures))
            break
    return out


def _apply(line: int, matches: list[tuple], patterns: Sequence[ScanPattern], hits: dict,
           finder: _Candidates) -> None:
    """Count one line's matches into `hits`, retiring what needs no more looking for."""
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
            _retire_group(key, patterns, finder)


def _add_part(rec: GroupHits, value: str, hit: LineHit, captures: dict) -> None:
    part = rec.parts.get(value)
    if part is None:
        if len(rec.parts) >= MAX_PARTS:
            return  # bounded: the group's own count and lines still hold every hit
        part = rec.parts[value] = GroupHits()
    part.add(hit, captures)


def _evidence(seg: str, start: int, end: int) -> tuple[str, int, int]:
    """The evidence kept of a matching segment: (text, start, end), at most MAX_EVIDENCE_CHARS."""
    if len(seg) <= MAX_EVIDENCE_CHARS and not seg[-1:].isspace() and seg[:1] != "\n":
        return seg, start, end  # most segments: nothing to cut or strip
    text = seg.strip("\n")
    if len(text) > MAX_EVIDENCE_CHARS:
        lo = max(0, min(start - 100, len(text) - MAX_EVIDENCE_CHARS))
        text = text[lo : lo + MAX_EVIDENCE_CHARS]
        start, end = start - lo, min(end - lo, MAX_EVIDENCE_CHARS)
    return text.rstrip(), start, end


def scan_text(text: str, patterns: Sequence[ScanPattern], backend: str | None = None) -> ScanResult:
    return scan_stream(io.BytesIO(text.encode("utf-8", errors="surrogateescape")), patterns, backend)
