"""Real PyTorch jobs (CPU build) that fail for real; their own output is diagnosed.

Running a job imports torch and trains for seconds: the live runs are in the slow group. The
default suite diagnoses what the NaN job printed when it was recorded
(tests/fixtures/recorded/nan-loss-anomaly.log, SOURCE.md there), and tests/test_run.py runs the
CUDA-call job live through `troubleshoot run`."""

import subprocess
import sys

import pytest

from conftest import REPO, run_cli, torch_build
from troubleshoot import pipeline

TORCH = torch_build()
needs_torch = pytest.mark.skipif(TORCH is None, reason="needs torch")


def run_job(script: str) -> bytes:
    p = subprocess.run([sys.executable, str(REPO / "examples" / script)], capture_output=True, timeout=120)
    assert p.returncode != 0, "the job was supposed to fail"
    return p.stdout + p.stderr


def top_symptom(log: bytes) -> str:
    import json

    p = run_cli("diagnose", "--format", "json", "--no-probe", "--log", "-", input=log)
    ds = json.loads(p.stdout)["diagnoses"]
    return ds[0]["symptom"] if ds else "-"


@pytest.mark.slow
@needs_torch
@pytest.mark.skipif(bool(TORCH and TORCH["cuda"]), reason="needs a CPU-only build of torch")
def test_cuda_call_on_cpu_build():
    log = run_job("cuda_on_cpu_build.py")
    assert b"Torch not compiled with CUDA enabled" in log
    assert top_symptom(log) == "framework-cuda-unavailable"


@pytest.mark.slow
@needs_torch
def test_nan_loss_from_a_too_large_learning_rate():
    log = run_job("nan_loss_anomaly.py")
    assert b"returned nan values" in log
    assert top_symptom(log) == "nan-loss"


def test_the_recorded_output_of_the_nan_loss_job_is_diagnosed_as_nan_loss():
    log = (REPO / "tests" / "fixtures" / "recorded" / "nan-loss-anomaly.log").read_text()
    assert "returned nan values" in log and "Traceback (most recent call last)" in log
    ds = pipeline.run(None, log_text=log).diagnoses
    assert ds and ds[0].symptom == "nan-loss", [d.symptom for d in ds]
