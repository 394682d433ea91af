"""Raw samples of pasted monitoring output (troubleshoot.paste.monitor, .gpuloops): what each
scanner saw, with the line that showed it, before `monitor.summarise` makes run facts of them."""

from __future__ import annotations

from dataclasses import dataclass, field

from troubleshoot.paste.dumps import Found


@dataclass
class CpuSample:
    busy: float  # % of the CPUs' time spent running (not idle, not iowait, not stolen)
    iowait: float
    cpus: int | None  # how many CPUs the percentages are over, when the same dump says it
    line: int


@dataclass
class ClockSample:
    key: str | None  # the GPU: an index, a PCI address
    sm_mhz: float
    temp_c: float | None
    util: float | None
    line: int


@dataclass
class Readings:
    # One list per dump: (GPU key, util %, line), in time order. Per dump because GPU keys differ
    # between tools (an index in dmon, a PCI address in the table).
    gpu: list[list[tuple[str | None, float, int]]] = field(default_factory=list)
    clocks: list[list[ClockSample]] = field(default_factory=list)  # per dump, in time order
    reasons: list[tuple[str, int]] = field(default_factory=list)  # clock event reasons seen active
    cpu: list[CpuSample] = field(default_factory=list)
    job_cores: list[tuple[float, int]] = field(default_factory=list)  # per top frame
    cpu_count: list[tuple[int, int, int]] = field(default_factory=list)  # (count, rank: 0 = affinity, line)
    read_mb_s: list[tuple[float, int]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return any(getattr(self, name) for name in _LISTS)

    def extend(self, other: "Readings") -> None:
        for name in _LISTS:
            getattr(self, name).extend(getattr(other, name))


_LISTS = ("gpu", "clocks", "reasons", "cpu", "job_cores", "cpu_count", "read_mb_s")


def found_of(r: Readings) -> Found | None:
    return Found(readings=r) if r else None


def number(text: str) -> float | None:
    try:
        return float(text.replace(",", "."))  # sysstat prints the locale's decimal comma
    except ValueError:
        return None
