"""GPU monitoring loops pasted into a log, read as samples for `monitor.summarise`: utilisation
for the run facts the watcher of `troubleshoot run` measures, and, where the loop prints them,
SM clocks, temperatures and clock event reasons, to follow a slowdown over time.

- `nvidia-smi dmon`: the `sm` column, and `pclk` with `gtemp` (older releases: `temp`), under
  the `# gpu ...` header whose columns say where each is;
- `nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits] -l N`: `utilization.gpu`,
  `clocks.sm` / `clocks.current.sm`, `temperature.gpu`, and the event reasons as NVML's bit mask
  (`clocks_event_reasons.active`, before driver 535 `clocks_throttle_reasons.active`) or one
  column per reason (`clocks_event_reasons.hw_slowdown`: Active / Not Active);
- repeated `nvidia-smi` tables (GPU-Util), read by troubleshoot.paste.nvsmi;
- `gpustat` (`[0] NVIDIA A100 | 35°C,  97 % | 20195 / 81920 MB | ...`; `'C` in its older and
  ASCII output; a fan column before the utilisation with `--show-fan`).

`trends` turns the samples into the facts only a series shows: how often a GPU swung between
busy and idle, and how far its SM clock fell while it stayed busy, with the temperature then.
"""

from __future__ import annotations

import re
import statistics

from troubleshoot.paste.dumps import Found
from troubleshoot.paste.readings import ClockSample, Readings, found_of

# NVML's clock event reasons that slow a busy GPU down (nvmlClocksEventReason*; the watcher of
# `troubleshoot run` reads NVML's mask with this table too): the power cap, sync boost and idle
# ones are not faults.
SLOWDOWN_REASONS = {0x8: "hw_slowdown", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown",
                    0x80: "hw_power_brake_slowdown"}
# A GPU is busy at or above BUSY % and idle at or below IDLE %: a swing is a move from one to the
# other (samples between the two are neither and do not count).
BUSY, IDLE = 70.0, 20.0
CLOCK_BUSY = 50.0  # clock samples count while the GPU is at least this busy (where utilisation is known)
MIN_CLOCK_SAMPLES = 6


# ------------------------------------------------------------------------ nvidia-smi dmon

_DMON_HEAD = re.compile(r"^\s*#\s*(?P<cols>(?:\w+\s+)*gpu\s+(?:\w+\s+)*sm\b.*)$", re.I)
_CELL = re.compile(r"\d+(?:\.\d+)?|-")


class _DmonColumns:
    def __init__(self, cols: list[str]):
        self.count = len(cols)
        self.gpu, self.sm = cols.index("gpu"), cols.index("sm")
        self.pclk = cols.index("pclk") if "pclk" in cols else None
        temp = "gtemp" if "gtemp" in cols else "temp" if "temp" in cols else None
        self.temp = cols.index(temp) if temp else None


class _Dump:
    """The samples of one pasted loop, kept apart from the next one (a loop's GPU keys mean
    nothing in another) and put into the readings when the loop ends."""

    def __init__(self, readings: Readings):
        self.readings = readings
        self.util: list[tuple[str | None, float, int]] = []
        self.clocks: list[ClockSample] = []

    def close(self) -> None:
        if self.util:
            self.readings.gpu.append(self.util)
        if self.clocks:
            self.readings.clocks.append(self.clocks)
        self.util, self.clocks = [], []


def dmon(lines: list[str]) -> Found | None:
    r = Readings()
    cols: _DmonColumns | None = None
    dump = _Dump(r)
    for i, text in enumerate(lines):
        stripped = text.strip()
        m = _DMON_HEAD.match(stripped) if stripped.startswith("#") else None
        if m:
            cols = _DmonColumns(m.group("cols").lower().split())
            continue
        if cols is None or stripped.startswith("#") or not stripped:
            continue  # the units line, a repeated header, a blank line between pasted blocks
        cells = stripped.split()
        if len(cells) < cols.count or not cells[cols.gpu].isdigit() or not _CELL.fullmatch(cells[cols.sm]):
            dump.close()
            cols = None
            continue
        util = None if cells[cols.sm] == "-" else float(cells[cols.sm])
        if util is not None:
            dump.util.append((cells[cols.gpu], util, i))
        clock = _value(cells, cols.pclk)
        if clock:
            dump.clocks.append(ClockSample(cells[cols.gpu], clock, _value(cells, cols.temp), util, i))
    dump.close()
    return found_of(r)


