"""Hand-made snapshots (plus a log where the scenario has one) give the expected symptom."""

import copy
import json

import pytest

from conftest import REPO, run_main

BASE = json.loads((REPO / "tests" / "fixtures" / "snapshots" / "base.json").read_text())

BUS_ERROR_LOG = """\
Epoch 1:  12%|#2        | 120/1000 [00:31<03:48,  3.85it/s]
ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).
Traceback (most recent call last):
  File "/opt/conda/lib/python3.10/site-packages/torch/utils/data/dataloader.py", line 1133, in _try_get_data
    data = self._data_queue.get(timeout=timeout)
RuntimeError: DataLoader worker (pid 3127) is killed by signal: Bus error. It is possible that dataloader's workers are out of shared memory. Please try to raise your shared memory limit.
"""


def no_docker_nvidia(s):
    s["docker"].update(runtimes=["io.containerd.runc.v2", "runc"], nvidia_runtime=False, daemon_json=None,
                       daemon_json_nvidia_runtime=None)


def nouveau(s):
    s["kernel"]["modules"].update(nouveau=True, nvidia=False, nvidia_uvm=False, nvidia_drm=False, nvidia_modeset=False)
    s["kernel"].update(nouveau_blacklisted=False, nouveau_blacklist_files=[])
    s["nvml"] = {"available": False, "error": "nvmlInit failed: Driver Not Loaded", "gpus": []}


def old_driver(s):
    s["nvml"].update(driver_version="470.82.01", cuda_driver_version="11.4")
    s["kernel"]["nvidia_module_version"] = "470.82.01"
    s["frameworks"]["torch"].update(version="2.1.0+cu121", cuda="12.1", cuda_available=False, device_count=0)


def pcie(s):
    s["nvml"]["gpus"][0].update(pcie_gen_current=1, pcie_gen_max=4, pcie_width_current=4, pcie_width_max=16,
                                utilization_gpu=97)


def xid79(s):
    s["kernel"]["xid_events"] = [{"code": 79, "pci": "0000:68:00", "pid": None, "process": None,
                                  "message": "GPU has fallen off the bus.",
                                  "line": "NVRM: Xid (PCI:0000:68:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
                                  "uptime_s": None, "time": None, "current": True, "symptom": "gpu-hardware-fault",
                                  "action": "reboot"}]


def small_shm(s):
    s["docker"]["in_container"] = True
    s["io"].update(shm_size_mib=64, shm_used_mib=63)


SCENARIOS = [
    ("docker-gpu-missing", no_docker_nvidia, None),
    ("nouveau-conflict", nouveau, None),
    ("driver-too-old", old_driver, None),
    ("pcie-degraded", pcie, None),
    ("gpu-hardware-fault", xid79, None),
    ("shm-exhausted", small_shm, BUS_ERROR_LOG),
]


def diagnose(tmp_path, snap, log=None):
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(snap))
    args = ["diagnose", "--format", "json", "--snapshot", str(path)]
    if log is not None:
        args += ["--log", "-"]
    p = run_main(*args, input=log or b"")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)["diagnoses"], p.stderr.decode()


def test_healthy_base_snapshot_has_no_errors(tmp_path):
    ds, err = diagnose(tmp_path, BASE)
    assert [d["rule"] for d in ds if d["severity"] == "error"] == []
    assert err == ""


@pytest.mark.parametrize("symptom, change, log", SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_scenario(tmp_path, symptom, change, log):
    snap = copy.deepcopy(BASE)
    change(snap)
    ds, _ = diagnose(tmp_path, snap, log)
    assert ds, "no diagnosis"
    assert ds[0]["symptom"] == symptom, [(d["symptom"], d["rule"]) for d in ds]
    assert any(e["source"] == "fact" for e in ds[0]["evidence"])


def test_facts_confirm_a_log_diagnosis_and_say_so(tmp_path):
    snap = copy.deepcopy(BASE)
    old_driver(snap)
    log = "RuntimeError: The NVIDIA driver on your system is too old (found version 11040).\n"
    ds, _ = diagnose(tmp_path, snap, log)
    top = ds[0]
    assert top["symptom"] == "driver-too-old" and top["count"] == 1
    assert "torch 2.1.0+cu121 is built for CUDA 12.1; this driver (470.82.01) supports CUDA up to 11.4" in top["explain"]
    # The same log on a machine whose torch fits its driver: confidence drops and the text says why.
    ds2, _ = diagnose(tmp_path, BASE, log)
    same = next(d for d in ds2 if d["rule"] == top["rule"])
    assert same["confidence"] < top["confidence"] and "fits this driver" in same["explain"]
