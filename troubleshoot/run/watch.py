"""Watch a running job cheaply: one sample a second of its process tree, the machine and the
GPUs, turned into `run.*` facts that rules (rules/run.yaml) diagnose, live and at the end.

A sample reads a few /proc files and, when NVML is there, a few NVML counters: well under 1% of
a core at one sample a second.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable

SPARK = "▁▂▃▄▅▆▇█"
MAX_SAMPLES = 3600  # an hour at 1/s; older samples are thinned, never unbounded
READING_GAP = 0.25  # seconds between two throughput readings of the job's output
# NVML talks to the driver through one of these (/dev/dxg: WSL2); without them it cannot work
GPU_DEVICES = ("/dev/nvidiactl", "/dev/dxg")
THROUGHPUT = re.compile(rb"(\d+(?:\.\d+)?)\s*(it/s|its/s|samples/s|samples/sec|examples/sec|tokens/s|img/s)")


@dataclass
class Sample:
    t: float
    rss_mib: float
    cpu_s: float
    read_bytes: int
    iowait_pct: float | None
    mem_available_mib: float | None
    gpu_util: float | None = None
    gpu_mem_mib: float | None = None
    throttled: tuple[str, ...] = ()
    sm_mhz: float | None = None  # mean SM clock of the job's GPUs
    temp_c: float | None = None  # the hottest of them


def _children(root: int) -> list[int]:
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rfind(b")") + 2:].split()[1])
        kids.setdefault(ppid, []).append(int(name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(kids.get(pid, []))
    return out


def _proc_numbers(pid: int) -> tuple[float, float, int]:
    """RSS MiB, CPU seconds, bytes read (0s when the process is gone or hidden)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        fields = stat[stat.rfind(b")") + 2:].split()
        ticks = os.sysconf("SC_CLK_TCK")
        cpu = (int(fields[11]) + int(fields[12])) / ticks
        rss = int(fields[21]) * os.sysconf("SC_PAGE_SIZE") / (1 << 20)
    except (OSError, IndexError, ValueError):
        return 0.0, 0.0, 0
    read = 0
    try:
        with open(f"/proc/{pid}/io", "rb") as f:
            for line in f:
                if line.startswith(b"rchar:"):
                    read = int(line.split()[1])
    except OSError:
        pass
    return rss, cpu, read


def _cpu_times() -> list[int] | None:
    try:
        with open("/proc/stat", "rb") as f:
            return [int(x) for x in f.readline().split()[1:]]
    except OSError:
        return None


def _mem_available() -> float | None:
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