def _value(cells: list[str], at: int | None) -> float | None:
    if at is None or not _CELL.fullmatch(cells[at]) or cells[at] == "-":
        return None
    return float(cells[at])


# ------------------------------------------------------------------------ nvidia-smi --query-gpu csv

_QUERY = re.compile(r"--query-gpu[= ](?P<fields>[\w.,]+)")
_KEYS = ("index", "pci.bus_id", "gpu_bus_id", "uuid", "gpu_uuid")
_CLOCKS = ("clocks.sm", "clocks.current.sm")
_REASONS = ("clocks_event_reasons.", "clocks_throttle_reasons.")
_NUMBER = re.compile(r"(\d+(?:\.\d+)?)\s*(?:%|MHz|C)?")


def _read_columns(names: list[str]) -> bool:
    return "utilization.gpu" in names or any(c in names for c in _CLOCKS)


def query_csv(lines: list[str]) -> Found | None:
    r = Readings()
    names: list[str] | None = None
    dump = _Dump(r)
    for i, text in enumerate(lines):
        m = _QUERY.search(text)
        if m:  # the command: its fields name the columns of a noheader loop
            dump.close()
            names = m.group("fields").strip(",").split(",")
            continue
        header = _header(text)
        if header is not None:
            if header != names:
                dump.close()
            names = header
            continue
        if names is None or not _read_columns(names) or not text.strip():
            continue
        cells = [c.strip() for c in text.split(",")]
        if len(cells) != len(names) or not _row(dump, dict(zip(names, cells)), i):
            dump.close()
            names = None
    dump.close()
    return found_of(r)


def _header(text: str) -> list[str] | None:
    """The column names of a CSV header line, without their units (" [MiB]")."""
    if "," not in text or not ("utilization.gpu" in text or "clocks" in text):
        return None
    cells = [c.strip().split(" [")[0] for c in text.split(",")]
    if _read_columns(cells) and all(re.fullmatch(r"[\w.]+", c) for c in cells):
        return cells
    return None


def _row(dump: _Dump, row: dict[str, str], i: int) -> bool:
    """One sample row into the loop's samples; False when the row is not one of the loop's."""
    key = next((row[k] for k in _KEYS if k in row), None)
    util = _cell(row, ("utilization.gpu",))
    clock = _cell(row, _CLOCKS)
    if util is None and clock is None:
        return False
    if util is not None:
        dump.util.append((key, util, i))
    if clock is not None:
        dump.clocks.append(ClockSample(key, clock, _cell(row, ("temperature.gpu",)), util, i))
    for name, value in row.items():
        if name.startswith(_REASONS):
            dump.readings.reasons += [(reason, i) for reason in _reasons(name.split(".", 1)[1], value)]
    return True


def _cell(row: dict[str, str], names: tuple[str, ...]) -> float | None:
    for name in names:
        m = _NUMBER.fullmatch(row.get(name, ""))
        if m:
            return float(m.group(1))
    return None


def _reasons(field: str, value: str) -> list[str]:
    if field == "active":
        try:
            mask = int(value, 16)
        except ValueError:
            return []
        return [name for bit, name in SLOWDOWN_REASONS.items() if mask & bit]
    return [field] if field in SLOWDOWN_REASONS.values() and value.strip() == "Active" else []


# ------------------------------------------------------------------------ repeated nvidia-smi tables

def tables(lines: list[str]) -> Found | None:
    """Every `nvidia-smi` table in the paste (`watch nvidia-smi`, `nvidia-smi -l`, several pastes),
    each read by the table parser of troubleshoot.paste.nvsmi."""
    from troubleshoot.paste import nvsmi

    heads = [i for i, t in enumerate(lines) if "Driver Version:" in t and nvsmi._HEADER.search(t)]
    series = []
    for n, start in enumerate(heads):
        end = heads[n + 1] if n + 1 < len(heads) else min(len(lines), start + 400)
        found = nvsmi.table(lines[start:end])
        if found is None:
            continue
        at = found.lines.get("nvml.gpus[].utilization_gpu")
        for g in found.facts["nvml"]["gpus"]:
            if "utilization_gpu" in g:
                series.append((g.get("pci_bus_id") or str(g["index"]), float(g["utilization_gpu"]),
                               start + (at if at is not None else 0)))
    r = Readings()
    if series:
        r.gpu.append(series)
    return found_of(r)


