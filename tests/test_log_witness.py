"""The log as a witness: numbers followed over a log (a leak against a warm-up, a NaN loss printed
as a number), and the first failure across many ranks (a cause below many timeouts, and only
timeouts: no cause, and the rank that said nothing). The log lines follow real formats: the
watchdog line is rules/distributed.yaml's real example's, the memory and loss lines the forms
of rules/memory.yaml's examples."""

from __future__ import annotations

import json
import os
import time

from conftest import REPO, run_cli, run_main

WATCHDOG = ("[rank{r}]:[E ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for "
            "600012 milliseconds before timing out.")
IMA = "[rank17]:RuntimeError: CUDA error: an illegal memory access was encountered"


def diagnose(tmp_path, text: str, name: str = "train.log") -> dict:
    log = tmp_path / name
    log.write_text(text)
    p = run_main("diagnose", "--no-probe", "--format", "json", str(log))
    assert p.returncode == 0, p.stderr.decode()
    return json.loads(p.stdout)


def test_memory_rising_every_step_is_a_leak_with_its_rate(tmp_path):
    text = "".join(f"step {s} | loss 2.31 | memory_allocated: {1.20 + 0.04 * s:.2f} GB\n" for s in range(200))
    top = diagnose(tmp_path, text)["diagnoses"][0]
    assert top["symptom"] == "gpu-memory-leak"
    assert "rose from 1.2 to 9.16 over 200 samples, about 0.04 per printed step" in " ".join(top["explain"].split())


def test_memory_that_rises_for_ten_steps_then_levels_off_is_no_leak(tmp_path):
    text = "".join(f"step {s} | loss 2.31 | memory_allocated: {1.2 + 0.3 * min(s, 10):.2f} GB\n" for s in range(200))
    assert [d for d in diagnose(tmp_path, text)["diagnoses"] if d["symptom"] == "gpu-memory-leak"] == []


def test_a_loss_printed_as_nan_is_a_nan_loss(tmp_path):
    text = "".join(f"step {s} loss {2.3 - 0.001 * s:.4f}\n" for s in range(0, 1210, 10)) + "step 1210 loss nan\n"
    top = diagnose(tmp_path, text)["diagnoses"][0]
    assert top["symptom"] == "nan-loss" and top["first_line"] == 122


def test_one_rank_s_cause_ranks_above_63_ranks_timeouts_before_it(tmp_path):
    text = "".join(WATCHDOG.format(r=r, seq=1530) + "\n" for r in range(64) if r != 17) + IMA + "\n"
    doc = diagnose(tmp_path, text)
    top = doc["diagnoses"][0]
    assert top["symptom"] == "illegal-memory-access" and top["ranks"] == [17]
    assert doc["summary"] == ("rank 17 failed first with illegal-memory-access (cuda-illegal-memory-access); "
                              "63 ranks then timed out in NCCL")


def test_only_timeouts_say_no_rank_shows_a_cause_and_name_the_silent_rank(tmp_path):
    text = "".join(WATCHDOG.format(r=r, seq=1530) + "\n" for r in range(64) if r != 17)
    doc = diagnose(tmp_path, text)
    assert doc["summary"] == ("no rank shows a cause: ranks 0..63 except 17 timed out in NCCL waiting on ALLREDUCE "
                              "SeqNum=1530; rank 17 logged no timeout: look there first (its own log, py-spy dump, "
                              "the kernel log of its node)")
    explain = doc["diagnoses"][0]["explain"]
    assert "torch.distributed.flight_recorder.fr_trace" in explain and "ncclras" in explain


def test_ranks_waiting_on_different_collectives_name_the_ones_behind(tmp_path):
    text = "".join(WATCHDOG.format(r=r, seq=1529 if r == 5 else 1530) + "\n" for r in range(8))
    top = diagnose(tmp_path, text)["diagnoses"][0]
    assert ("the ranks waited on different collectives (SeqNum 1529: rank 5; SeqNum 1530: ranks 0..7 except 5): "
            "the ranks at the lowest sequence number fell behind") in top["notes"]


# ------------------------------------------------------------------ facts the log printed about its machine

