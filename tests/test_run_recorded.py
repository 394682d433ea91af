"""The recorder of the `run-gpu-underused-*` match examples (tests/tools/record_run_examples.py):
its replayed GPU, and one real job recorded end to end through `troubleshoot run --format json`.
The recordings themselves: tests/fixtures/recorded/run-*.json (SOURCE.md there)."""

import json
import os
import sys

import pytest
from conftest import REPO

from troubleshoot import paste

sys.path.insert(0, str(REPO / "tests" / "tools"))
import record_run_examples as rec

RECORDED = REPO / "tests" / "fixtures" / "recorded"


def test_the_replayed_gpu_runs_the_job_at_the_recorded_utilisation():
    series = rec.recorded_series()
    assert [u for u, _ in series] == [100, 88, 0, 35, 35, 36, 38, 33]  # the pasted CSV, in order
    gpu = rec.ReplayedGPU(4242)
    handles = [gpu.nvmlDeviceGetHandleByIndex(i) for i in range(gpu.nvmlDeviceGetCount())]
    assert len(handles) == 4  # the A100 machine of the dump
    assert [[p.pid for p in gpu.nvmlDeviceGetComputeRunningProcesses(h)] for h in handles] == [[4242], [], [], []]
    got = [gpu.nvmlDeviceGetUtilizationRates(handles[0]).gpu for _ in range(len(series) + 2)]
    assert got == [u for u, _ in series] + [100, 88]  # from the start again past its end
    assert gpu.nvmlDeviceGetUtilizationRates(handles[1]).gpu == 0  # the other GPUs: the dump as it is
    assert gpu.nvmlDeviceGetName(handles[0]) == "NVIDIA A100-SXM4-80GB"


def test_a_real_job_recorded_gives_the_report_the_cli_writes(tmp_path):
    report = rec.record("main", tmp_path, seconds=2.5)  # the watcher samples once a second
    doc = json.loads(report.read_text())
    assert doc["schema"] == 1 and doc["exit_code"] == 0 and doc["source"] == str(tmp_path / "main.log")
    run = doc["run"]
    assert run["available"] is True and run["cpu_count"] == len(os.sched_getaffinity(0))
    if run["samples"]:  # each kept sample read the next utilisation of the series
        first = [u for u, _ in rec.recorded_series()][:run["samples"]]
        assert run["gpu_util_avg"] == round(sum(first) / len(first), 1)
    # pasted back, the report gives the run facts it carries
    assert paste.read(report.read_text()).facts["run"] == run


@pytest.mark.parametrize("name,rule", [
    ("run-cpu-bound-loader.json", "run-gpu-underused-cpu-bound-loader"),
    ("run-single-core-loader.json", "run-gpu-underused-single-core-loader"),
    ("run-waiting-for-disk.json", "run-gpu-underused-waiting-for-disk"),
])
def test_each_recording_was_diagnosed_by_its_rule_when_it_ran(name, rule):
    doc = json.loads((RECORDED / name).read_text())
    assert [d["rule"] for d in doc["diagnoses"]] == [rule]


@pytest.mark.parametrize("name", ["run-cpu-bound-loader", "run-single-core-loader", "run-waiting-for-disk"])
def test_what_is_said_live_of_each_recording_is_what_its_final_diagnosis_named(name):
    """The live judgement (run.verdict, while the job runs) of a recording's log and samples names
    the rules and symptoms that the CLI's final diagnosis of that job named."""
    from troubleshoot import pipeline
    from troubleshoot.run.verdict import Verdict, job_facts
    from troubleshoot.sources import LogTail

    doc = json.loads((RECORDED / f"{name}.json").read_text())
    verdict = Verdict(pipeline.load_rules())
    live = verdict.so_far(LogTail(RECORDED / f"{name}.log"), job_facts(doc["run"], None))
    assert [(d.rule.id, d.symptom) for d in live] == [(d["rule"], d["symptom"]) for d in doc["diagnoses"]]
