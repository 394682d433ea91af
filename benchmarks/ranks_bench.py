"""Many ranks vs one log: what splitting a merged `srun --label` log and diagnosing each rank
costs next to diagnosing the same lines as one plain log, measured in the same run.

    python benchmarks/ranks_bench.py                  # 8 ranks x 25 MB
    python benchmarks/ranks_bench.py --ranks 64 --mb-per-rank 2

The log is built from the real lines of tests/fixtures/ranks (one rank's OOM, the others' NCCL
timeouts) after filler training lines. Prints wall time of `diagnose --no-probe --format json`
(child process) for: the merged log, the same lines without labels, and one file per rank.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RANKS = REPO / "tests" / "fixtures" / "ranks" / "per-rank"


def build(folder: Path, ranks: int, mb: float) -> tuple[Path, Path, Path]:
    timeout = (RANKS / "job.gpu-01.rank0.log").read_text().splitlines()[0].split("]:", 1)[1]
    oom = (RANKS / "job.gpu-02.rank3.log").read_text()
    per_rank = folder / "per-rank"
    per_rank.mkdir()
    filler_lines = int(mb * (1 << 20) / 70)
    merged, plain = open(folder / "merged.out", "w"), open(folder / "plain.log", "w")
    files = [open(per_rank / f"job.node{r // 8}.rank{r}.log", "w") for r in range(ranks)]
    for i in range(filler_lines):
        for r in range(ranks):
            line = f"2024-06-26 05:{(i // 60) % 60:02d}:{i % 60:02d},000 step {i} loss {1 / (i + 1):.5f} lr 3e-4\n"
            merged.write(f"{r}: {line}")
            plain.write(line)
            files[r].write(line)
    for r in range(ranks):
        tail = oom if r == ranks - 1 else f"[rank{r}]:{timeout}\n"
        for line in tail.splitlines(True):
            merged.write(f"{r}: {line}")
            plain.write(line)
            files[r].write(line)
    for f in (merged, plain, *files):
        f.close()
    return folder / "merged.out", folder / "plain.log", per_rank


def timed(log: Path) -> tuple[float, str]:
    start = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "troubleshoot", "diagnose", "--no-probe", "--format", "json", "--log",
                        str(log)], capture_output=True, text=True, cwd=REPO)
    seconds = time.perf_counter() - start
    import json

    doc = json.loads(p.stdout)
    return seconds, doc.get("summary") or (doc["diagnoses"][0]["rule"] if doc["diagnoses"] else "-")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--mb-per-rank", type=float, default=25)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        merged, plain, per_rank = build(Path(tmp), args.ranks, args.mb_per_rank)
        size = merged.stat().st_size / (1 << 20)
        base, _ = timed(plain)
        print(f"{args.ranks} ranks, {size:.0f} MB merged log")
        print(f"{'one plain log (reference)':<34} {base:7.2f} s  1.00x")
        for name, log in (("merged srun --label log", merged), ("one file per rank (folder)", per_rank)):
            seconds, said = timed(log)
            print(f"{name:<34} {seconds:7.2f} s  {seconds / base:.2f}x  {said}")


if __name__ == "__main__":
    main()
