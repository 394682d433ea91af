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
