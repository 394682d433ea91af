"""Real PyTorch jobs (CPU build) that fail for real; their own output is diagnosed."""

import subprocess
import sys

import pytest

from conftest import REPO, run_cli

torch = pytest.importorskip("torch")


def run_job(script: str) -> bytes:
    p = subprocess.run([sys.executable, str(REPO / "examples" / script)], capture_output=True, timeout=120)
    assert p.returncode != 0, "the job was supposed to fail"
    return p.stdout + p.stderr


def top_symptom(log: bytes) -> str:
    import json

    p = run_cli("diagnose", "--format", "json", "--no-probe", "--log", "-", input=log)
    ds = json.loads(p.stdout)["diagnoses"]
    return ds[0]["symptom"] if ds else "-"


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a CPU-only build of torch")
def test_cuda_call_on_cpu_build():
    log = run_job("cuda_on_cpu_build.py")
    assert b"Torch not compiled with CUDA enabled" in log
    assert top_symptom(log) == "framework-cuda-unavailable"


def test_nan_loss_from_a_too_large_learning_rate():
    log = run_job("nan_loss_anomaly.py")
    assert b"returned nan values" in log
    assert top_symptom(log) == "nan-loss"
