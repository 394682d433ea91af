"""What a scan looks for and what it finds: patterns in, bounded hit records out.

A ScanPattern is one regex of a rule (a group) under a role (log, with_log:N, without_log).
A scan returns a ScanResult: per (group, role), a GroupHits that holds the count of matching
lines, the first and last few of them, the latest captures and the numeric captures followed
as Series, never the lines themselves, so memory stays bounded whatever the log's size.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Callable

from troubleshoot.lazyre import lazy
from troubleshoot.records import field, record
from troubleshoot.values import parse_bytes

KEEP_FIRST = 3
KEEP_LAST = 3
RECENT = 8  # samples a series' recent trend looks back over
MAX_SERIES_KEYS = 64  # distinct values of a `key` capture followed per capture name


class ScanCancelled(Exception):
    """The caller's cancel flag was set: the scan stopped between two chunks."""


@record(frozen=True)
class ScanPattern:
    """One regex to look for, belonging to a group (a rule) under a role (log, with_log...).

    `where`, when given, decides per matching line from that line's captures whether the
    line counts (a rule's `match.where`)."""

    group: str
    role: str
    regex: re.Pattern | str  # a compiled `re` pattern, or its source (compiled only when needed)
    where: Callable[[dict], bool] | None = None
    split: str | None = None  # a capture whose values get their own hits (Xid codes: one diagnosis each)

    def __init__(self, group: str, role: str, regex: re.Pattern | str, where: Callable[[dict], bool] | None = None,
                 split: str | None = None):
        # Written out: every start makes one per pattern (1,300 for the shipped rules), fewer than
        # records.HOT, and the shared __init__ of a record takes three times as long.
        self.__dict__.update(group=group, role=role, regex=regex, where=where, split=split)

    @property
    def source(self) -> str:
        return self.regex if isinstance(self.regex, str) else self.regex.pattern

    @property
    def compiled(self) -> re.Pattern:
        if isinstance(self.regex, str):
            from troubleshoot.model import compile_ascii

            return compile_ascii(self.regex)
        return self.regex

    @property
    def inline_source(self) -> str:
        """The pattern with its flags inline, as RE2 and hyperscan read it. A source string
        carries its flags inline already; a pattern compiled with flag arguments gets them spelled."""
        if isinstance(self.regex, str):
            return self.regex
        flags = ""
        if self.regex.flags & re.IGNORECASE and "(?i" not in self.regex.pattern:
            flags += "i"
        if self.regex.flags & re.MULTILINE:
            flags += "m"
        if self.regex.flags & re.DOTALL:
            flags += "s"
        return f"(?{flags}:{self.regex.pattern})" if flags else self.regex.pattern


@record
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
    last_rise: int = 0  # the sample (1-based) that last rose: a warm-up rises first, then never again
    total: float = 0.0  # of every sample after the first (the first step of a job is its slowest)

    def add(self, x: float) -> None:
        if not self.recent:
            self.recent.append(self.last)
        self.rises += x > self.last
        self.falls += x < self.last
        self.samples += 1
        self.total += x
        if x > self.last:
            self.last_rise = self.samples
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
                "trend": (self.last - base) / abs(base) if base else 0.0,
                # still climbing: it rose within the last quarter of its samples (at least the
                # last RECENT); memory that rises over the first steps and then levels off is not
                "still_rising": self.samples - self.last_rise < max(RECENT, self.samples // 4) if self.rises else False,
                "per_sample": (self.last - self.first) / (self.samples - 1) if self.samples > 1 else 0.0,
                "steady_mean": self.total / (self.samples - 1) if self.samples > 1 else self.first}


def series_view(series: dict[str, Series]) -> dict[str, dict]:
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


_THOUSANDS = lazy(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?")  # "6,123" as a job's log prints a count


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        pass
    if "," in text and _THOUSANDS.fullmatch(text):
        return float(text.replace(",", ""))
    try:
        return float(parse_bytes(text))
    except ValueError:
        return None


@record
class LineHit:
    line: int
    text: str
    start: int
    end: int


@record
class GroupHits:
    """What one group's patterns of one role found: bounded, whatever the log size."""

    count: int = 0
    first: list[LineHit] = field(default_factory=list)
    last: deque = field(default_factory=lambda: deque(maxlen=KEEP_LAST))
    captures: dict[str, str] = field(default_factory=dict)
    series: dict[str, Series] = field(default_factory=dict)
    patterns_hit: set[int] = field(default_factory=set)
    capped: bool = False  # stopped counting at tally.HIT_CAP: `count` is a lower bound
    parts: dict[str, GroupHits] = field(default_factory=dict)  # per value of ScanPattern.split

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


@record
class ScanResult:
    total_lines: int
    total_bytes: int
    hits: dict[tuple[str, str], GroupHits]
    backend: str

    def get(self, group: str, role: str) -> GroupHits | None:
        return self.hits.get((group, role))
