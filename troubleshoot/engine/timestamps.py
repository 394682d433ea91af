"""Timestamps as training logs write them, for ordering events across ranks and nodes.

Pure functions. Only the start of a line is searched (where loggers put the time). The key
ignores the year because glog and syslog stamps do not carry one; a job that runs across New
Year's Eve is ordered wrongly, which is the price of comparing the formats with each other.
"""

from __future__ import annotations

from dataclasses import dataclass

from troubleshoot.lazyre import lazy

HEAD = 80  # characters of a line searched for a timestamp

_MONTHS = {m: i for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct",
                                       "nov", "dec"), 1)}
_FRACTION = r"(?:[.,](?P<frac>\d{1,9}))?"
_FORMATS = (
    # 2024-01-15 10:22:33,123 (Python logging), 2024-01-15T10:22:33.123Z (ISO 8601, Slurm)
    lazy(r"(?P<year>\d{4})-(?P<month>\d\d)-(?P<day>\d\d)[T ](?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)" + _FRACTION),
    # glog: absl pads the month (I0225 07:05:33.508602), PyTorch's C++ side does not
    # ([E626 06:24:44.159932949 ...] is June 26); the day always has two digits.
    lazy(r"(?:^|[\[\s:])[IWEF](?P<month>1[0-2]|0?[1-9])(?P<day>[0-3]\d) (?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)"
         + _FRACTION),
    # syslog (Jan 15 10:22:33) and dmesg -T ([Mon Jan 15 10:22:33 2024])
    lazy(r"(?i)\b(?P<mon>jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]* +(?P<day>\d{1,2}) "
         r"(?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)" + _FRACTION),
)


@dataclass(frozen=True, order=True)
class Stamp:
    key: tuple[int, int, float]  # (month, day, seconds into the day)
    text: str = ""  # as written in the log

    def __str__(self) -> str:
        return self.text


def find(line: str) -> Stamp | None:
    """The timestamp at the start of `line`, or None."""
    head = line[:HEAD]
    for fmt in _FORMATS:
        m = fmt.search(head)
        if m is None:
            continue
        g = m.groupdict()
        month = int(g["month"]) if g.get("month") else _MONTHS[g["mon"].lower()[:3]]
        day, h, mi, s = int(g["day"]), int(g["h"]), int(g["m"]), int(g["s"])
        if not (1 <= month <= 12 and 1 <= day <= 31 and h < 24 and mi < 60 and s < 61):
            continue
        frac = float("0." + g["frac"]) if g.get("frac") else 0.0
        return Stamp((month, day, h * 3600 + mi * 60 + s + frac), m.group(0).lstrip("[ :"))
    return None
