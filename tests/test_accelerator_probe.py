"""Accelerators that are not NVIDIA GPUs: the probe reads their PCI ids from sysfs (a tree under
the probe's root here, in the kernel's layout), and a machine with such an accelerator and no
NVIDIA GPU gets one info diagnosis, `accelerator-unsupported`, and nothing else."""

from __future__ import annotations

import copy
import json

import jsonschema

from conftest import REPO, run_main
from troubleshoot.probes import accelerators
from troubleshoot.probes.base import ProbeContext
from troubleshoot.schemas import schema

BASE = json.loads((REPO / "tests" / "fixtures" / "snapshots" / "base.json").read_text())
TPU_V5E = ("0x1ae0", "0x0063", "0x120000")  # jax/_src/hardware_utils.py: 0x0063 is TPU v5e
GVNIC = ("0x1ae0", "0x0042", "0x020000")  # pci.ids: Compute Engine Virtual Ethernet [gVNIC]
XILINX = ("0x10ee", "0x5020", "0x120000")  # pci.ids: 10ee 5020 Alveo U50
AMD_IGPU = ("0x1002", "0x1638", "0x030000")  # pci.ids: 1002 AMD/ATI, a Cezanne APU's VGA function
NVIDIA_A100 = ("0x10de", "0x20b0", "0x030200")  # a 3D controller
NVSWITCH = ("0x10de", "0x1af1", "0x068000")  # a bridge: not a GPU


def sysfs(root, devices: dict, dev_nodes=()):
    for address, ids in devices.items():
        d = root / "sys" / "bus" / "pci" / "devices" / address
        d.mkdir(parents=True)
        for name, value in zip(("vendor", "device", "class"), ids):
            (d / name).write_text(value + "\n")
    (root / "dev").mkdir(exist_ok=True)
    for n in dev_nodes:
        (root / "dev" / n).write_text("")
    return ProbeContext(root=root)


def test_a_tpu_vm_is_read_by_its_pci_ids_and_its_network_card_is_not_a_tpu(tmp_path):
    ctx = sysfs(tmp_path, {**{f"0000:00:0{i}.0": TPU_V5E for i in range(4, 8)}, "0000:00:03.0": GVNIC},
                dev_nodes=("accel0", "accel1", "accel2", "accel3", "null"))
    out = accelerators.probe(ctx)
    assert out["nvidia_gpus"] == 0 and out["families"] == ["Google TPU"]
    assert [d["pci"] for d in out["devices"]] == [f"0000:00:0{i}.0" for i in range(4, 8)]
    assert out["device_nodes"] == ["accel0", "accel1", "accel2", "accel3"]
    assert out["summary"].startswith("Google TPU (4 PCI devices): `tpu-info`")
    jsonschema.validate(out, schema()["properties"]["accelerators"])


def test_nvidia_gpus_are_counted_and_an_nvswitch_is_not_one(tmp_path):
    out = accelerators.probe(sysfs(tmp_path, {"0000:07:00.0": NVIDIA_A100, "0000:0b:00.0": NVSWITCH,
                                              "0000:c1:00.0": AMD_IGPU}))
    assert out["nvidia_gpus"] == 1 and out["families"] == ["AMD GPU (ROCm)"]


def test_no_sysfs_is_a_fact_not_an_error(tmp_path):
    out = accelerators.probe(ProbeContext(root=tmp_path))
    assert out["available"] is False and "/sys/bus/pci/devices" in out["error"]


def diagnoses(tmp_path, probe_root) -> list[dict]:
    """base.json (an A100 machine) as a machine with no NVIDIA driver, and the accelerators the
    probe reads under `probe_root`."""
    snap = copy.deepcopy(BASE)
    snap["nvml"] = {"available": False, "error": "nvmlInit failed: NVML Shared Library Not Found", "gpus": []}
    snap["kernel"].update(modules={m: False for m in snap["kernel"]["modules"]}, nvidia_module_version=None)
    snap["accelerators"] = accelerators.probe(ProbeContext(root=probe_root))
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(snap))
    p = run_main("diagnose", "--format", "json", "--snapshot", str(path))
    assert p.returncode == 0 and p.stderr.decode() == "", p.stderr
    return json.loads(p.stdout)["diagnoses"]


def test_a_tpu_or_an_fpga_machine_gets_accelerator_unsupported_and_nothing_else(tmp_path):
    for name, ids in (("tpu", TPU_V5E), ("fpga", XILINX)):
        root = tmp_path / name
        sysfs(root, {"0000:00:04.0": ids})
        ds = diagnoses(root, root)
        assert [(d["rule"], d["symptom"], d["severity"]) for d in ds] == \
            [("accelerator-not-nvidia-facts", "accelerator-unsupported", "info")], name
        assert ("xbutil examine" if name == "fpga" else "tpu-info") in ds[0]["explain"]


def test_an_nvidia_gpu_on_the_bus_without_its_driver_is_still_an_nvidia_fault(tmp_path):
    sysfs(tmp_path, {"0000:07:00.0": NVIDIA_A100, "0000:c1:00.0": AMD_IGPU})
    ds = diagnoses(tmp_path, tmp_path)
    assert "accelerator-not-nvidia-facts" not in [d["rule"] for d in ds]
    assert ds and ds[0]["symptom"] == "driver-not-loaded"


def test_the_probe_report_names_the_accelerators_and_their_tools(tmp_path):
    from troubleshoot.report import probe_text

    snap = copy.deepcopy(BASE)
    snap["accelerators"] = accelerators.probe(sysfs(tmp_path, {"0000:00:04.0": TPU_V5E}))
    line = next(ln for ln in probe_text.render(snap).splitlines() if ln.startswith("other accelerators:"))
    assert line.startswith("other accelerators: Google TPU (1 PCI device): `tpu-info`")
    assert "other accelerators" not in probe_text.render(BASE)
