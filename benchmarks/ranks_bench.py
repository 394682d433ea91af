"""Many ranks: a folder of many per-rank logs against grep over the same files, and a merged
`srun --label` log against the same lines as one plain log, each measured in the same run.

    python benchmarks/ranks_bench.py --files 1000     # 1,000 rank logs of ~24 KB against grep
    python benchmarks/ranks_bench.py                  # merged vs plain vs folder: 8 ranks x 25 MB
    python benchmarks/ranks_bench.py --ranks 64 --mb-per-rank 2

Rank logs are built from the real lines of tests/fixtures/ranks (one rank's OOM, the others' NCCL
timeouts) after filler training lines. `--files`: `diagnose --no-probe --format json --log DIR`
against `LC_ALL=C grep -E -c -f` over the same files with the patterns the rules export
(`troubleshoot rules patterns`), with the logs dropped from the page cache (cold) and read into
it (warm) before each command, and troubleshoot's first run with an empty cache folder (its
rule set and pattern database built in that run); medians of `--runs` rounds; the failing rank
must be named. Otherwise: wall time of
`diagnose --no-probe --format json` (child process) for the merged log, the same lines without
labels, and one file per rank.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
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
    doc = json.loads(p.stdout)
    return seconds, doc.get("summary") or (doc["diagnoses"][0]["rule"] if doc["diagnoses"] else "-")


def build_folder(folder: Path, files: int, kb: float, seed: int = 7) -> int:
    """`files` rank logs of about `kb` KB each: training lines (scan_bench's), each rank's NCCL
    INFO lines, then the last rank's OOM (earlier in time) and every other rank's watchdog
    timeout. Returns the failing rank."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from scan_bench import _noise_lines

    rnd = random.Random(seed)
    pool = _noise_lines(rnd, 4000)
    timeout = (RANKS / "job.gpu-01.rank0.log").read_text().splitlines()[0].split("]:", 1)[1]
    oom = (RANKS / "job.gpu-02.rank3.log").read_text()
    failing = files - 1
    folder.mkdir(parents=True, exist_ok=True)
    target = int(kb * 1024)
    for r in range(files):
        node = f"node{r // 8:03d}"
        lines = [f"{node}:{4000 + r}:{4100 + r} [{r % 8}] NCCL INFO Channel 00/32 : {r} {(r + 1) % files} via P2P/IPC/read"]
        size = len(lines[0])
        while size < target:
            line = rnd.choice(pool)
            lines.append(line)
            size += len(line) + 1
        lines += oom.splitlines() if r == failing else [f"[rank{r}]:{timeout.replace('[Rank 0]', f'[Rank {r}]')}"]
        (folder / f"job.{node}.rank{r}.log").write_text("\n".join(lines) + "\n")
    return failing


def _run(cmd: list[str], env: dict, out: Path | None = None) -> float:
    start = time.perf_counter()
    with open(out or os.devnull, "wb") as f:
        subprocess.run(cmd, stdout=f, stderr=subprocess.DEVNULL, env=env, check=False)
    return time.perf_counter() - start


def _page_cache(logs: list[str], keep: bool) -> None:
    """Every log read into the page cache (keep), or dropped from it (posix_fadvise DONTNEED:
    clean pages of a file go, without privileges), for every command alike."""
    for p in logs:
        if keep:
            Path(p).read_bytes()
            continue
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def folder_vs_grep(files: int, kb: float, runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        folder = root / "ranks"
        failing = build_folder(folder, files, kb)
        logs = sorted(str(p) for p in folder.iterdir())
        size = sum(os.path.getsize(p) for p in logs) / 1e6
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        patterns = root / "patterns.txt"
        with open(patterns, "wb") as f:
            subprocess.run([sys.executable, "-m", "troubleshoot", "rules", "patterns"], stdout=f, check=True, env=env)
        grep = ["grep", "-E", "-c", "-f", str(patterns), *logs]
        diagnose = [sys.executable, "-m", "troubleshoot", "diagnose", "--no-probe", "--format", "json", "--log", str(folder)]
        genv = {**env, "LC_ALL": "C"}
        rows: dict[str, list[float]] = {k: [] for k in ("grep cold", "grep warm", "first", "cold", "warm")}
        said = ""
        tenv = {**env, "XDG_CACHE_HOME": str(root / "cache")}
        for _ in range(3):  # the rule set is kept from its second build on (its files' YAML cached by the first)
            _run(diagnose, tenv)
        for k in range(runs):
            _page_cache(logs, keep=True)
            rows["first"].append(_run(diagnose, {**env, "XDG_CACHE_HOME": str(root / f"first{k}")}))
            _page_cache(logs, keep=False)
            rows["grep cold"].append(_run(grep, genv, root / "grep.out"))  # to a file: grep -c reads it all
            _page_cache(logs, keep=False)
            rows["cold"].append(_run(diagnose, tenv))
            _page_cache(logs, keep=True)
            rows["grep warm"].append(_run(grep, genv, root / "grep.out"))
            rows["warm"].append(_run(diagnose, tenv, root / "out.json"))
            said = json.loads((root / "out.json").read_text()).get("summary") or ""
        med = {k: statistics.median(v) for k, v in rows.items()}
        print(f"{files} rank logs, {size:.1f} MB; medians of {runs} rounds (wall seconds)")
        print(f"{'':<44} {'s':>7}  {'x grep':>7}  rounds")
        lines = (("LC_ALL=C grep -E -c -f, logs not in page cache", "grep cold", "grep cold"),
                 ("LC_ALL=C grep -E -c -f, logs in page cache", "grep warm", "grep warm"),
                 ("troubleshoot, logs not in page cache", "cold", "grep cold"),
                 ("troubleshoot, logs in page cache", "warm", "grep warm"),
                 ("troubleshoot, first run (empty own cache)", "first", "grep warm"))
        for label, key, ref in lines:
            print(f"{label:<44} {med[key]:7.3f}  {med[key] / med[ref]:6.2f}x  {', '.join(f'{x:.3f}' for x in rows[key])}")
        named = f"rank {failing} " in said
        print(f"failing rank {failing} named: {'yes' if named else 'NO'} ({said})")
        if not named:
            sys.exit(1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--mb-per-rank", type=float, default=25)
    ap.add_argument("--files", type=int, help="a folder of this many rank logs against grep")
    ap.add_argument("--kb-per-rank", type=float, default=24)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    if args.files:
        folder_vs_grep(args.files, args.kb_per_rank, args.runs)
        return
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