# ------------------------------------------------------------------------ gpustat

_GPUSTAT = re.compile(r"^\s*\[(?P<key>\d+)\]\s.*?\|\s*(?:\d+|\?\?)\s*(?:°|')C,\s*(?:(?:\d+|\?\?)\s*%,\s*)?"
                      r"(?P<util>\d+)\s*%")


def gpustat(lines: list[str]) -> Found | None:
    series = []
    for i, text in enumerate(lines):
        m = _GPUSTAT.match(text) if "C," in text else None
        if m:
            series.append((m.group("key"), float(m.group("util")), i))
    r = Readings()
    if len(series) > 1:  # one line is a snapshot of the moment, not a loop
        r.gpu.append(series)
    return found_of(r)


# ------------------------------------------------------------------------ samples -> trend facts

def trends(r: Readings, found: Found) -> None:
    """The facts only a series shows, into `found` (area run), each with its first line."""
    most = max((swings(vs) for dump in r.gpu for vs in _by_gpu(dump, lambda u: u[0])), default=None,
               key=lambda s: s[0])
    if most and most[0]:
        found.put("run", "gpu_util_swings", most[0], most[2])
        found.put("run", "gpu_util_idle_pct", most[1], most[2])
    drops = [d for dump in r.clocks for vs in _by_gpu(dump, lambda c: c.key) if (d := clock_drop(vs))]
    if drops:
        worst = max(drops, key=lambda d: d["sm_clock_drop_pct"])
        line = worst.pop("line")
        for name, value in worst.items():
            found.put("run", name, value, line)
    if r.reasons:
        found.put("run", "throttle_reasons", sorted({name for name, _ in r.reasons}), r.reasons[0][1])
        found.put("run", "throttled", True, r.reasons[0][1])


def _by_gpu(samples: list, gpu) -> list[list]:
    """One dump's samples, GPU by GPU (`gpu` says a sample's GPU), each in time order."""
    out: dict = {}
    for s in samples:
        out.setdefault(gpu(s), []).append(s)
    return list(out.values())


def swings(samples: list[tuple[str | None, float, int]]) -> tuple[int, float, int]:
    """(moves between busy and idle, % of samples idle, first line) of one GPU's utilisation."""
    state, moves = None, 0
    for _, util, _ in samples:
        now = "busy" if util >= BUSY else "idle" if util <= IDLE else None
        if now and state and now != state:
            moves += 1
        state = now or state
    idle = sum(1 for _, u, _ in samples if u <= IDLE)
    return moves, round(100 * idle / len(samples), 1), samples[0][2]


def clock_drop(samples: list[ClockSample]) -> dict | None:
    """How far one GPU's SM clock fell while it stayed busy: the best clock of the first half
    against the median of the last third, with the temperatures of those samples, as run facts
    (and the first sample's line)."""
    busy = [s for s in samples if s.util is None or s.util >= CLOCK_BUSY]
    if len(busy) < MIN_CLOCK_SAMPLES:
        return None
    first = max(s.sm_mhz for s in busy[: len(busy) // 2])
    last = statistics.median(s.sm_mhz for s in busy[-max(2, len(busy) // 3):])
    if first <= 0:
        return None
    temps = [s.temp_c for s in busy if s.temp_c is not None]
    out = {"sm_clock_drop_pct": round(100 * (first - last) / first, 1), "sm_clock_first_mhz": _plain(first),
           "sm_clock_last_mhz": _plain(last), "line": busy[0].line}
    if temps:
        out["gpu_temp_max"] = _plain(max(temps))
    return out


def _plain(value: float) -> float | int:
    """A reading as the tool printed it: 1920, not 1920.0 (an explanation quotes it)."""
    return int(value) if value == int(value) else round(value, 1)
