"""Reading many logs: names that say node and rank, merged-log labels, timestamps, node comparison."""

from __future__ import annotations

import copy
import io
import json

import pytest

from conftest import REPO
from troubleshoot import logfiles
from troubleshoot.engine import timestamps
from troubleshoot.fleet.compare import compare
from troubleshoot.sources import LogSource, tagged

BASE = json.loads((REPO / "tests" / "fixtures" / "snapshots" / "base.json").read_text())


@pytest.mark.parametrize("path, node, rank", [
    ("/shared/job42/20261201-python-train.gpu-07.rank17.log", "gpu-07", 17),
    ("/logs/run-1/attempt_0/3/stderr.log", None, 3),  # torchrun --log-dir
    ("/home/ana/slurm-4242-5.out", None, 5),  # --output=slurm-%j-%t.out
    ("/home/ana/slurm-4242.out", None, None),  # one merged file: ranks come from its labels
    ("/k8s/trainer-node-gpu-a7-rank_2.txt", "gpu-a7", 2),
    ("/logs/train.log", None, None),
])
def test_node_and_rank_from_file_names(path, node, rank):
    src = tagged(LogSource(path, path))
    assert (src.node, src.rank) == (node, rank)


@pytest.mark.parametrize("line, rank, rest", [
    (b"3: [rank3]:[E626 06:24:44.1 ProcessGroupNCCL.cpp:616] x", 3, b"[E626 06:24:44.1 ProcessGroupNCCL.cpp:616] x"),
    (b" 12: torch.OutOfMemoryError: CUDA out of memory.", 12, b"torch.OutOfMemoryError: CUDA out of memory."),
    (b"[default1]:Traceback (most recent call last):", 1, b"Traceback (most recent call last):"),
    (b"[rank0]: File \"train.py\", line 3", 0, b"File \"train.py\", line 3"),
    (b"epoch 3: loss 0.1", None, b"epoch 3: loss 0.1"),
])
def test_merged_log_labels(line, rank, rest):
    got, cut = logfiles.label(line)
    assert got == rank and line[cut:] == rest


def test_a_log_is_split_only_when_most_lines_carry_a_label(tmp_path):
    assert logfiles.is_labelled(b"0: a\n1: b\n0: c\nnot labelled\n")
    assert not logfiles.is_labelled(b"step 1\n3: a numbered list item\nstep 2\nstep 3\n")
    spools = logfiles.split(io.BytesIO(b"0: a\n1: b\nplain\n1: c\n"), str(tmp_path))
    assert [(s.rank, list(s.lines)) for s in spools] == [(0, [1]), (1, [2, 4]), (None, [3])]
    assert (tmp_path / "rank-1.log").read_bytes() == b"b\nc\n"


@pytest.mark.parametrize("line, key", [
    ("[rank0]:[E626 06:24:44.159932949 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog", (6, 26, 23084.159932949)),
    ("[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607]", (12, 6, 67452.715298746)),
    ("E131 16:15:16.707598872 x", (1, 31, 58516.707598872)),
    ("I0225 07:05:33.508602 140182089410368 submission_runner.py:206] Initializing dataset.", (2, 25, 25533.508602)),
    ("2024-12-24 21:49:16,391 [INFO] config", (12, 24, 78556.391)),
    ("[2024-12-24T21:49:16.391Z] slurmstepd", (12, 24, 78556.391)),
    ("Oct 30 09:49:36 pc kernel: NVRM: Xid (PCI:0000:03:00): 79", (10, 30, 35376.0)),
    ("[Mon Jan 15 10:22:33 2024] NVRM: Xid", (1, 15, 37353.0)),
])
def test_timestamps_as_logs_write_them(line, key):
    stamp = timestamps.find(line)
    assert stamp is not None and stamp.key[:2] == key[:2] and stamp.key[2] == pytest.approx(key[2])


def test_no_timestamp_is_none():
    for line in ("step 12: loss 0.3", "torch.OutOfMemoryError: CUDA out of memory.", "E9999 99:99:99"):
        assert timestamps.find(line) is None


def test_the_timestamp_in_force_is_the_nearest_before_a_line(tmp_path):
    log = tmp_path / "r.log"
    log.write_text("2024-01-01 10:00:00 start\nno time\n2024-01-01 10:05:00 step\nboom\nboom again\n")
    stamps = logfiles.stamps_at(str(log), [2, 4, 5, 1])
    assert {k: str(v) for k, v in stamps.items()} == {
        1: "2024-01-01 10:00:00", 2: "2024-01-01 10:00:00", 4: "2024-01-01 10:05:00", 5: "2024-01-01 10:05:00"}


def test_outliers_beyond_versions():
    nodes = {f"n{i}": copy.deepcopy(BASE) for i in range(4)}
    nodes["n1"]["nvml"]["gpus"][0]["throttle_reasons"] = ["gpu_idle", "hw_thermal_slowdown"]
    nodes["n2"]["io"]["shm_size_mib"] = 64
    nodes["n3"]["kernel"]["modules"]["nouveau"] = True
    nodes["n0"]["io"]["nofile_soft"] = 1024
    found = {(f.node, f.what) for f in compare(nodes)}
    assert found == {("n1", "throttle reason"), ("n2", "/dev/shm"), ("n3", "nouveau"), ("n0", "open files limit")}
    assert compare({"only": BASE}) == []


def test_an_idle_gpu_at_a_lower_generation_is_no_outlier_when_all_are_idle():
    nodes = {f"n{i}": copy.deepcopy(BASE) for i in range(3)}
    for snap in nodes.values():
        snap["nvml"]["gpus"][0]["pcie_gen_current"] = 1  # idle GPUs lower their link generation
    assert compare(nodes) == []


def test_the_node_a_log_names_is_the_same_on_every_run():
    """Hosts seen as often as each other: the first seen, whatever the hash seed of the run."""
    import os
    import subprocess
    import sys

    head = b"".join(b"node%02d:1:2 [0] NCCL INFO Channel 00 via P2P\n" % (i % 16) for i in range(64))
    assert logfiles.node_in(head) == "node00"
    code = ("import sys; from troubleshoot import logfiles; "
            "print(logfiles.node_in(sys.stdin.buffer.read()))")
    seen = {subprocess.run([sys.executable, "-c", code], input=head, capture_output=True, check=True,
                           env=dict(os.environ, PYTHONHASHSEED=str(seed))).stdout for seed in (1, 2, 3, 4)}
    assert seen == {b"node00\n"}
