"""State dumps pasted into a log are facts of the machine the log came from: fact rules work on a
pasted log alone (--no-probe), and the evidence names the pasted line."""

import json

import pytest

from conftest import REPO, run_cli
from troubleshoot import paste
from troubleshoot.probes import nvml
from troubleshoot.probes.base import ProbeContext
from troubleshoot.paste.nvsmi_q import ReplayNVML

PASTED = REPO / "tests" / "fixtures" / "pasted"
MACHINES = REPO / "tests" / "fixtures" / "machines"


def diagnose(path) -> list[dict]:
    p = run_cli("diagnose", "--no-probe", "--format", "json", "--log", str(path))
    assert p.returncode == 0, p.stderr.decode()
    return json.loads(p.stdout)["diagnoses"]


def log_evidence(d: dict) -> list[str]:
    return [e["text"] for e in d["evidence"] if e["source"] == "log"]


@pytest.mark.parametrize("name,symptom,line", [
    ("lsmod-nouveau.txt", "nouveau-conflict", "nouveau              1601536  1"),
    ("lspci-nouveau-in-use.txt", "nouveau-conflict", "Kernel driver in use: nouveau"),
    ("lspci-rtx2060-x8.txt", "pcie-degraded", "LnkSta:\tSpeed 8GT/s (ok), Width x8 (downgraded)"),
    ("nvsmi-470-pip-torch-cu121.txt", "driver-too-old", "torch                    2.1.0+cu121"),
])
def test_pasted_dump_gives_its_diagnosis_without_probing(name, symptom, line):
    ds = diagnose(PASTED / name)
    assert ds and ds[0]["symptom"] == symptom, [d["rule"] for d in ds]
    assert any(line in t for t in log_evidence(ds[0]))


def test_driver_and_torch_from_the_paste_are_both_evidence():
    d = diagnose(PASTED / "nvsmi-470-pip-torch-cu121.txt")[0]
    assert any("Driver Version: 470.86" in t for t in log_evidence(d))
    assert "12.1" in d["explain"]


def test_nvidia_smi_q_paste_reads_like_the_probe():
    text = (MACHINES / "pcie-degraded" / "nvidia-smi-q.txt").read_text()
    got = paste.read("some job output\n" + text + "\nTraceback (most recent call last):\n").facts["nvml"]
    probed = nvml.probe(ProbeContext(nvml=ReplayNVML(MACHINES / "pcie-degraded" / "nvidia-smi-q.txt")))
    assert got["driver_version"] == probed["driver_version"]
    assert [g["pcie_width_current"] for g in got["gpus"]] == [g["pcie_width_current"] for g in probed["gpus"]]


def test_ldconfig_with_two_cudarts():
    text = ("$ ldconfig -p | grep cudart\n"
            "\tlibcudart.so.12 (libc6,x86-64) => /usr/local/cuda-12.4/targets/x86_64-linux/lib/libcudart.so.12\n"
            "\tlibcudart.so.11.0 (libc6,x86-64) => /usr/local/cuda-11.0/targets/x86_64-linux/lib/libcudart.so.11.0\n"
            "\tlibcudart.so (libc6,x86-64) => /usr/local/cuda-12.4/targets/x86_64-linux/lib/libcudart.so\n")
    got = paste.read(text)
    assert got.facts["cuda"]["versions"]["libcudart"] == ["11.0", "12"]
    assert got.lines["cuda.versions.libcudart"][0] == 2


def test_docker_info_runtimes():
    text = " Server Version: 24.0.7\n Runtimes: io.containerd.runc.v2 runc\n Default Runtime: runc\n"
    docker = paste.read(text).facts["docker"]
    assert docker["runtimes"] == ["io.containerd.runc.v2", "runc"] and docker["nvidia_runtime"] is False


def test_pip_list_and_collect_env():
    got = paste.read("torch                     1.8.0+cu101\ntorchvision               0.9.0+cu101\n").facts
    assert got["frameworks"]["torch"] == {"version": "1.8.0+cu101", "cuda": "10.1"}
    env = paste.read("PyTorch version: 2.1.0+cu121\nCUDA used to build PyTorch: 12.1\n"
                     "Nvidia driver version: 525.105.17\n").facts
    assert env["frameworks"]["torch"]["cuda"] == "12.1"
    assert env["nvml"]["driver_version"] == "525.105.17" and env["nvml"]["cuda_driver_version"] == "12.0"


def test_ordinary_training_lines_are_not_dumps():
    text = "Epoch 3 100\nstep 1200 loss 1.234\ntorch.cuda.OutOfMemoryError: CUDA out of memory.\n"
    assert not paste.read(text)


def test_pasted_facts_override_probed_ones_and_keep_the_rest():
    merged = paste.merge({"nvml": {"available": False, "gpus": []}, "io": {"cpu_count": 8}},
                         paste.read((PASTED / "lspci-rtx2060-x8.txt").read_text()))
    assert merged["nvml"]["gpus"][0]["pcie_width_current"] == 8 and merged["io"] == {"cpu_count": 8}
