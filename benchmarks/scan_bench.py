#!/usr/bin/env python3
"""Speed benchmark: troubleshoot against references measured in the same run.

    python benchmarks/scan_bench.py                    # the full table (5-10 minutes on 2 cores)
    python benchmarks/scan_bench.py --quick            # cold start, probe, run wrapper only
    python benchmarks/scan_bench.py --start-only       # start-up ratios only
    python benchmarks/scan_bench.py --scan-only        # scans and peak RSS only
    python benchmarks/scan_bench.py --size-mb 100 --rss-sizes 20 --engines hyperscan,re2

Generates once, under benchmarks/data/ (ignored by git), two realistic training logs of
--size-mb: a quiet one (tqdm bars with \\r, metric lines, NCCL INFO, warnings, ANSI colour,
tracebacks, six real errors near the end) and a hit-dense one (the same, plus a matching line
every hundred: apex "Gradient overflow", DeepSpeed "OVERFLOW!", Megatron memory reports and
NCCL "via SHM" channel lines, as mixed-precision multi-GPU runs print them). Then prints:

  - scan: `LC_ALL=C grep -E -c -f` over the shipped rules' exported patterns, and
    `troubleshoot diagnose --no-probe --format json` with each scan engine forced in turn
    ($TROUBLESHOOT_SCAN_ENGINE = hyperscan, re2, re); hyperscan also with its helpers as
    threads instead of forked processes ($TROUBLESHOOT_SCAN_FORK=0) and in one thread
    ($TROUBLESHOOT_SCAN_THREADS=0); CPU seconds (user+sys, every thread and process) and wall
    time, medians of --runs rounds (grep, then every engine, in each); throughput ratios against
    grep; matching lines found by each (the
    pure-Python `re` engine on --re-size-mb logs, with grep measured again on those);
  - peak RSS of `diagnose` at --rss-sizes (default 20, 200 and 1024 MB): of its largest process,
    and the peak sum of PSS over all its processes (the scan's forked ones included);
  - cold start of `diagnose --no-probe` on a 10 KB log next to `python -c pass`;
  - `troubleshoot probe` wall time (and whether torch is installed);
  - `troubleshoot run` on a job printing 1M short lines next to the job run directly, and the
    wrapper's CPU while a job sleeps.
GNU grep whose stdout is /dev/null stops at the first match, so its output goes to a file.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
ENGINES = ("hyperscan", "re2", "re")


ERROR_TAIL = [
    "[rank3]:[E1102 09:14:07.112 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) ran for 600060 "
    "milliseconds before timing out.",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB "
    "of which 1.12 GiB is free. Including non-PyTorch memory, this process has 77.97 GiB memory in use. Of the allocated "
    "memory 74.35 GiB is allocated by PyTorch, and 3.10 GiB is reserved by PyTorch but unallocated.",
    "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.",
    "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).",
    "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Killed.",
]


def _noise_lines(rnd: random.Random, n: int) -> list[str]:
    out = []
    for i in range(n):
        k = rnd.random()
        step = rnd.randrange(1_000_000)
        if k < 0.35:
            pct = rnd.randrange(100)
            bar = "".join(f"Epoch {step % 90}: {p:3d}%|{'#' * (p // 10):<10}| {p * 37}/3700 "
                          f"[01:{p % 60:02d}<02:10, {rnd.uniform(3, 9):.2f}it/s, loss={rnd.uniform(0, 3):.4f}]\r"
                          for p in range(pct, min(pct + 4, 100)))
            out.append(bar.rstrip("\r"))
        elif k < 0.65:
            out.append(f"[2024-11-02 09:{step % 60:02d}:{step % 59:02d},{step % 999:03d}] INFO trainer.py:{step % 900} "
                       f"step={step} loss={rnd.uniform(0, 3):.5f} lr={rnd.uniform(1e-5, 1e-3):.3e} "
                       f"grad_norm={rnd.uniform(0, 5):.3f} tokens/s={rnd.randrange(10_000, 90_000)}")
        elif k < 0.80:
            out.append(f"node{step % 16:02d}:{step}:{step + 7} [{step % 8}] NCCL INFO Channel {step % 32:02d}/32 : "
                       f"{step % 8} {(step + 1) % 8} {(step + 2) % 8} via P2P/IPC/read")
        elif k < 0.90:
            out.append(f"/opt/conda/lib/python3.11/site-packages/torch/utils/data/dataloader.py:{step % 700}: "
                       f"UserWarning: This DataLoader will create {step % 64} worker processes in total.")
        elif k < 0.96:
            out.append(f"\x1b[32m[{step}]\x1b[0m eval accuracy={rnd.uniform(0, 1):.4f} f1={rnd.uniform(0, 1):.4f}")
        else:
            out.append(f'  File "/home/u/proj/model/layer{step % 40}.py", line {step % 400}, in forward')
    return out


def generate(path: Path, size_mb: int, seed: int = 1) -> None:
    rnd = random.Random(seed)
    target = size_mb << 20
    pool = "\n".join(_noise_lines(rnd, 40_000)) + "\n"
    block = pool.encode()
    tmp = path.with_suffix(".tmp")
    written = 0
    body = max(target - (64 << 10), 0)
    with open(tmp, "wb") as f:
        while written + len(block) <= body:
            f.write(block)
            written += len(block)
        piece = block[: body - written]
        f.write(piece[: piece.rfind(b"\n") + 1])
        tail = _noise_lines(rnd, 200)
        for i, err in enumerate(ERROR_TAIL):
            tail.insert(20 + i * 30, err)
        f.write(("\n".join(tail) + "\n").encode())
    tmp.replace(path)


DENSE_HITS = [
    # apex amp (NVIDIA/apex#318), DeepSpeed's loss scaler, Megatron-LM's report_memory, NCCL INFO
    "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to {scale}",
    "[2023-02-28 20:08:{s:02d},113] [INFO] [stage_1_and_2.py:1769:step] [deepspeed] OVERFLOW! Rank {rank} Skipping step. "
    "Attempted loss scale: {scale}, reducing to {half}",
    "[Rank {rank}] (after {it} iterations) memory (MB) | allocated: {alloc} | max allocated: 11253.28662109375 | "
    "reserved: 12266.0 | max reserved: 12266.0",
    "node0:13572:13572 [{rank}] NCCL INFO Channel {ch:02d} : {rank}[{rank}] -> 0[0] via SHM/direct/direct",
]


def generate_dense(path: Path, size_mb: int, seed: int = 5, every: int = 100) -> None:
    """The quiet log's noise with a matching line every `every` lines (thousands per 100 MB)."""
    rnd = random.Random(seed)
    lines = []
    for i, noise in enumerate(_noise_lines(rnd, 40_000)):
        lines.append(noise)
        if i % every == 0:
            scale = 2.0 ** rnd.randrange(4, 17)
            lines.append(rnd.choice(DENSE_HITS).format(scale=scale, half=scale / 2, rank=rnd.randrange(8),
                                                       s=i % 60, it=i, alloc=6532.93 + i % 97, ch=i % 32))
    block = ("\n".join(lines) + "\n").encode()
    target = size_mb << 20
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        written = 0
        while written + len(block) <= target:
            f.write(block)
            written += len(block)
        piece = block[: target - written]
        f.write(piece[: piece.rfind(b"\n") + 1])
    tmp.replace(path)