class Watcher:
    """Samples a job until stopped; `facts()` summarises what it saw as the `run` area."""

    def __init__(self, pid: int, interval: float = 1.0, nvml=None, on_sample: Callable[["Watcher"], None] | None = None):
        self.pid = pid
        self.interval = interval
        self.samples: deque[Sample] = deque(maxlen=MAX_SAMPLES)
        self.throughput: deque[tuple[float, float]] = deque(maxlen=MAX_SAMPLES)
        self._next_reading = 0.0
        self.on_sample = on_sample
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="troubleshoot-watch", daemon=True)
        self._prev_cpu = _cpu_times()
        self._nvml = nvml
        self._handles = None
        self.started = time.monotonic()
        self.mem_limit_mib = _cgroup_limit() or (_mem_total() or None)

    def start(self) -> "Watcher":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def feed(self, data: bytes) -> None:
        """Output of the job, to read its throughput lines (it/s, samples/s). Called for every
        read of a job that may print a million lines: a reading is taken at most every
        READING_GAP seconds, and the regex only runs where the bytes hold a rate at all."""
        now = time.monotonic()
        if now < self._next_reading:
            return
        tail = data[-4096:]
        if b"/s" not in tail:  # every unit THROUGHPUT knows is "<unit>/s..."
            return
        last = None
        for last in THROUGHPUT.finditer(tail):
            pass
        if last is None:
            return
        try:
            self.throughput.append((now - self.started, float(last.group(1))))
        except ValueError:
            return
        self._next_reading = now + READING_GAP

    def _init_nvml(self) -> None:
        if self._nvml is None and not any(os.path.exists(d) for d in GPU_DEVICES):
            self._nvml = False  # no NVIDIA driver here: importing pynvml and failing costs ~50 ms
            return
        if self._nvml is None:
            try:
                import pynvml

                pynvml.nvmlInit()
                self._nvml = pynvml
            except Exception:
                self._nvml = False
                return
        try:
            n = self._nvml.nvmlDeviceGetCount()
            self._handles = [self._nvml.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
        except Exception:
            self._handles = None

    def _loop(self) -> None:
        self._init_nvml()  # here, not in start(): importing pynvml and its init take ~50 ms
        while not self._stop.wait(self.interval):
            try:
                s = self.sample()
            except Exception:  # a sample that fails is skipped, never the job
                continue
            if s is None:
                continue
            self.samples.append(s)
            if self.on_sample:
                try:
                    self.on_sample(self)
                except Exception:
                    pass

    def sample(self) -> Sample | None:
        """One sample; None once the job has exited (a dead process reads as zero memory)."""
        pids = _children(self.pid)
        rss = cpu = 0.0
        read = 0
        for p in pids:
            r, c, b = _proc_numbers(p)
            rss, cpu, read = rss + r, cpu + c, read + b
        if rss == 0:
            return None
        now_cpu = _cpu_times()
        iowait = None
        if now_cpu and self._prev_cpu and len(now_cpu) > 4:
            total = sum(now_cpu) - sum(self._prev_cpu)
            iowait = 100.0 * (now_cpu[4] - self._prev_cpu[4]) / total if total > 0 else 0.0
        self._prev_cpu = now_cpu
        s = Sample(time.monotonic() - self.started, rss, cpu, read, iowait, _mem_available())
        if self._handles:
            s.gpu_util, s.gpu_mem_mib, s.throttled, s.sm_mhz, s.temp_c = self._gpu(set(pids))
        return s

    def _gpu(self, pids: set[int]):
        # the bits a pasted loop's reasons are read by (paste.gpuloops), loaded with NVML's first sample
        from troubleshoot.paste.gpuloops import SLOWDOWN_REASONS

        nv = self._nvml
        utils, mem, reasons, clocks, temps = [], 0.0, set(), [], []
        for h in self._handles:
            try:
                procs = nv.nvmlDeviceGetComputeRunningProcesses(h)
            except Exception:
                procs = []
            mine = [p for p in procs if p.pid in pids]
            if not mine:
                continue
            mem += sum((p.usedGpuMemory or 0) for p in mine) / (1 << 20)
            try:
                utils.append(nv.nvmlDeviceGetUtilizationRates(h).gpu)
            except Exception:
                pass
            try:
                clocks.append(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM))
                temps.append(nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU))
            except Exception:
                pass
            try:
                mask = nv.nvmlDeviceGetCurrentClocksEventReasons(h)
                reasons.update(name for bit, name in SLOWDOWN_REASONS.items() if mask & bit)
            except Exception:
                pass
        util = sum(utils) / len(utils) if utils else None
        clock = sum(clocks) / len(clocks) if clocks else None
        return util, (mem if utils or mem else None), tuple(sorted(reasons)), clock, (max(temps) if temps else None)

    # ------------------------------------------------------------ facts

    def facts(self, final: bool = False) -> dict:
        """The `run` facts. `final`: the job has ended, so a last sample taken while it was
        exiting (Python frees everything at exit) is not read as memory coming back."""
        s = list(self.samples)
        if final and len(s) > 2 and s[-1].rss_mib < s[-2].rss_mib:
            s = s[:-1]
        out: dict = {"available": True, "samples": len(s), "interval_s": self.interval,
                     "duration_s": round(time.monotonic() - self.started, 1)}
        if not s:
            return out
        rss = [x.rss_mib for x in s]
        out.update(_trend("rss", rss))
        gpu_mem = [x.gpu_mem_mib for x in s if x.gpu_mem_mib is not None]
        out.update(_trend("gpu_mem", gpu_mem))
        out["memory_growing"] = bool(out.get("gpu_mem_growing") or out.get("rss_growing"))
        out["memory_growing_kind"] = "GPU" if out.get("gpu_mem_growing") else ("host" if out.get("rss_growing") else None)
        iow = [x.iowait_pct for x in s if x.iowait_pct is not None]
        out["iowait_avg"] = round(sum(iow) / len(iow), 1) if iow else None
        util = [x.gpu_util for x in s if x.gpu_util is not None]
        out["gpu_util_avg"] = round(sum(util) / len(util), 1) if util else None
        span = s[-1].t - s[0].t
        out["cpu_cores_avg"] = round((s[-1].cpu_s - s[0].cpu_s) / span, 2) if span > 0 else None
        out["cpu_count"] = _usable_cores()
        out["read_mb_s"] = round((s[-1].read_bytes - s[0].read_bytes) / 1e6 / span, 2) if span > 0 else None
        out["io_stall"] = bool(out["gpu_util_avg"] is not None and out["gpu_util_avg"] < 30
                               and (out["iowait_avg"] or 0) > 20)
        out["mem_limit_mib"] = self.mem_limit_mib
        peak = max(rss)
        out["rss_peak_fraction"] = round(peak / self.mem_limit_mib, 3) if self.mem_limit_mib else None
        avail = [x.mem_available_mib for x in s if x.mem_available_mib is not None]
        out["mem_available_min_mib"] = round(min(avail)) if avail else None
        out["near_memory_limit"] = bool((out["rss_peak_fraction"] or 0) > 0.9)
        throttled = sorted({r for x in s for r in x.throttled})
        out["throttle_reasons"] = throttled
        out["throttled"] = bool(throttled)
        out.update(_gpu_trends(s))
        tp = [v for _, v in self.throughput]
        if len(tp) >= 8:
            q = max(2, len(tp) // 4)
            first, last = sum(tp[:q]) / q, sum(tp[-q:]) / q
            out["throughput_first"], out["throughput_last"] = round(first, 2), round(last, 2)
            out["throughput_drop_pct"] = round(100 * (1 - last / first), 1) if first > 0 else None
        return out

    def summary(self) -> str:
        s = list(self.samples)
        if len(s) < 2:
            return ""
        lines = []
        util = [x.gpu_util for x in s if x.gpu_util is not None]
        if util:
            lines.append(f"GPU util   {sparkline(util, 0, 100)}  avg {sum(util) / len(util):.0f}%")
        else:
            cores = [max(0.0, (b.cpu_s - a.cpu_s) / max(b.t - a.t, 1e-6)) for a, b in zip(s, s[1:])]
            lines.append(f"job CPU    {sparkline(cores, 0, max(max(cores), 1.0))}  avg {sum(cores) / len(cores):.2f} cores")
        rss = [x.rss_mib for x in s]
        lines.append(f"job memory {sparkline(rss, 0, max(rss))}  {rss[0]:.0f} -> {rss[-1]:.0f} MiB (peak {max(rss):.0f})")
        tp = [v for _, v in self.throughput]
        if len(tp) >= 2:
            lines.append(f"throughput {sparkline(tp, 0, max(tp))}  {tp[0]:g} -> {tp[-1]:g}")
        return "\n".join(lines)


WARMUP_SAMPLES = 3  # imports, model and CUDA context creation grow memory at start, legitimately


def _trend(name: str, values: list[float]) -> dict:
    """Is a series climbing steadily after warm-up? Needs enough samples, few falls, real growth."""
    values = values[WARMUP_SAMPLES:] if len(values) > WARMUP_SAMPLES + 4 else []
    if len(values) < 5:
        return {f"{name}_growing": False}
    steps = list(zip(values, values[1:]))
    rises = sum(1 for a, b in steps if b > a + 0.5)
    falls = sum(1 for a, b in steps if b < a - 0.5)
    growth = values[-1] - values[0]
    minutes = max(len(values) - 1, 1) / 60.0
    # Robust to the sawtooth of allocations freed and made again between samples: the lowest
    # value of the last third must be above the highest of the first third, by a real margin.
    third = max(2, len(values) // 3)
    low_late, high_early = min(values[-third:]), max(values[:third])
    # And still climbing at the end, about as fast as before: a start-up that outlasts the
    # warm-up (imports, a model loaded, the first batches on a loaded machine) climbs ever more
    # slowly and levels off, where a leak climbs by about as much in every third.
    early, middle, late = _median(values[:third]), _median(values[third:-third]), _median(values[-third:])
    still_climbing = late - middle > 8 and late - middle >= 0.5 * (middle - early)
    growing = (low_late > high_early and low_late - high_early > 48 and growth > 64
               and values[-1] > 1.15 * max(values[0], 1.0) and still_climbing)
    return {f"{name}_first_mib": round(values[0], 1), f"{name}_last_mib": round(values[-1], 1),
            f"{name}_max_mib": round(max(values), 1), f"{name}_rises": rises, f"{name}_falls": falls,
            f"{name}_growth_mib_per_min": round(growth / minutes, 1), f"{name}_growing": growing}


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def sparkline(values: list[float], lo: float, hi: float, width: int = 40) -> str:
    if not values:
        return ""
    if len(values) > width:  # average into `width` buckets
        step = len(values) / width
        values = [sum(values[int(i * step):int((i + 1) * step)] or [0]) / max(1, len(values[int(i * step):int((i + 1) * step)]))
                  for i in range(width)]
    span = (hi - lo) or 1.0
    return "".join(SPARK[min(len(SPARK) - 1, max(0, int((v - lo) / span * (len(SPARK) - 1) + 0.5)))] for v in values)


def _usable_cores() -> int | None:
    """Cores the job may run on: the wrapper's affinity, which the job inherits (a cpuset or
    `taskset` narrows it). A job that succeeded is not probed, so the run facts carry it."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


def _cgroup_limit() -> float | None:
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = open(path).read().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 1 << 60:
            return int(text) / (1 << 20)
    return None


def _mem_total() -> float | None:
    try:
        with open("/proc/meminfo") as f:
            return int(f.readline().split()[1]) / 1024
    except (OSError, IndexError, ValueError):
        return None


def _gpu_trends(s: list[Sample]) -> dict:
    """What only the series shows, read as a pasted monitoring loop's trends are
    (paste.gpuloops): swings between busy and idle, and the SM clock falling while busy."""
    from troubleshoot.paste import gpuloops
    from troubleshoot.paste.readings import ClockSample

    out: dict = {}
    util = [(None, x.gpu_util, i) for i, x in enumerate(s) if x.gpu_util is not None]
    if util:
        out["gpu_util_swings"], out["gpu_util_idle_pct"], _ = gpuloops.swings(util)
    clocks = [ClockSample(None, x.sm_mhz, x.temp_c, x.gpu_util, i) for i, x in enumerate(s) if x.sm_mhz]
    drop = gpuloops.clock_drop(clocks)
    if drop:
        drop.pop("line")
        out.update(drop)
    return out
