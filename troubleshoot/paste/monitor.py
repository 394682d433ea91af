"""Monitoring output users paste when they ask why the GPU is idle, read as the `run.*` facts
that `troubleshoot run`'s watcher measures (troubleshoot/run/watch.py), for the machine and the
moment the paste came from.

GPU side, read by troubleshoot.paste.gpuloops: `nvidia-smi dmon` rows, `nvidia-smi
--query-gpu=... --format=csv[,noheader][,nounits] -l N` loops, repeated `nvidia-smi` tables
(GPU-Util) and gpustat; its trends (swings, a falling clock) join the facts below.
CPU side, read here: `top` frames (`%Cpu(s)`, `%CpuN`, the process table), `vmstat N` rows, `iostat`
reports (`avg-cpu`, the device table), `mpstat` rows; core counts from `nproc`, `lscpu` and
the `(N CPU)` banner of sysstat tools.

Each scanner returns `Readings`: raw samples, each with the line that showed it. `summarise()`
turns the readings of all scanners into run facts the way the watcher does:

- run.gpu_util_avg: mean utilisation over every sample of the job's GPUs. The watcher averages
  the GPUs that run the job's processes; a paste does not say which those are, so a GPU at 0 %
  in every sample is left out while another GPU in the same dump was busy (an idle card of a
  shared node), and all GPUs count when all are idle.
- run.iowait_avg: mean system-wide iowait % (the watcher reads the same /proc/stat share).
- run.cpu_cores_avg: the job's cores (sum of the training processes' %CPU in `top` / 100, as the
  watcher sums its process tree) when a process table shows them; else the system's busy cores
  (busy share x the CPUs that share is over), an upper bound of the job's. `run.cpu_cores_scope`
  says which ("job" or "system").
- run.cpu_count: `nproc` (the affinity the job gets, what the watcher counts), else the
  machine's count (lscpu, the sysstat banner, top's per-CPU lines).
- run.samples / run.cpu_samples: how many GPU and CPU samples the averages stand on.

The CPU side (CPU_PARSERS) is read only where a GPU loop is found: no rule reads CPU state
without the GPU's utilisation, and most logs then pay for three substring searches, not eight.

Reports that hold averages since boot rather than the moment (the first `vmstat`/`iostat`
report, a lone `mpstat` without its Average line, the first of several `top` frames) are
dropped: they describe the machine's history, not the training.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from troubleshoot.paste import gpuloops
from troubleshoot.paste.dumps import Found
from troubleshoot.paste.readings import CpuSample, Readings, found_of, number

# Whatever the watcher's io_stall uses (troubleshoot/run/watch.py): GPU < 30 % while iowait > 20 %.
IO_STALL_GPU, IO_STALL_IOWAIT = 30, 20


# ------------------------------------------------------------------------ top

_TOP_HEAD = re.compile(r"^\s*top - \d")
_TOP_CPU = re.compile(r"%?Cpu(?P<cpu>\(s\)|\d+)\s*:\s*(?P<rest>.*?)(?=%Cpu|$)")
_TOP_FIELD = re.compile(r"(\d+(?:[.,]\d+)?)\s*%?\s*(us|sy|ni|id|wa|hi|si|st)\b")
_TOP_PROCS = re.compile(r"^\s*PID\s+USER\b.*%CPU")
# The training process and its DataLoader workers (which keep the name "python"); PyTorch names
# its main thread pt_main_thread, which top shows as the command.
_JOB = re.compile(r"^(?:\S*/)?(?:python[\d.]*|pt_\w+|torchrun)$")


@dataclass
class _Frame:
    summary: tuple[float, float, int] | None = None  # busy, iowait, line
    per_cpu: dict = field(default_factory=dict)  # cpu -> (busy, iowait, line)
    job: list = field(default_factory=list)  # (%CPU, line)
    procs: bool = False


def _cpu_fields(rest: str) -> tuple[float, float] | None:
    f = {k: number(v) for v, k in _TOP_FIELD.findall(rest)}
    if "id" not in f:
        return None  # top's graph modes ("%Cpu(s):  23.4/4.2  [|||") carry no idle share
    iowait = f.get("wa") or 0.0
    return max(0.0, 100.0 - f["id"] - iowait - (f.get("st") or 0.0)), iowait


def top(lines: list[str]) -> Readings:
    frames: list[_Frame] = []
    cur: _Frame | None = None
    cols: list[str] | None = None
    for i, text in enumerate(lines):
        if _TOP_HEAD.match(text):
            cur = _Frame()
            frames.append(cur)
            cols = None
            continue
        if "Cpu" in text:
            for m in _TOP_CPU.finditer(text):
                got = _cpu_fields(m.group("rest"))
                if got is None:
                    continue
                key = m.group("cpu")
                if cur is None or (key == "(s)" and cur.summary) or key in cur.per_cpu:
                    cur = _Frame()
                    frames.append(cur)
                if key == "(s)":
                    cur.summary = (*got, i)
                else:
                    cur.per_cpu[key] = (*got, i)
            if cur is not None and (cur.summary or cur.per_cpu):
                cols = None
                continue
        if _TOP_PROCS.match(text):
            cols = text.split()
            if cur is None:
                cur = _Frame()
                frames.append(cur)
            cur.procs = True
            continue
        if cols is not None and cur is not None:
            cells = text.split()
            if len(cells) < len(cols) or not cells[0].isdigit():
                cols = None
                continue
            c = number(cells[cols.index("%CPU")])
            command = cells[cols.index("COMMAND")] if "COMMAND" in cols else cells[-1]
            if c is not None and _JOB.match(command):
                cur.job.append((c, i))
    frames = [f for f in frames if f.summary or f.per_cpu or f.job]
    if len(frames) > 1:
        frames = frames[1:]  # `top -b -n N`: the first frame's shares are since boot
    r = Readings()
    for f in frames:
        n = len(f.per_cpu) or None
        if f.summary:
            r.cpu.append(CpuSample(f.summary[0], f.summary[1], n, f.summary[2]))
        elif f.per_cpu:
            shares = list(f.per_cpu.values())
            r.cpu.append(CpuSample(sum(s[0] for s in shares) / n, sum(s[1] for s in shares) / n, n,
                                   min(s[2] for s in shares)))
        if n:
            r.cpu_count.append((n, 1, min(s[2] for s in f.per_cpu.values())))
        if f.job:
            r.job_cores.append((sum(c for c, _ in f.job) / 100.0, f.job[0][1]))
    return r


# ------------------------------------------------------------------------ vmstat

_VMSTAT_HEAD = re.compile(r"^\s*r\s+b\s+swpd\s+free\s+\w+\s+\w+\s+si\s+so\s+bi\s+bo\s+in\s+cs\s+us\s+sy\s+id\s+wa\b")
_VMSTAT_GROUPS = re.compile(r"^\s*(?:-+time-+\s+)?procs\s+-+memory")
_CLOCK = re.compile(r"^\d{1,2}:\d{2}:\d{2}$")


def vmstat(lines: list[str]) -> Readings:
    r = Readings()
    cols: list[str] | None = None
    block: list = []  # (busy, iowait, bi, line) of the rows of one vmstat run

    def close():
        # The first row of a run is the average since boot (vmstat(8)); a lone row is only that.
        for busy, iowait, bi, i in block[1:]:
            r.cpu.append(CpuSample(busy, iowait, None, i))
            r.read_mb_s.append((bi * 1024 / 1e6, i))
        block.clear()

    for i, text in enumerate(lines):
        if _VMSTAT_HEAD.match(text):
            cols = text.split()
            continue
        if cols is None or _VMSTAT_GROUPS.match(text):
            continue
        cells = text.split()
        if cells and _CLOCK.match(cells[0]):
            cells = cells[1:]  # a --time-- column in front (Exadata's OSWatcher, `vmstat -t` elsewhere)
        if len(cells) < len(cols) or not all(c.isdigit() for c in cells[:len(cols)]):
            close()
            cols = None
            continue
        v = dict(zip(cols, map(int, cells)))
        busy = 100 - v["id"] - v["wa"] - v.get("st", 0)
        block.append((max(0, busy), v["wa"], v["bi"], i))
    close()
    return r


# ------------------------------------------------------------------------ iostat and mpstat

# "Linux 5.15.0-91-generic (gpu-node-3)   01/09/2024   _x86_64_   (64 CPU)"
_SYSSTAT_BANNER = re.compile(r"^Linux\s+\S+\s+\([^)]*\)\s+.*\((?P<n>\d+)\s+CPU\)\s*$")
_AVG_CPU = re.compile(r"^\s*avg-cpu:\s+%user\s+%nice\s+%system\s+%iowait\s+%steal\s+%idle\s*$")
_DEVICE = re.compile(r"^\s*Device:?\s+")
_READ_COLS = {"rkB/s": 1024 / 1e6, "kB_read/s": 1024 / 1e6, "rMB/s": 1048576 / 1e6, "MB_read/s": 1048576 / 1e6}
# Devices that re-count what a disk below them reads, or are not disks.
_NOT_A_DISK = re.compile(r"^(?:loop|ram|zram|sr|dm-|md)\d*|^(?:sd[a-z]+|vd[a-z]+|xvd[a-z]+)\d+$|^nvme\d+n\d+p\d+$")
_IOSTAT_CMD = re.compile(r"\biostat\s+(?:\S+\s+)*-\w*y")


def iostat(lines: list[str]) -> Readings:
    banner = next(((int(m.group("n")), i) for i, t in enumerate(lines) if (m := _SYSSTAT_BANNER.match(t))), None)
    keep_first = any(_IOSTAT_CMD.search(t) for t in lines if "iostat" in t)  # -y: no since-boot report
    reports: list[dict] = []
    i = 0
    while i < len(lines):
        if _AVG_CPU.match(lines[i]) and i + 1 < len(lines):
            vals = [number(v) for v in lines[i + 1].split()]
            if len(vals) == 6 and None not in vals:
                user, nice, system, iowait, steal, idle = vals
                reports.append({"cpu": CpuSample(max(0.0, 100 - idle - iowait - steal), iowait,
                                                 banner[0] if banner else None, i + 1)})
                i += 2
                continue
        if _DEVICE.match(lines[i]) and reports:
            cols = lines[i].split()
            col = next((c for c in cols if c in _READ_COLS), None)
            total, j = 0.0, i + 1
            while j < len(lines) and lines[j].strip() and not _AVG_CPU.match(lines[j]):
                cells = lines[j].split()
                if col and len(cells) == len(cols) and not _NOT_A_DISK.match(cells[0]):
                    total += number(cells[cols.index(col)]) or 0.0
                j += 1
            if col:
                reports[-1]["read"] = (total * _READ_COLS[col], i + 1)
            i = j
            continue
        i += 1
    if not keep_first:
        reports = reports[1:]  # iostat(1): the first report is since boot
    r = Readings()
    for rep in reports:
        r.cpu.append(rep["cpu"])
        if "read" in rep:
            r.read_mb_s.append(rep["read"])
    if banner and (reports or r.cpu):
        r.cpu_count.append((banner[0], 2, banner[1]))
    return r


_MPSTAT_HEAD = re.compile(r"^(?P<t>.*?)\s*\bCPU\s+(?P<cols>%usr\b.*%idle)\s*$")


def mpstat(lines: list[str]) -> Readings:
    banner = next(((int(m.group("n")), i) for i, t in enumerate(lines) if (m := _SYSSTAT_BANNER.match(t))), None)
    cols: list[str] | None = None
    rows, average, cpus = [], None, set()
    for i, text in enumerate(lines):
        m = _MPSTAT_HEAD.match(text)
        if m and "%iowait" in m.group("cols"):
            cols = m.group("cols").split()
            continue
        if cols is None:
            continue
        cells = text.split()
        if len(cells) < len(cols) + 1:
            if not text.strip():
                continue
            cols = None
            continue
        cpu, vals = cells[-len(cols) - 1], [number(v) for v in cells[-len(cols):]]
        if None in vals or not (cpu == "all" or cpu.isdigit()):
            cols = None
            continue
        v = dict(zip(cols, vals))
        if cpu != "all":
            cpus.add(cpu)
            continue
        sample = CpuSample(max(0.0, 100 - v["%idle"] - v["%iowait"] - v.get("%steal", 0.0)), v["%iowait"],
                           banner[0] if banner else (len(cpus) or None), i)
        if cells[0].startswith("Average"):
            average = sample
        else:
            rows.append(sample)
    r = Readings()
    # mpstat(1) without an interval prints one report since boot; with one, an Average line ends it.
    if average is not None:
        r.cpu.append(average)
    elif len(rows) > 1:
        r.cpu.extend(rows)
    if r.cpu and banner:
        r.cpu_count.append((banner[0], 2, banner[1]))
    elif r.cpu and cpus:
        r.cpu_count.append((len(cpus), 2, r.cpu[0].line))
    return r


# ------------------------------------------------------------------------ nproc, lscpu

_NPROC = re.compile(r"(?:^|[$#>]\s*)nproc(?P<all>\s+--all)?\s*$")
_LSCPU = re.compile(r"^\s*CPU\(s\):\s+(?P<n>\d+)\s*$")


def cores(lines: list[str]) -> Readings:
    r = Readings()
    for i, text in enumerate(lines):
        m = _NPROC.search(text) if "nproc" in text else None
        if m:
            nxt = next((j for j in range(i + 1, min(len(lines), i + 3)) if lines[j].strip()), None)
            if nxt is not None and lines[nxt].strip().isdigit():
                # plain nproc counts the CPUs the shell may use (its affinity), as the watcher does
                r.cpu_count.append((int(lines[nxt].strip()), 2 if m.group("all") else 0, nxt))
            continue
        m = _LSCPU.match(text) if "CPU(s):" in text else None
        if m:
            r.cpu_count.append((int(m.group("n")), 2, i))
    return r


# The CPU side, with the literal strings each dump cannot lack: read only next to a GPU loop.
CPU_PARSERS = (
    (top, ("Cpu",)),  # "%Cpu(s):", "%Cpu0  :", procps 3.2's "Cpu(s):"
    (vmstat, ("swpd",)),
    (iostat, ("%iowait",)),  # the avg-cpu header; searched once for both
    (mpstat, ("%iowait",)),
    (cores, ("nproc", "CPU(s):")),
)


# ------------------------------------------------------------------------ readings -> run facts

def _gpu_average(series: list[list[tuple[str | None, float, int]]]):
    values, first, points = [], None, 0
    for s in series:
        by_gpu: dict = {}
        for key, v, i in s:
            by_gpu.setdefault(key, []).append((v, i))
        if len(by_gpu) > 1 and any(v > 0 for _, v, _ in s):
            # A card at 0 % throughout while another was busy is not one the job uses.
            by_gpu = {k: vs for k, vs in by_gpu.items() if any(v > 0 for v, _ in vs)}
        for vs in by_gpu.values():
            values += [v for v, _ in vs]
            line = vs[0][1]
            first = line if first is None else min(first, line)
        points += max(len(vs) for vs in by_gpu.values())
    if not values:
        return None, None, 0
    return round(sum(values) / len(values), 1), first, points


def summarise(r: Readings) -> Found | None:
    """The run facts of all the monitoring output found, with the line behind each."""
    util, gpu_line, points = _gpu_average(r.gpu)
    found = Found()
    gpuloops.trends(r, found)
    if util is None:
        # no rule reads CPU state without the GPU's utilisation; clocks and reasons stand alone
        return found if found.facts else None
    found.put("run", "gpu_util_avg", util, gpu_line)
    found.put("run", "samples", points, gpu_line)
    count = min(r.cpu_count, key=lambda c: (c[1], c[2])) if r.cpu_count else None
    if count:
        found.put("run", "cpu_count", count[0], count[2])
    if r.cpu:
        found.put("run", "iowait_avg", round(sum(c.iowait for c in r.cpu) / len(r.cpu), 1), r.cpu[0].line)
        found.put("run", "cpu_samples", len(r.cpu), r.cpu[0].line)
    if r.job_cores:
        found.put("run", "cpu_cores_avg", round(sum(c for c, _ in r.job_cores) / len(r.job_cores), 2),
                  r.job_cores[0][1])
        found.put("run", "cpu_cores_scope", "job", r.job_cores[0][1])
    else:
        machine = min((c for c in r.cpu_count if c[1] > 0), key=lambda c: (c[1], c[2]), default=count)
        over = [(c.busy / 100.0 * (c.cpus or machine[0]), c.line) for c in r.cpu if c.cpus or machine]
        if over:
            found.put("run", "cpu_cores_avg", round(sum(v for v, _ in over) / len(over), 2), over[0][1])
            found.put("run", "cpu_cores_scope", "system", over[0][1])
    if r.read_mb_s:
        found.put("run", "read_mb_s", round(sum(v for v, _ in r.read_mb_s) / len(r.read_mb_s), 2), r.read_mb_s[0][1])
    facts = found.facts["run"]
    if util is not None and "iowait_avg" in facts:
        found.put("run", "io_stall", util < IO_STALL_GPU and facts["iowait_avg"] > IO_STALL_IOWAIT, r.cpu[0].line)
    return found