# Linux counts the RSS a process had at fork() into its child's ru_maxrss, so a big parent (a
# test runner that imported torch) would inflate the figure: a small launcher runs the command
# and reports the command's own peak RSS, CPU seconds and wall time.
_LAUNCHER = (
    "import resource, subprocess, sys, time\n"
    "t = time.perf_counter()\n"
    "rc = subprocess.call(sys.argv[1:])\n"
    "wall = time.perf_counter() - t\n"
    "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "sys.stderr.write('\\nMAXRSS_KIB=%d CPU_S=%.4f WALL_S=%.4f\\n' % (u.ru_maxrss, u.ru_utime + u.ru_stime, wall))\n"
    "sys.exit(rc)\n"
)


@dataclass
class Run:
    wall: float  # seconds
    cpu: float  # user + system seconds of the command and its children
    rss_kib: int  # the command's peak RSS
    proc: subprocess.CompletedProcess


def child_env(**extra: str) -> dict[str, str]:
    """The environment of measured commands: bytecode written and reused as after `pip install`
    (PYTHONDONTWRITEBYTECODE would make every start compile every module)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(extra)
    return env


def measure(cmd: list[str], stdout=subprocess.DEVNULL, env=None) -> Run:
    env = child_env() if env is None else env
    proc = subprocess.run([sys.executable, "-c", _LAUNCHER, *cmd], stdout=stdout, stderr=subprocess.PIPE, env=env)
    err, _, tail = proc.stderr.rpartition(b"\nMAXRSS_KIB=")
    fields = dict(f.split("=") for f in ("MAXRSS_KIB=" + tail.decode().strip()).split())
    return Run(float(fields.get("WALL_S", 0)), float(fields.get("CPU_S", 0)), int(fields.get("MAXRSS_KIB", 0)),
               subprocess.CompletedProcess(cmd, proc.returncode, None, err))


def timed(cmd: list[str], stdout=subprocess.DEVNULL, env=None, rss: bool = True) -> tuple[float, int, subprocess.CompletedProcess]:
    """Wall seconds and the command's own peak RSS in KiB (0 with rss=False: no launcher, for
    start-up timings where the launcher's own start would blur the figure), for one run."""
    if rss:
        r = measure(cmd, stdout, env)
        return r.wall, r.rss_kib, r.proc
    start = time.perf_counter()
    proc = subprocess.run(cmd, stdout=stdout, stderr=subprocess.PIPE, env=env)
    return time.perf_counter() - start, 0, proc


