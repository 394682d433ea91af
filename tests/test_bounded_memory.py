"""A large log is scanned in bounded memory by the real command (peak RSS of that child)."""

import sys

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import scan_bench  # noqa: E402


@pytest.mark.slow
def test_large_log_peak_rss_under_200_mb(tmp_path):
    log = tmp_path / "big.log"
    scan_bench.generate(log, 300)
    out = tmp_path / "out.json"
    with open(out, "wb") as f:
        _, peak_kib, res = scan_bench.timed([sys.executable, "-m", "troubleshoot", "diagnose", "--format", "json",
                                             "--no-probe", "--log", str(log)], stdout=f)
    assert res.returncode == 0, res.stderr
    text = out.read_text()
    assert '"symptom": "cuda-oom"' in text and '"symptom": "nccl-timeout"' in text
    assert peak_kib / 1024 < 200, f"peak RSS {peak_kib / 1024:.0f} MB"


@pytest.mark.slow
def test_a_log_where_every_line_matches_stays_bounded_across_forked_scanners(tmp_path):
    """Every line a hit, for a dozen rules: a forked scanner's report reaches its budget, the
    parent scans the rest of that range itself, and memory over all processes stays bounded;
    the diagnosis is the one-thread diagnosis."""
    import json
    import os
    import random

    rnd = random.Random(7)
    lines = [t.format(scale=2.0 ** rnd.randrange(4, 17), half=1.0, rank=rnd.randrange(8), s=i % 60, it=i,
                      alloc=6532.93 + i, ch=i % 32) for i, t in enumerate(scan_bench.DENSE_HITS * 5)]
    lines += scan_bench.ERROR_TAIL
    block = ("\n".join(rnd.choice(lines) for _ in range(20_000)) + "\n").encode()
    log = tmp_path / "every-line.log"
    with open(log, "wb") as f:
        for _ in range((120 << 20) // len(block)):
            f.write(block)
    cmd = [sys.executable, "-m", "troubleshoot", "diagnose", "--format", "json", "--no-probe", "--log", str(log)]
    peak = scan_bench.peak_pss(cmd)
    assert peak == 0 or peak / 1024 < 150, f"peak PSS {peak / 1024:.0f} MB"
    outs = []
    for threads in ("", "0"):
        out = tmp_path / f"out{threads}.json"
        env = dict(os.environ, TROUBLESHOOT_SCAN_THREADS=threads)
        with open(out, "wb") as f:
            res = scan_bench.subprocess.run(cmd, stdout=f, stderr=scan_bench.subprocess.PIPE, env=env)
        assert res.returncode == 0, res.stderr
        outs.append(json.loads(out.read_text())["diagnoses"])
    assert outs[0] == outs[1] and len(outs[0]) >= 5