# OpenMMLab's collect_env as mmengine/utils/dl_utils/collect_env.py and mmcv print it (one
# `Key: value` line each, torch.__config__.show() under "PyTorch compiling details"), then the
# undefined symbol of mmcv's ops built for another CUDA, as mmcv's FAQ shows it.
MMCV_LOG = """\
sys.platform: linux
Python: 3.8.18 (default, Sep 11 2023, 13:40:15) [GCC 11.2.0]
CUDA available: True
numpy_random_seed: 2147483648
GPU 0,1: NVIDIA GeForce RTX 3090
CUDA_HOME: /usr/local/cuda
NVCC: Cuda compilation tools, release 11.3, V11.3.109
GCC: gcc (Ubuntu 9.4.0-1ubuntu1~20.04.2) 9.4.0
PyTorch: 2.1.2+cu121
PyTorch compiling details: PyTorch built with:
  - GCC 9.3
  - CUDA Runtime 12.1
  - CuDNN 8.9.2
TorchVision: 0.16.2+cu121
MMEngine: 0.10.3
MMCV: 2.1.0
MMCV Compiler: GCC 9.4
MMCV CUDA Compiler: 11.3
Traceback (most recent call last):
  File "tools/train.py", line 16, in <module>
    from mmdet.apis import init_random_seed, set_random_seed, train_detector
ImportError: /opt/conda/lib/python3.8/site-packages/mmcv/_ext.cpython-38-x86_64-linux-gnu.so: undefined symbol: _ZN3c104cuda9SetDeviceEi
"""


def old_log(tmp_path, text=MMCV_LOG):
    log = tmp_path / "train.log"
    log.write_text(text)
    five_days_ago = time.time() - 5 * 86400
    os.utime(log, (five_days_ago, five_days_ago))
    return log


def test_a_log_from_elsewhere_is_judged_by_its_own_environment_block(tmp_path):
    p = run_main("diagnose", "--format", "json", str(old_log(tmp_path)))  # no probe runs: the log is not from here
    doc = json.loads(p.stdout)
    assert doc["facts"] is None and doc["facts_source"] == "the log"
    assert doc["facts_note"] == "this machine's facts were not used: the log was last written 5 days ago (--here uses them)"
    assert doc["log_facts"] == {"frameworks.torch.version": "2.1.2+cu121", "frameworks.torch.cuda": "12.1",
                                "frameworks.mmcv.version": "2.1.0", "frameworks.mmcv.cuda": "11.3",
                                "cuda.nvcc_version": "11.3"}
    top = doc["diagnoses"][0]
    explain = " ".join(top["explain"].split())
    assert top["symptom"] == "cuda-symbol-mismatch"
    assert ("mmcv 2.1.0 was compiled with CUDA 11.3, but torch 2.1.2+cu121 was built for CUDA 12.1: mmcv's CUDA "
            "ops must be built for torch's CUDA") in explain
    assert "From the log:" in explain and "this machine" not in explain
    assert all(d["symptom"] != "docker-gpu-missing" for d in doc["diagnoses"])
    text = run_main("diagnose", str(old_log(tmp_path))).stdout.decode()
    assert text.startswith("From the log: torch 2.1.2+cu121, torch built for CUDA 12.1, mmcv 2.1.0, mmcv built "
                           "with CUDA 11.3, nvcc 11.3.\nThis machine's facts were not used: the log was last written 5 "
                           "days ago (--here uses them).\n")


def test_here_and_a_fresh_log_use_this_machine_for_what_the_log_does_not_say(tmp_path):
    log = old_log(tmp_path)
    doc = json.loads(run_cli("diagnose", "--here", "--format", "json", str(log)).stdout)
    assert doc["facts"] == "this machine" and doc["facts_source"] == "the log and this machine"
    assert doc["facts_note"] is None
    # the log's torch outranks this machine's for this log
    top = doc["diagnoses"][0]
    assert "torch 2.1.2+cu121" in " ".join(top["explain"].split())
    log.touch()  # written just now: the job ran here
    assert json.loads(run_cli("diagnose", "--format", "json", str(log)).stdout)["facts"] == "this machine"


def test_a_pasted_text_is_not_judged_by_this_machine(tmp_path):
    from troubleshoot.sources import LogSource, from_here

    now = time.time()
    assert from_here([LogSource("pasted log", text="x")], False, now) == (False, "the log was pasted")
    assert from_here([LogSource("stdin")], True, now) == (False, "the log was typed or pasted into the terminal")
    assert from_here([LogSource("stdin")], False, now) == (True, "the log was piped in")
    log = old_log(tmp_path)
    assert from_here([LogSource(str(log), path=str(log))], False, now)[0] is False
    assert from_here([LogSource(str(log), path=str(log))], False, now + 0)[1] == "the log was last written 5 days ago"


