"""`fleet diagnose` at many nodes: wall time, peak RSS and cost per node, measured in the same run
for each fleet size, with the per-node cost of every size relative to the first.

    python benchmarks/fleet_bench.py                              # 1000, 2000, 5000, 10000 nodes
    python benchmarks/fleet_bench.py --nodes 1000,10000
    python benchmarks/fleet_bench.py --nodes 1000,10000 --jobs 1  # one process reads every snapshot
    python benchmarks/fleet_bench.py --runs 3                     # medians of three runs per size
    python benchmarks/fleet_bench.py --nodes 200 --keep DIR       # keep the generated folders

Each node's snapshot is the fixture snapshot tests/fixtures/snapshots/base.json (a healthy A100
server, values from the recorded `nvidia-smi -q` of tests/fixtures/machines/healthy-multi-gpu)
with its own host name and GPU UUID, written as `probe --save` writes it. Three nodes are odd:
one runs the driver of tests/fixtures/machines/pcie-degraded (550.54.14, CUDA 12.4), one has a
GPU with uncorrectable ECC errors and the Xid 79 of tests/fixtures/machines/xid-79, one has a
lower open-files limit. `troubleshoot fleet diagnose DIR --format json` runs as a child process
(this interpreter, `-m troubleshoot`): its wall time, its CPU time (user + system, its forked
readers' included), the peak RSS of its largest process (os.wait4) and the peak sum of PSS of
all its processes (sampled from /proc). The run fails unless exactly the three odd nodes have
findings and every node is in the report.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scan_bench import _pss_kib, _tree  # noqa: E402  (the processes of a command, and their PSS)

REPO = Path(__file__).resolve().parents[1]
BASE = REPO / "tests" / "fixtures" / "snapshots" / "base.json"
XID79_LINE = (REPO / "tests" / "fixtures" / "machines" / "xid-79" / "dmesg.txt").read_text().splitlines()[1]


@dataclass
class Measured:
    nodes: int
    seconds: float
    cpu_seconds: float  # user + system of the command and its forked readers
    peak_rss_mb: float  # of its largest process
    peak_pss_mb: float  # all its processes together (0 without /proc)
    odd_found: bool
    reported: int


def odd_nodes(n: int) -> dict[str, str]:
    """The three odd nodes of an n-node fleet, spread through it: {name: what is odd}."""
    return {name(n // 4): "driver", name(n // 2): "ecc+xid", name(3 * n // 4): "nofile"}


def name(i: int) -> str:
    return f"gpu-{i:05d}"


def oddity(snap: dict, what: str) -> None:
    if what == "driver":
        snap["nvml"].update(driver_version="550.54.14", cuda_driver_version="12.4")
        snap["kernel"]["nvidia_module_version"] = "550.54.14"
    elif what == "ecc+xid":
        snap["nvml"]["gpus"][0]["ecc_uncorrected_volatile"] = 12
        snap["kernel"]["xid_events"] = [{"code": 79, "pci": "0000:03:00", "pid": None, "process": None,
                                         "message": "GPU has fallen off the bus.",
                                         "line": XID79_LINE.split("kernel: ", 1)[1]}]
    elif what == "nofile":
        snap["io"]["nofile_soft"] = 1024


def build(folder: Path, n: int) -> None:
    base = json.loads(BASE.read_text())
    odd = odd_nodes(n)
    folder.mkdir(parents=True)
    for i in range(n):
        snap = copy.deepcopy(base)
        snap["host"]["hostname"] = name(i)
        snap["nvml"]["gpus"][0]["uuid"] = f"GPU-{i:08x}-1414-7c2c-004a-f86a898946ac"
        if name(i) in odd:
            oddity(snap, odd[name(i)])
        (folder / f"{name(i)}.json").write_text(json.dumps(snap, indent=2) + "\n")


def run(folder: Path, n: int, jobs: int | None) -> Measured:
    """One `fleet diagnose` of the folder, its report checked against the odd nodes."""
    out_path = folder.parent / f"report-{n}.json"
    cmd = [sys.executable, "-m", "troubleshoot", "fleet", "diagnose", str(folder), "--format", "json"]
    cmd += ["--jobs", str(jobs)] if jobs else []
    with open(out_path, "wb") as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=folder.parent)
        status, usage, pss = _wait(proc.pid)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            raise SystemExit(f"fleet diagnose exited {proc.returncode}: {err.read().decode(errors='replace')[-2000:]}")
    doc = json.loads(out_path.read_bytes())
    found = {f["node"] for f in doc["findings"]}
    return Measured(n, seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, pss / 1024,
                    found == set(odd_nodes(n)), len(doc["nodes"]))


def combined(runs: list[Measured]) -> Measured:
    """Several runs of one size as one row: median wall and CPU time, the largest peaks."""
    return Measured(runs[0].nodes, statistics.median(r.seconds for r in runs),
                    statistics.median(r.cpu_seconds for r in runs), max(r.peak_rss_mb for r in runs),
                    max(r.peak_pss_mb for r in runs), all(r.odd_found for r in runs), min(r.reported for r in runs))


def _wait(pid: int) -> tuple[int, resource.struct_rusage, int]:
    """The child's exit status and resource use once it has ended, and the largest sum of PSS
    (KiB) over it and the processes it forked, sampled every 20 ms while it ran."""
    peak = 0
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            return status, usage, peak
        peak = max(peak, sum(_pss_kib(p) for p in _tree(pid)))
        time.sleep(0.02)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", default="1000,2000,5000,10000", help="fleet sizes, comma-separated")
    ap.add_argument("--keep", metavar="DIR", help="generate under DIR and keep it (default: a temporary folder)")
    ap.add_argument("--jobs", type=int, help="pass --jobs N to fleet diagnose (default: its own, one per CPU)")
    ap.add_argument("--runs", type=int, default=1, help="runs per fleet size: the medians of wall and CPU time, the "
                                                        "largest peaks (default 1)")
    args = ap.parse_args()
    sizes = [int(x) for x in args.nodes.split(",") if x.strip()]
    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as tmp:
        root = Path(args.keep or tmp)
        rows = []
        for n in sizes:
            folder = root / f"fleet-{n}"
            build(folder, n)
            rows.append(combined([run(folder, n, args.jobs) for _ in range(max(1, args.runs))]))
        report(rows)
    if not all(r.odd_found and r.reported == r.nodes for r in rows):
        raise SystemExit("the report did not name exactly the three odd nodes, or left nodes out")


def report(rows: list[Measured]) -> None:
    """The table; each row's cost per node also as a multiple of the first row's (wall and CPU)."""
    wall0, cpu0 = rows[0].seconds / rows[0].nodes, rows[0].cpu_seconds / rows[0].nodes
    print(f"{'nodes':>6}  {'wall s':>7}  {'CPU s':>7}  {'peak RSS MB':>11}  {'peak PSS MB':>11}  {'wall ms/node':>12}  "
          f"{'CPU ms/node':>11}  {'x per node at ' + str(rows[0].nodes) + ' (wall, CPU)':>30}  odd nodes found")
    for r in rows:
        wall, cpu = r.seconds / r.nodes, r.cpu_seconds / r.nodes
        found = "3 of 3" if r.odd_found else "WRONG"
        if r.reported != r.nodes:
            found += f" ({r.reported} of {r.nodes} nodes reported)"
        print(f"{r.nodes:>6}  {r.seconds:>7.2f}  {r.cpu_seconds:>7.2f}  {r.peak_rss_mb:>11.0f}  {r.peak_pss_mb:>11.0f}  "
              f"{wall * 1000:>12.2f}  {cpu * 1000:>11.2f}  {f'{wall / wall0:.2f}x, {cpu / cpu0:.2f}x':>30}  {found}")
    print(f"peak RSS: the largest process; peak PSS: all of them, sampled every 20 ms. Load average after "
          f"the run: {', '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs (other processes "
          f"lengthen the wall time)")


if __name__ == "__main__":
    main()
