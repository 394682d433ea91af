"""Monitoring output pasted next to "why is my GPU idle" (nvidia-smi dmon / --query-gpu loops /
tables, top, vmstat, iostat, mpstat) and pasted `troubleshoot run --format json` reports are read
as the run.* facts the watcher of `troubleshoot run` measures. Samples: tests/fixtures/pasted
(SOURCE.md says where each was pasted)."""

import json
import os

import pytest

from conftest import REPO, run_cli
from troubleshoot import paste
from troubleshoot.paste import monitor, reader
from troubleshoot.paste.needles import needles_in

PASTED = REPO / "tests" / "fixtures" / "pasted"


def run_facts(*names: str) -> dict:
    return paste.read("".join((PASTED / n).read_text() for n in names)).facts.get("run", {})


GPU_LOOP = (PASTED / "query-gpu-csv-low.txt").read_text()  # CPU dumps are read next to a GPU loop


def cpu_facts(text: str) -> dict:
    got = paste.read(GPU_LOOP + text).facts["run"]
    gpu_side = ("available", "gpu_util_avg", "samples", "io_stall", "gpu_util_swings", "gpu_util_idle_pct")
    return {k: v for k, v in got.items() if k not in gpu_side}


@pytest.mark.parametrize("name,expect", [
    ("dmon-dcgm-idle.txt", {"gpu_util_avg": 0.0, "samples": 2}),
    ("query-gpu-csv-healthy.txt", {"gpu_util_avg": 91.1, "samples": 17}),
    ("query-gpu-csv-low.txt", {"gpu_util_avg": 45.6, "samples": 8}),
    # three python rows at 198 + 113 + 82.4 %CPU: the job's cores, as the watcher sums its tree
    ("top-python-procs.txt", {"iowait_avg": 1.7, "cpu_cores_avg": 3.93, "cpu_cores_scope": "job", "cpu_samples": 1}),
    ("top-percpu-one-busy.txt", {"cpu_count": 4, "cpu_cores_avg": 1.0, "cpu_cores_scope": "system"}),
    ("top-percpu-all-busy.txt", {"cpu_count": 6, "cpu_cores_avg": 6.0, "iowait_avg": 0.0}),
    ("top-iowait.txt", {"iowait_avg": 83.7}),
    # the first vmstat row (since boot: 99 id, 1 wa) is left out; the three interval rows remain
    ("vmstat-idle.txt", {"iowait_avg": 0.0, "cpu_samples": 3, "read_mb_s": 0.0}),
])
def test_real_monitoring_pastes_read_as_run_facts(name, expect):
    got = run_facts(name) if "gpu_util_avg" in expect else cpu_facts((PASTED / name).read_text())
    assert {k: got.get(k) for k in expect} == expect, got


def test_each_gpu_sample_line_and_the_evidence_it_gives():
    got = paste.read((PASTED / "query-gpu-csv-low.txt").read_text())
    assert got.lines["run.gpu_util_avg"] == (3, "2024/09/08 13:03:31.000, 100 %, 26 %")


def test_noheader_csv_loop_takes_its_columns_from_the_command():
    # `--format=csv,noheader` rows (the aws-samples GPU monitor and waybar scripts run this form)
    text = ("$ nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv,noheader,nounits -l 1\n"
            "0, 12, 30994\n1, 0, 4\n0, 20, 30994\n1, 0, 4\n")
    got = paste.read(text).facts["run"]
    # GPU 1 idles in every sample while GPU 0 works: a card the job does not use
    assert got["gpu_util_avg"] == 16.0 and got["samples"] == 2


