#!/usr/bin/env python3
"""Scan benchmark: troubleshoot against GNU grep over the same patterns, in one run.

    python benchmarks/scan_bench.py                 # 1 GiB log, 3 runs each
    python benchmarks/scan_bench.py --size-mb 100 --runs 5

Generates (once, cached under benchmarks/data/) a realistic training log: tqdm progress bars
with \\r, metric lines, warnings, NCCL INFO, Python tracebacks and a few real error signatures
near the end. Then prints, for the same file and the shipped rules' patterns:
  - `LC_ALL=C grep -E -c -f patterns` (output to a file: GNU grep stops at the first match when
    its output is /dev/null), its wall time and MB/s;
  - `troubleshoot diagnose --no-probe --format json` as a child process: wall time, MB/s, peak RSS;
  - the ratio troubleshoot/grep throughput, and whether both found the same lines;
  - cold start of `diagnose` on a 10 KB log next to `python -c pass`;
  - `troubleshoot probe` wall time;
  - `troubleshoot run` overhead on a job that prints 100k lines (watcher on), and the watcher's
    own CPU use while a job sleeps.
`--quick` skips the large-log scan (for the other figures alone).
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"

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


# Linux counts the RSS a process had at fork() into its child's ru_maxrss, so a big parent (a
# test runner that imported torch) would inflate the figure: a small launcher runs the command.
_LAUNCHER = (
    "import resource, subprocess, sys\n"
    "rc = subprocess.call(sys.argv[1:])\n"
    "sys.stderr.write('\\nMAXRSS_KIB=%d\\n' % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    "sys.exit(rc)\n"
)


def timed(cmd: list[str], stdout=subprocess.DEVNULL, env=None, rss: bool = True) -> tuple[float, int, subprocess.CompletedProcess]:
    """Wall seconds and the command's own peak RSS in KiB (0 with rss=False: no launcher, for
    start-up timings where the launcher's own start would blur the figure), for one run."""
    start = time.perf_counter()
    argv = [sys.executable, "-c", _LAUNCHER, *cmd] if rss else cmd
    proc = subprocess.run(argv, stdout=stdout, stderr=subprocess.PIPE, env=env)
    wall = time.perf_counter() - start
    if not rss:
        return wall, 0, proc
    err, _, tail = proc.stderr.rpartition(b"\nMAXRSS_KIB=")
    return wall, int(tail.strip() or 0), subprocess.CompletedProcess(cmd, proc.returncode, None, err)


def matched_lines_troubleshoot(log: Path) -> int:
    """Distinct lines on which any shipped log pattern matches, by troubleshoot's own scanner."""
    from troubleshoot.engine.ruleset import load_ruleset
    from troubleshoot.engine.scanner import ScanPattern, scan_stream

    rs = load_ruleset(use_config=False)
    pats = [ScanPattern("all", "log", p.regex) for r in rs.rules for p in r.log]
    with open(log, "rb") as f:
        res = scan_stream(f, pats)
    h = res.get("all", "log")
    return h.count if h else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--log", type=Path, help="use this log instead of generating one")
    ap.add_argument("--quick", action="store_true", help="skip the large-log scan")
    args = ap.parse_args()
    if args.quick:
        cold_start(Path(tempfile.mkdtemp()))
        other_figures()
        return 0

    DATA.mkdir(exist_ok=True)
    log = args.log or DATA / f"train-{args.size_mb}mb.log"
    if not log.exists():
        t = time.perf_counter()
        generate(log, args.size_mb)
        print(f"generated {log} in {time.perf_counter() - t:.1f}s")
    size = log.stat().st_size
    mb = size / 1e6

    tmp = Path(tempfile.mkdtemp())
    pats = tmp / "patterns.ere"
    p = subprocess.run([sys.executable, "-m", "troubleshoot", "rules", "patterns"], capture_output=True, check=True)
    pats.write_bytes(p.stdout)
    n_patterns = len(p.stdout.splitlines())
    env_c = dict(os.environ, LC_ALL="C")

    grep_times, ts_times, ts_rss = [], [], []
    grep_count = None
    for _ in range(args.runs):
        with open(tmp / "grep.out", "wb") as out:
            wall, _, res = timed(["grep", "-E", "-c", "-f", str(pats), str(log)], stdout=out, env=env_c)
        if res.returncode not in (0, 1):
            print(f"grep failed: {res.stderr.decode()[-300:]}")
            return 1
        grep_times.append(wall)
        grep_count = int((tmp / "grep.out").read_text().strip() or 0)
        with open(tmp / "ts.json", "wb") as out:
            wall, rss, res = timed([sys.executable, "-m", "troubleshoot", "diagnose", "--no-probe", "--format", "json",
                                    "--log", str(log)], stdout=out)
        if res.returncode != 0:
            print(f"troubleshoot failed: {res.stderr.decode()[-300:]}")
            return 1
        ts_times.append(wall)
        ts_rss.append(rss)

    g, t = statistics.median(grep_times), statistics.median(ts_times)
    ts_count = matched_lines_troubleshoot(log)
    from troubleshoot.engine import scanner

    print(f"log: {log} ({mb:.0f} MB), {n_patterns} patterns, median of {args.runs} runs")
    print(f"{'engine':<44} {'wall s':>8} {'MB/s':>8} {'peak RSS':>10} {'lines':>7}")
    print(f"{'GNU grep -E -c (LC_ALL=C)':<44} {g:>8.2f} {mb / g:>8.1f} {'-':>10} {grep_count:>7}")
    backend = "re2" if scanner.re2_available() else "re (literal prefilter)"
    print(f"{'troubleshoot diagnose [' + backend + ']':<44} {t:>8.2f} {mb / t:>8.1f} "
          f"{max(ts_rss) / 1024:>8.0f}MB {ts_count:>7}")
    print(f"ratio troubleshoot/grep throughput: {g / t:.3f}")
    print(f"same matching lines: {'yes' if ts_count == grep_count else 'NO'}")

    cold_start(tmp, log)
    other_figures()
    return 0