def cached(path: Path) -> None:
    """Read `path` once, so that the timed run after this finds all of it in the page cache. A
    VM may page out file pages nobody touched for a minute (this one runs DAMON's pageout on
    unmapped page cache: an idle 200 MB log was half gone 90 s after a scan), and whichever
    command ran first after that paid for reading from disk."""
    buf = bytearray(1 << 20)
    with open(path, "rb", buffering=0) as f:
        while f.readinto(buf):
            pass


def cpu_of(cmd: list[str], env=None) -> tuple[float, float]:
    """(wall, CPU seconds) of one run without a launcher (for start-up timings)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env or child_env())
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def matched_lines(log: Path, engine: str | None = None) -> int:
    """Distinct lines on which any shipped log pattern matches, by troubleshoot's own scanner
    (the hit cap lifted: every line counts, as in grep -c)."""
    from troubleshoot.engine.ruleset import load_ruleset
    from troubleshoot.scan import ScanPattern, scan_stream, tally

    rs = load_ruleset(use_config=False)
    pats = [ScanPattern("all", "log", p.regex) for r in rs.rules for p in r.log]
    cap, tally.HIT_CAP = tally.HIT_CAP, 1 << 62
    try:
        with open(log, "rb") as f:
            res = scan_stream(f, pats, engine)
    finally:
        tally.HIT_CAP = cap
    h = res.get("all", "log")
    return h.count if h else 0


# Kept for callers of the earlier name.
matched_lines_troubleshoot = matched_lines


def data_log(kind: str, size_mb: int) -> Path:
    DATA.mkdir(exist_ok=True)
    path = DATA / (f"train-{size_mb}mb.log" if kind == "quiet" else f"dense-{size_mb}mb.log")
    if not path.exists():
        t = time.perf_counter()
        (generate if kind == "quiet" else generate_dense)(path, size_mb)
        print(f"(generated {path.name} in {time.perf_counter() - t:.1f} s)", file=sys.stderr)
    return path


def engines_available() -> dict[str, bool]:
    from troubleshoot.scan import hyperscan_available, re2_available

    return {"hyperscan": hyperscan_available(), "re2": re2_available(), "re": True}


def diagnose_cmd(log: Path) -> list[str]:
    return [sys.executable, "-m", "troubleshoot", "diagnose", "--no-probe", "--format", "json", "--log", str(log)]


def _engine_env(engine: str, threads: str) -> dict[str, str]:
    env = child_env(TROUBLESHOOT_SCAN_ENGINE=engine)
    if threads == "threads":
        env["TROUBLESHOOT_SCAN_FORK"] = "0"  # helpers are threads, never forked processes
    elif threads:
        env["TROUBLESHOOT_SCAN_THREADS"] = threads
    return env


def scan_table(logs: dict[str, Path], engines: list[str], runs: int, tmp: Path) -> list[str]:
    """grep and each engine over each log, `runs` rounds after an untimed first run of each.
    A round runs grep and then every engine back to back (the engines' order turns from round
    to round), so that a machine whose speed drifts over a minute (a shared VM: a third between
    identical runs) slows grep and troubleshoot alike instead of whichever ran in the slow
    minute; each figure is still the median of its own runs."""
    pats = tmp / "patterns.ere"
    p = subprocess.run([sys.executable, "-m", "troubleshoot", "rules", "patterns"], capture_output=True, check=True)
    pats.write_bytes(p.stdout)
    n_patterns = len(p.stdout.splitlines())
    available = engines_available()
    counted: dict[tuple[Path, str], int] = {}
    rows = ["| log | engine | CPU s | wall s | MB/s (CPU) | × grep (CPU) | × grep (wall) | peak RSS | lines |",
            "|---|---|---|---|---|---|---|---|---|"]
    for kind, log in logs.items():
        grep_cmd = ["grep", "-E", "-c", "-f", str(pats), str(log)]
        mb = log.stat().st_size / 1e6
        todo = [e for e in engines if available.get(e.partition(":")[0])]
        envs = {e: _engine_env(e.partition(":")[0], e.partition(":")[2]) for e in todo}
        timed_runs: dict[str, list[Run]] = {"grep": [], **{e: [] for e in todo}}
        for e in todo:
            measure(diagnose_cmd(log), env=envs[e])  # first run: compiles and caches what the engine caches
        for turn in range(runs):
            cached(log)
            with open(tmp / "grep.out", "wb") as out:
                g = measure(grep_cmd, stdout=out, env=child_env(LC_ALL="C"))
            if g.proc.returncode not in (0, 1):
                raise SystemExit(f"grep failed: {g.proc.stderr.decode()[-300:]}")
            timed_runs["grep"].append(g)
            order = todo[turn % len(todo):] + todo[: turn % len(todo)] if todo else []
            for e in order:
                if e.partition(":")[0] == "re" and timed_runs[e]:
                    continue  # the pure-Python engine: one run
                cached(log)
                with open(tmp / "ts.json", "wb") as out:
                    t = measure(diagnose_cmd(log), stdout=out, env=envs[e])
                if t.proc.returncode != 0:
                    raise SystemExit(f"troubleshoot failed: {t.proc.stderr.decode()[-300:]}")
                timed_runs[e].append(t)
        g_cpu = statistics.median(r.cpu for r in timed_runs["grep"])
        g_wall = statistics.median(r.wall for r in timed_runs["grep"])
        grep_lines = int((tmp / "grep.out").read_text().strip() or 0)
        rows.append(f"| {kind} {mb:.0f} MB | GNU grep -E -c (LC_ALL=C) | {g_cpu:.2f} | {g_wall:.2f} | {mb / g_cpu:.0f} "
                    f"| 1.00 | 1.00 | - | {grep_lines} |")
        for spec in engines:
            engine, _, threads = spec.partition(":")
            if not available.get(engine):
                rows.append(f"| {kind} {mb:.0f} MB | troubleshoot [{engine}] | not installed | | | | | | |")
                continue
            ts = timed_runs[spec]
            cpu = statistics.median(r.cpu for r in ts)
            wall = statistics.median(r.wall for r in ts)
            if (log, engine) not in counted:  # the same lines whatever the threads
                counted[log, engine] = matched_lines(log, engine)
            lines = counted[log, engine]
            same = "" if lines == grep_lines else " (≠ grep)"
            note = "" if engine != "re" or runs == 1 else " ¹"
            if threads:
                note += {"0": " (one thread)", "threads": " (threads, no fork)"}.get(threads, f" ({threads} helpers)")
            rows.append(f"| {kind} {mb:.0f} MB | troubleshoot diagnose [{engine}]{note} | {cpu:.2f} | {wall:.2f} "
                        f"| {mb / cpu:.0f} | {g_cpu / cpu:.2f} | {g_wall / wall:.2f} "
                        f"| {max(r.rss_kib for r in ts) / 1024:.0f} MB | {lines}{same} |")
        rows.append(_rounds(kind, timed_runs))
    rows.append("")
    rows.append(f"{n_patterns} patterns (`troubleshoot rules patterns`); medians of {runs} rounds after a first "
                "untimed run, each round grep then every engine"
                + ("; ¹ the pure-Python engine: one run" if "re" in engines and runs > 1 else "") + ".")
    return rows


def _rounds(kind: str, timed_runs: dict[str, list[Run]]) -> str:
    """Each engine's CPU ratio to grep round by round (its run against grep's run of the same
    round), as a table row: how far the machine moved the medians above."""
    grep = timed_runs["grep"]
    out = []
    for engine, ts in timed_runs.items():
        if engine != "grep" and len(ts) > 1:
            out.append(f"{engine} " + " / ".join(f"{g.cpu / t.cpu:.2f}" for g, t in zip(grep, ts)))
    return f"| {kind}: × grep (CPU) round by round | {'; '.join(out)} | | | | | | | |"


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def _pss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def peak_pss(cmd: list[str]) -> int:
    """The largest sum of PSS (each shared page counted once, split between the processes that
    share it) over the command and every process it started, sampled every 2 ms: what the
    machine gives the command while the scan's forked processes run beside it. 0 without /proc."""
    if not os.path.exists("/proc/self/smaps_rollup"):
        return 0
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=child_env())
    peak = 0
    while proc.poll() is None:
        peak = max(peak, sum(_pss_kib(p) for p in _tree(proc.pid)))
        time.sleep(0.002)
    return peak