def test_detectron2_collect_env_and_the_driver_s_load_line_are_read(tmp_path):
    from troubleshoot import paste

    # detectron2/utils/collect_env.py's tabulate rows, and the kernel's line at the driver's load
    text = ("----------------------  ---------------------------------------------------------------\n"
            "sys.platform            linux\n"
            "detectron2              0.6 @/usr/local/lib/python3.8/dist-packages/detectron2\n"
            "Compiler                GCC 9.4\n"
            "CUDA compiler           CUDA 11.3\n"
            "PyTorch                 1.12.1+cu116 @/usr/local/lib/python3.8/dist-packages/torch\n"
            "GPU available           Yes\n"
            "GPU 0                   NVIDIA GeForce RTX 3090 (arch=8.6)\n"
            "Driver version          470.82.01\n"
            "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  470.82.01  Fri Oct 22 23:01:42 UTC 2021\n"
            "NCCL version 2.10.3+cuda11.6\n")
    facts = paste.read(text).facts
    assert facts["frameworks"]["detectron2"] == {"version": "0.6", "cuda": "11.3"}
    assert facts["frameworks"]["torch"] == {"version": "1.12.1+cu116", "cuda": "11.6", "nccl": "2.10.3"}
    assert facts["nvml"]["driver_version"] == "470.82.01" and facts["kernel"]["nvidia_module_version"] == "470.82.01"
    assert facts["nvml"]["gpus"] == [{"index": 0, "name": "NVIDIA GeForce RTX 3090", "compute_capability": "8.6"}]


COLLECTIVES = REPO / "tests" / "fixtures" / "collectives"  # real reports, sources in SOURCE.md there


def test_pasted_collective_reports_name_the_missing_and_the_late_ranks(tmp_path):
    fr = diagnose(tmp_path, (COLLECTIVES / "fr-pr140969-not-all-joining.txt").read_text())["diagnoses"][0]
    assert fr["rule"] == "collective-report-missing-ranks"
    assert "waits for ranks 3, 4, 5, 6, 7:" in " ".join(fr["explain"].split())
    ras = diagnose(tmp_path, (COLLECTIVES / "ras-2.30.7-walkthrough-incomplete.txt").read_text())["diagnoses"][0]
    assert ras["rule"] == "collective-report-missing-ranks-of-group" and "from ranks 7:" in " ".join(ras["explain"].split())
    late = diagnose(tmp_path, (COLLECTIVES / "ras-2.30.7-walkthrough-straggler.txt").read_text())["diagnoses"][0]
    assert late["rule"] == "collective-report-ranks-behind" and "ranks 7 launched" in " ".join(late["explain"].split())
    text = run_main("diagnose", "--no-probe", str(COLLECTIVES / "ras-2.30.7-walkthrough-straggler.txt")).stdout
    assert b"from what the log printed" in text


# ------------------------------------------------------------------ stragglers

def step_times(slow: dict[int, float]) -> str:
    return "".join(f"[rank{r}]:step {step} | loss 2.31 | time {1.05 + 0.01 * (r % 3) + slow.get(r, 0.0):.3f} s\n"
                   for step in range(0, 200, 10) for r in range(8))


def test_the_rank_consistently_slower_than_its_peers_is_named_with_how_much(tmp_path):
    doc = diagnose(tmp_path, step_times({5: 0.30}))
    top = doc["diagnoses"][0]
    assert top["rule"] == "rank-step-time-straggler" and top["ranks"] == [5]
    assert top["notes"] == ["rank 5 is the slowest: step time 1.37 on average against 1.06, the median of the "
                            "other 7 (+29 %)"]
    assert doc["summary"] == top["notes"][0]


def test_ranks_within_the_margin_and_one_log_alone_name_no_straggler(tmp_path):
    assert diagnose(tmp_path, step_times({5: 0.05}))["diagnoses"] == []  # +5 %: within the 15 % margin
    one = "".join(f"step {s} | loss 2.31 | time 1.234 s\n" for s in range(0, 200, 10))
    assert diagnose(tmp_path, one, "one.log")["diagnoses"] == []


def test_a_throughput_below_the_others_is_a_straggler_too(tmp_path):
    # torchtitan's metrics line, one per rank, rank 2 at two thirds of the others' tokens per second
    text = "".join(f"[rank{r}]:step: {s}  loss:  7.8912  memory: 31.24GiB(39.46%)  tps: {4_000 if r == 2 else 6_123:,}"
                   f"  tflops: 231.19  mfu: 23.38%\n" for s in range(1, 40) for r in range(4))
    top = diagnose(tmp_path, text)["diagnoses"][0]
    assert top["rule"] == "rank-throughput-straggler" and top["ranks"] == [2]
    assert "rank 2 is the slowest: rate 4,000 on average against 6,123, the median of the other 3 (+53 %)" in top["notes"][0]
