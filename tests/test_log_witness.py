"""The log as a witness: numbers followed over a log (a leak against a warm-up, a NaN loss printed
as a number), and the first failure across many ranks (a cause below many timeouts, and only
timeouts: no cause, and the rank that said nothing). The log lines follow real formats: the
watchdog line is rules/distributed.yaml's real example's, the memory and loss lines the forms
of rules/memory.yaml's examples."""

from __future__ import annotations

import json

from conftest import run_main

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
