"""Record real `troubleshoot run --format json` reports of the three input pipelines in
tests/tools/input_pipeline_jobs.py, for the `run-gpu-underused-*` rules' match examples.

    .venv/bin/python tests/tools/record_run_examples.py OUTDIR [workers main disk] [--seconds S]

The job, the wrapper, the Watcher and its /proc CPU, iowait and read samples are real, on this
machine. The GPU is not: this machine has none. `ReplayedGPU` answers the NVML calls the Watcher
makes from a recorded real `nvidia-smi -q` (tests/fixtures/machines/healthy-multi-gpu, an A100
machine; SOURCE.md there) with two changes, the smallest that let the Watcher count the GPU:
GPU 0 lists the job's pid as its compute process (the Watcher only counts GPUs that run the
job), and its utilisation follows a recorded real series, one value per sample, from the start
again when the job outlasts it: the `nvidia-smi --query-gpu ... -l 1` CSV of an LLM job on Saga's
A100s (tests/fixtures/pasted/query-gpu-csv-low.txt; SOURCE.md there), 45.6 % on average.

The report is the CLI's own: this calls `troubleshoot run --format json` (troubleshoot.cli.main)
with the Watcher class it builds swapped for one that passes `nvml=ReplayedGPU(...)`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DUMP = REPO / "tests" / "fixtures" / "machines" / "healthy-multi-gpu" / "nvidia-smi-q.txt"
SERIES = REPO / "tests" / "fixtures" / "pasted" / "query-gpu-csv-low.txt"
JOBS = Path(__file__).resolve().with_name("input_pipeline_jobs.py")
ROW = re.compile(r"^\d{4}/\d\d/\d\d [\d:.]+, (\d+) %, (\d+) %$")


def recorded_series(path: Path = SERIES) -> list[tuple[int, int]]:
    """(utilization.gpu, utilization.memory) rows of the pasted --query-gpu CSV."""
    rows = [(int(m.group(1)), int(m.group(2))) for m in map(ROW.match, path.read_text().splitlines()) if m]
    if not rows:
        raise SystemExit(f"{path}: no utilisation rows")
    return rows


class ReplayedGPU:
    """ReplayNVML of DUMP, with GPU 0 running `pid` at the recorded utilisation series."""

    def __init__(self, pid: int, dump: Path = DUMP, series: list[tuple[int, int]] | None = None):
        from troubleshoot.paste.nvsmi_q import Proc, ReplayNVML, Util

        self._nvml, self._proc, self._util = ReplayNVML(dump), Proc, Util
        self.pid, self.series, self.calls = pid, series or recorded_series(), 0

    def __getattr__(self, name):  # every other call: the recorded dump as it is
        return getattr(self._nvml, name)

    def _job_gpu(self, handle) -> bool:
        return handle is self._nvml.dump["gpus"][0]

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        # The dump lists no process (`Processes : None`), so no memory figure either (NVML: None).
        return [self._proc(self.pid, None)] if self._job_gpu(handle) else []

    def nvmlDeviceGetUtilizationRates(self, handle):
        if not self._job_gpu(handle):
            return self._nvml.nvmlDeviceGetUtilizationRates(handle)
        gpu, mem = self.series[self.calls % len(self.series)]
        self.calls += 1
        return self._util(gpu, mem)


def record(mode: str, out: Path, seconds: float, data: Path | None = None) -> Path:
    """Run one job under `troubleshoot run --format json`; returns the report's path."""
    from troubleshoot import cli
    from troubleshoot.run import watch

    made = []

    class ReplayWatcher(watch.Watcher):
        def __init__(self, pid, interval=1.0, nvml=None, on_sample=None):
            made.append(pid)
            super().__init__(pid, interval, nvml=ReplayedGPU(pid), on_sample=on_sample)

    report, log = out / f"{mode}.json", out / f"{mode}.log"
    job = [sys.executable, str(JOBS), mode, f"{seconds:g}"] + ([str(data)] if mode == "disk" else [])
    real = watch.Watcher
    watch.Watcher = ReplayWatcher
    try:
        rc = cli.main(["run", "--format", "json", "--report", str(report), "--log-to", str(log), "--quiet", "--", *job])
    finally:
        watch.Watcher = real
    if rc != 0 or not made:
        raise SystemExit(f"{mode}: exit {rc}, watched pids {made} (the CLI no longer builds watch.Watcher?)")
    return report


def pasted(report: Path) -> str:
    """The report as a rule example: the CLI's JSON, less its `diagnoses` (the answer, not the
    question: the example is what a user pastes when asking)."""
    doc = json.loads(report.read_text())
    doc.pop("diagnoses", None)
    return json.dumps(doc, indent=2) + "\n"


def data_file(out: Path, mib: int = 512) -> Path:
    """A file on the real disk for O_DIRECT reads (random bytes; the page cache is bypassed)."""
    path = out / "direct-read.bin"
    if not path.exists() or path.stat().st_size < mib << 20:
        with open(path, "wb") as f:
            f.writelines(os.urandom(1 << 20) for _ in range(mib))
            f.flush()
            os.fsync(f.fileno())
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("modes", nargs="*", default=["workers", "main", "disk"])
    ap.add_argument("--seconds", type=float, default=12.0)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    data = data_file(args.out) if "disk" in args.modes else None
    for mode in args.modes:
        print(record(mode, args.out, args.seconds, data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