def rss_table(sizes: list[int]) -> list[str]:
    rows = ["| log | peak RSS of diagnose --no-probe (largest process) | peak PSS, all its processes | CPU s |",
            "|---|---|---|---|"]
    for size in sizes:
        log = data_log("quiet", size)
        measure(diagnose_cmd(log))
        cached(log)
        r = measure(diagnose_cmd(log))
        pss = max(peak_pss(diagnose_cmd(log)) for _ in range(2))
        rows.append(f"| {size} MB | {r.rss_kib / 1024:.0f} MB | {pss / 1024:.0f} MB | {r.cpu:.2f} |")
        if size >= 1024:
            log.unlink()  # a GiB of disk is not left behind
    return rows


def cold_start(tmp: Path, runs: int = 11) -> str:
    """diagnose --no-probe on a 10 KB log and `--version`, each against `python -c pass`, runs
    alternated (each after one untimed run that warms the rule cache and the page cache). Also
    what a run on a small log costs without the pattern database (RE2 builds its programs in
    the run), as the first run in a cache folder does."""
    small = tmp / "small.log"
    text = "\n".join(_noise_lines(random.Random(3), 200)).encode()[: 10 << 10]
    small.write_bytes(text[: text.rfind(b"\n") + 1] + ERROR_TAIL[2].encode() + b"\n")
    version = [sys.executable, "-m", "troubleshoot", "--version"]
    cmd = diagnose_cmd(small)
    # A cache folder that never gets the database: the scan builds RE2's programs, as a first run
    # does ($TROUBLESHOOT_SCAN_FORK=0 also keeps the database from being compiled after the run).
    no_db = child_env(XDG_CACHE_HOME=str(tmp / "cache-without-database"), TROUBLESHOOT_SCAN_FORK="0")
    for c, env in ((cmd, None), (version, None), *[(cmd, no_db)] * 3):
        cpu_of(c, env)  # warm the page cache and the rule cache (kept from a rule set's second build on)
    times: dict[str, list[tuple[float, float]]] = {"base": [], "diagnose": [], "version": [], "no_db": []}
    for _ in range(runs):
        times["base"].append(cpu_of([sys.executable, "-c", "pass"]))
        times["diagnose"].append(cpu_of(cmd))
        times["version"].append(cpu_of(version))
        times["no_db"].append(cpu_of(cmd, no_db))
    wall = {k: statistics.median(w for w, _ in v) for k, v in times.items()}
    cpu = {k: statistics.median(c for _, c in v) for k, v in times.items()}
    # The fastest run of each, too: a VM whose `python -c pass` takes 22 ms in one minute and
    # 33 ms the next moves the medians' ratio by a third; the fastest runs it moves least.
    fastest = {k: min(w for w, _ in v) for k, v in times.items()}

    def row(name: str, key: str) -> str:
        return (f"{name}: {wall[key] * 1000:.0f} ms wall / {cpu[key] * 1000:.0f} ms CPU; "
                f"{wall[key] / wall['base']:.2f}x wall, {cpu[key] / cpu['base']:.2f}x CPU; "
                f"fastest {fastest[key] * 1000:.0f} ms, {fastest[key] / fastest['base']:.2f}x")
    return "\n".join([
        f"start (medians of {runs}, alternated): python -c pass {wall['base'] * 1000:.0f} ms wall / "
        f"{cpu['base'] * 1000:.0f} ms CPU; fastest {fastest['base'] * 1000:.0f} ms",
        row("  diagnose --no-probe --format json, 10 KB log", "diagnose"),
        row("  --version", "version"),
        row("  the same diagnose without a pattern database (RE2 built in the run)", "no_db")])