def test_since_boot_reports_are_not_the_moment():
    lone_vmstat = (PASTED / "vmstat-idle.txt").read_text().splitlines(keepends=True)[:3]
    assert cpu_facts("".join(lone_vmstat)) == {}
    # A lone `iostat` report is since boot too; its "(8 CPU)" banner alone is not a run (the report
    # of ibgdn/ReadingNotes Chapter-6.md; the second avg-cpu values are ashishsaonerkar99/Cmp#5's).
    iostat = ("Linux 2.6.32-279.19.3.el6.ucloud.x86_64 (vm1)   06/11/2017  _x86_64_    (8 CPU)\n\n"
              "avg-cpu:  %user   %nice %system %iowait  %steal   %idle\n"
              "           0.08    0.00    0.06    0.00    0.00   99.86\n")
    assert cpu_facts(iostat) == {}
    two = iostat + "\navg-cpu:  %user   %nice %system %iowait  %steal   %idle\n           5.51    0.00    5.16   15.72    0.00   73.61\n"
    got = cpu_facts(two)
    assert got["iowait_avg"] == 15.7 and got["cpu_count"] == 8 and got["cpu_cores_avg"] == round(0.1067 * 8, 2)


def test_mpstat_average_line_and_cpu_banner():
    text = ("Linux 5.15.0-91-generic (node3) \t01/09/2024 \t_x86_64_\t(16 CPU)\n\n"
            "10:00:01 AM  CPU    %usr   %nice    %sys %iowait    %irq   %soft  %steal  %guest  %gnice   %idle\n"
            "10:00:02 AM  all    6.20    0.00    0.50   12.00    0.00    0.10    0.00    0.00    0.00   81.20\n"
            "10:00:03 AM  all    6.00    0.00    0.70   14.00    0.00    0.10    0.00    0.00    0.00   79.20\n"
            "Average:     all    6.10    0.00    0.60   13.00    0.00    0.10    0.00    0.00    0.00   80.20\n")
    got = cpu_facts(text)
    assert got["iowait_avg"] == 13.0 and got["cpu_count"] == 16 and got["cpu_cores_avg"] == round(0.068 * 16, 2)


def test_nproc_is_the_count_the_job_gets():
    got = cpu_facts((PASTED / "top-percpu-all-busy.txt").read_text() + "$ nproc\n4\n")
    # nproc (the affinity) is the job's count; the busy cores stay counted over top's 6 CPUs
    assert got["cpu_count"] == 4 and got["cpu_cores_avg"] == 6.0


# Real pastes of two kinds joined as one log (SOURCE.md): the GPU loop of one job, the CPU
# state of another machine. No public thread found holds both for one job.
@pytest.mark.parametrize("gpu,cpu,rule", [
    ("query-gpu-csv-low.txt", "top-percpu-all-busy.txt", "run-gpu-underused-cpu-bound-loader"),
    ("query-gpu-csv-low.txt", "top-percpu-one-busy.txt", "run-gpu-underused-single-core-loader"),
    ("query-gpu-csv-low.txt", "top-iowait.txt", "run-gpu-underused-waiting-for-disk"),
])
def test_pasted_monitoring_gives_its_diagnosis_without_probing(tmp_path, gpu, cpu, rule):
    log = tmp_path / "pasted.log"
    log.write_text((PASTED / gpu).read_text() + (PASTED / cpu).read_text())
    p = run_cli("diagnose", "--no-probe", "--format", "json", "--log", str(log))
    assert p.returncode == 0, p.stderr.decode()
    ds = json.loads(p.stdout)["diagnoses"]
    underused = [d["rule"] for d in ds if d["rule"].startswith("run-gpu-underused")]
    assert underused == [rule], [d["rule"] for d in ds]
    d = next(d for d in ds if d["rule"] == rule)
    texts = [e["text"] for e in d["evidence"] if e["source"] == "log"]
    assert "2024/09/08 13:03:31.000, 100 %, 26 %" in texts  # the GPU sample behind the average
    assert "45.6" in d["explain"]
    # one top frame is one CPU sample: the diagnosis says so and counts for less
    assert "1 CPU samples" in d["explain"] and d["confidence"] < 0.65