def cold_start(tmp: Path, log: Path | None = None) -> None:
    small = tmp / "small.log"
    head = log.open("rb").read(10 << 10).rsplit(b"\n", 1)[0] if log else \
        "\n".join(_noise_lines(random.Random(3), 120)).encode()[: 10 << 10]
    small.write_bytes(head + b"\n" + ERROR_TAIL[2].encode() + b"\n")
    cold, base = [], []
    for _ in range(7):
        base.append(timed([sys.executable, "-c", "pass"], rss=False)[0])
        cold.append(timed([sys.executable, "-m", "troubleshoot", "diagnose", "--no-probe", "--format", "json",
                           "--log", str(small)], rss=False)[0])
    b, c = statistics.median(base), statistics.median(cold)
    print(f"cold start, 10 KB log: diagnose {c * 1000:.0f} ms, python -c pass {b * 1000:.0f} ms, ratio {c / b:.1f}")


JOB_100K = "import sys\nw = sys.stdout.write\nfor i in range(100000):\n    w(f'step {i} loss {i % 97 / 97:.4f} lr 3e-4\\n')\n"


def other_figures(runs: int = 5) -> None:
    probe = [timed([sys.executable, "-m", "troubleshoot", "probe", "--format", "json"], rss=False)[0] for _ in range(3)]
    print(f"probe wall time: median {statistics.median(probe):.2f} s (of 3)")
    tmp = Path(tempfile.mkdtemp())
    job = tmp / "job.py"
    job.write_text(JOB_100K)
    direct, wrapped = [], []
    for _ in range(runs):
        direct.append(timed([sys.executable, str(job)], rss=False)[0])
        wrapped.append(timed([sys.executable, "-m", "troubleshoot", "run", "--no-probe", "--quiet", "--log-to",
                              str(tmp / "job.log"), "--", sys.executable, str(job)], rss=False)[0])
    d, w = statistics.median(direct), statistics.median(wrapped)
    print(f"run wrapper, job printing 100k lines: direct {d:.3f} s, wrapped {w:.3f} s "
          f"(+{w - d:.3f} s: troubleshoot's own start-up and final diagnosis)")
    # Overhead on a job's own wall time, start-up excluded: a job running ~20 s.
    long_job = tmp / "long.py"
    long_job.write_text("import time, sys\nt = time.time()\nfor i in range(200):\n"
                        "    s = sum(range(200000)); print(f'step {i}', flush=True); time.sleep(0.05)\n"
                        "sys.stderr.write(f'JOB_SECONDS={time.time() - t:.3f}\\n')\n")
    own = []
    for wrap in (False, True):
        argv = [sys.executable, str(long_job)]
        if wrap:
            argv = [sys.executable, "-m", "troubleshoot", "run", "--no-probe", "--quiet", "--log-to", str(tmp / "l2"),
                    "--", *argv]
        p = subprocess.run(argv, capture_output=True)
        own.append(float(p.stderr.split(b"JOB_SECONDS=")[1].split()[0]))
    print(f"a ~20 s job timed by itself: {own[0]:.2f} s direct, {own[1]:.2f} s under troubleshoot run "
          f"({100 * (own[1] - own[0]) / own[0]:+.1f}%)")
    usage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "troubleshoot", "run", "--no-probe", "--quiet", "--log-to", str(tmp / "l3"),
                    "--", "sleep", "20"], capture_output=True)
    wall = time.perf_counter() - t0
    usage1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (usage1.ru_utime - usage0.ru_utime) + (usage1.ru_stime - usage0.ru_stime)
    print(f"watcher + wrapper CPU while a job sleeps 20 s: {cpu:.2f} s of CPU over {wall:.1f} s "
          f"({100 * cpu / wall:.2f}% of a core, start-up and final diagnosis included)")


if __name__ == "__main__":
    sys.exit(main())