def probe_time() -> str:
    import importlib.util

    torch = importlib.util.find_spec("torch") is not None
    cmd = [sys.executable, "-m", "troubleshoot", "probe", "--format", "json"]
    cpu_of(cmd)  # the first run on a machine fills the frameworks cache
    walls = [cpu_of(cmd)[0] for _ in range(3)]
    return (f"troubleshoot probe: {statistics.median(walls):.2f} s wall (median of 3; torch "
            f"{'installed' if torch else 'not installed'})")


CHATTY_JOB = "import sys\nw = sys.stdout.write\nfor i in range(1_000_000):\n    w(f'step {i} loss {i % 97 / 97:.4f}\\n')\n"


# A reader that does what the wrapper does with a pipe and nothing else: one read of what is
# there, a 5 ms pause after a short one. The job into it is what any pipe costs the job.
BARE_READER = ("import os, time\nbuf = bytearray(1 << 20)\n"
               "import fcntl\ntry:\n    fcntl.fcntl(0, 1031, 1 << 20)\nexcept OSError:\n    pass\n"
               "while True:\n    n = os.readv(0, [buf])\n    if not n:\n        break\n"
               "    if n < 1 << 19:\n        time.sleep(0.005)\n")


def wrapper_figures(tmp: Path, runs: int = 7) -> list[str]:
    """The job direct and under `troubleshoot run` with its defaults (watcher on; probes would
    run only if the job failed, and it does not), alternately, both writing to /dev/null."""
    job = tmp / "chatty.py"
    job.write_text(CHATTY_JOB)
    direct, wrapped, teed, piped = [], [], [], []
    env = child_env(PYTHONUNBUFFERED="1")  # a write per line, as on a terminal: the worst case
    load = os.getloadavg()[0]
    py, jq = shlex.quote(sys.executable), shlex.quote(str(job))
    tee = f"{py} {jq} | tee {shlex.quote(str(tmp / 'tee.log'))}"
    bare = f"{py} {jq} | {py} -c {shlex.quote(BARE_READER)}"
    mb = 0.0
    for i in range(runs):
        # A new log each run, as `run` without --log-to makes: rewriting one file would add
        # ext4's flush of a truncated file (auto_da_alloc, 5-15 ms at close) to every run.
        log = tmp / f"job-{i}.log"
        direct.append(measure([sys.executable, str(job)], env=env))
        wrapped.append(measure([sys.executable, "-m", "troubleshoot", "run", "--log-to", str(log), "--",
                                sys.executable, str(job)], env=env))
        teed.append(measure(["sh", "-c", tee], env=env))
        piped.append(measure(["sh", "-c", bare], env=env))
        mb = log.stat().st_size / 1e6
        log.unlink()
    d = statistics.median(r.wall for r in direct)
    w = statistics.median(r.wall for r in wrapped)
    t = statistics.median(r.wall for r in teed)
    b = statistics.median(r.wall for r in piped)
    dc = statistics.median(r.cpu for r in direct)
    wc = statistics.median(r.cpu for r in wrapped)
    out = [f"run wrapper, job printing 1M short lines unbuffered (output to /dev/null; `troubleshoot run --log-to "
           f"{tmp}/job-N.log -- JOB`): direct {d:.2f} s, under `troubleshoot run` {w:.2f} s ({w / d:.2f}x wall; "
           f"medians of {runs}, alternated; load average {load:.1f} before); CPU {dc:.2f} s direct, {wc:.2f} s "
           f"wrapped (job and wrapper: start-up, watcher, scan and diagnosis of the {mb:.0f} MB log included); "
           f"for reference, the job into a bare pipe (a reader that only reads, as the wrapper does): {b:.2f} s "
           f"({b / d:.2f}x), and keeping its log with `JOB | tee LOG`: {t:.2f} s ({t / d:.2f}x)"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "troubleshoot", "run", "--log-to", str(tmp / "l3"), "--", "sleep", "10"],
                   capture_output=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    out.append(f"wrapper and watcher while a job sleeps 10 s: {cpu:.2f} s CPU over {wall:.1f} s "
               f"({100 * cpu / wall:.1f}% of a core, start-up and final diagnosis included)")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=int, default=200, help="size of the quiet and dense logs scanned (MB)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--engines", default="hyperscan,hyperscan:threads,hyperscan:0,re2,re",
                    help="scan engines to compare, ENGINE, ENGINE:N (N helpers, $TROUBLESHOOT_SCAN_THREADS; "
                         "hyperscan:0 keeps the scan in one thread) or ENGINE:threads (helpers are threads, never "
                         "forked processes: $TROUBLESHOOT_SCAN_FORK=0); default: all three, hyperscan also with "
                         "threads and in one thread")
    ap.add_argument("--re-size-mb", type=int, default=10,
                    help="log size for the pure-Python `re` engine, which runs at a few MB/s (default 10)")
    ap.add_argument("--rss-sizes", default="20,200,1024", help="log sizes (MB) for peak RSS; empty: skip")
    ap.add_argument("--log", type=Path, help="also scan this log (as 'given')")
    ap.add_argument("--quick", action="store_true", help="skip the scans and RSS (start-up, probe, wrapper only)")
    ap.add_argument("--scan-only", action="store_true", help="the scans and RSS only (no start-up, probe, wrapper)")
    ap.add_argument("--start-only", action="store_true", help="the start-up ratios only")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ts-bench-"))
    print(f"troubleshoot benchmark, {time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPUs, Python "
          f"{sys.version.split()[0]}")
    if args.start_only:
        print(cold_start(tmp), flush=True)
        return 0
    if not args.quick:
        logs = {"quiet": data_log("quiet", args.size_mb), "dense": data_log("dense", args.size_mb)}
        if args.log:
            logs["given"] = args.log
        engines = [e for e in args.engines.split(",") if e]
        fast = [e for e in engines if e.partition(":")[0] != "re"]
        if fast:
            print("\n".join(["", f"Scan ({args.size_mb} MB logs):", ""] + scan_table(logs, fast, args.runs, tmp)),
                  flush=True)
        if "re" in engines:
            small = {"quiet": data_log("quiet", args.re_size_mb), "dense": data_log("dense", args.re_size_mb)}
            print("\n".join(["", f"Scan with the pure-Python engine ({args.re_size_mb} MB logs, same grep reference):", ""]
                             + scan_table(small, ["re"], args.runs, tmp)), flush=True)
        sizes = [int(s) for s in args.rss_sizes.split(",") if s]
        if sizes:
            print("\n".join(["", "Memory:", ""] + rss_table(sizes)), flush=True)
    if args.scan_only:
        return 0
    print()
    print(cold_start(tmp), flush=True)
    print(probe_time(), flush=True)
    print("\n".join(wrapper_figures(tmp)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