def test_healthy_gpu_gives_no_underused_diagnosis(tmp_path):
    log = tmp_path / "pasted.log"
    log.write_text((PASTED / "query-gpu-csv-healthy.txt").read_text() + (PASTED / "top-percpu-all-busy.txt").read_text())
    p = run_cli("diagnose", "--no-probe", "--format", "json", "--log", str(log))
    assert p.returncode == 0, p.stderr.decode()
    assert not [d for d in json.loads(p.stdout)["diagnoses"] if d["rule"].startswith("run-gpu-underused")]


def test_a_pasted_run_report_gives_back_the_watchers_facts():
    from troubleshoot.report import jsonfmt
    from troubleshoot.run.watch import Watcher

    w = Watcher(os.getpid(), nvml=False)  # this test process, watched as `troubleshoot run` watches a job
    for _ in range(3):
        w.samples.append(w.sample())
    facts = w.facts(final=True)
    report = jsonfmt.render([], {"source": "train.log", "exit_code": 1, "run": facts})
    got = paste.read("teammate: here is the report\n" + report)
    scalar = {k: v for k, v in facts.items() if not isinstance(v, (dict, list)) or v == []}
    assert {k: got.facts["run"].get(k) for k in scalar} == scalar
    assert got.lines["run.samples"][1] == f'"samples": {facts["samples"]},'


def test_a_report_of_an_unwatched_job_is_not_a_run():
    assert "run" not in paste.read('{\n  "schema": 1,\n  "diagnoses": [],\n  "run": null\n}\n').facts


def test_what_the_watcher_measured_wins_over_what_the_job_printed():
    pasted = paste.read((PASTED / "dmon-dcgm-idle.txt").read_text())
    merged = paste.merge({"run": {"available": True, "gpu_util_avg": 93.0}}, pasted)
    assert merged["run"] == {"available": True, "gpu_util_avg": 93.0}
    assert not any(p.startswith("run.") for p in merged[paste.LINES_KEY])
    assert paste.merge(None, pasted)["run"]["gpu_util_avg"] == 0.0


def test_training_output_is_not_monitoring():
    # Lines that look numeric like vmstat or dmon rows, without the headers those tools print.
    text = "".join(f"   {i}    12    3    0    0  step {i} loss 0.1 gpu 0\n" for i in range(50))
    text += "epoch 3: 100% cpu-bound? 45 %, 12 %\n"
    assert "run" not in paste.read(text).facts


def test_monitor_parsers_run_only_behind_their_needles(monkeypatch):
    calls = []

    def spy(table):
        return tuple((lambda lines, p=parse: calls.append(p.__name__) or p(lines), needles) for parse, needles in table)

    monkeypatch.setattr(reader, "PARSERS", spy(reader.PARSERS))
    monkeypatch.setattr(monitor, "CPU_PARSERS", spy(monitor.CPU_PARSERS))
    # CPU state alone is read by no scanner: no rule reads it without the GPU's utilisation
    assert not paste.read((PASTED / "vmstat-idle.txt").read_text() + (PASTED / "top-iowait.txt").read_text())
    assert calls == []
    paste.read(GPU_LOOP + (PASTED / "vmstat-idle.txt").read_text())
    assert [c for c in calls if c != "lsmod"] == ["query_csv", "vmstat"]  # lsmod's "nvidia": the command line
    calls.clear()
    paste.read("".join(f"Epoch {i} loss 0.{i} 95% | GPU 0 busy, cpu 12%\n" for i in range(1000)))
    assert calls == []


def test_cpu_parsers_need_one_of_their_needles():
    # As test_paste.test_each_parser_needs_one_of_its_needles, for the CPU side of monitoring.
    checked = 0
    for path in sorted(PASTED.glob("*.txt")):
        text = path.read_text()
        lines = text.split("\n")
        for parse, needles in monitor.CPU_PARSERS:
            if parse(lines):
                checked += 1
                assert set(needles) & needles_in(text, needles), (parse.__name__, path.name)
    assert checked >= 5
