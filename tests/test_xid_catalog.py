"""The Xid catalog as data (rules/xid-catalog.yaml) and the Xid rules that take symptom,
severity and action from it.

Xid lines below are real: from NVIDIA's catalog examples, leptonai/gpud's kmsg/xid test data
(components/accelerator/nvidia/xid/*_test.go), NVSentinel issues, and the threads named in
rules/faults.yaml. The old (`Xid (0000:03:00)`), current (`Xid (PCI:0000:91:00)`) and
timestamped `journalctl -k` / `dmesg -T` forms of each class are checked.
"""

from __future__ import annotations

import json

import pytest
import yaml

from conftest import REPO
from troubleshoot import pipeline
from troubleshoot.engine.ruleset import load_ruleset
from troubleshoot.engine.gpufaults import verdict
from troubleshoot.engine.xid import load_catalog
from troubleshoot.report import jsonfmt, text


@pytest.fixture(scope="module")
def shipped():
    return load_ruleset(use_config=False)


def top(log: str, ruleset, facts=None):
    ds = pipeline.run(None, ruleset=ruleset, log_text=log, facts=facts).diagnoses
    assert ds, log
    return ds[0]


def test_catalog_has_every_code_and_consistent_vocabulary():
    cat = load_catalog()
    assert set(cat.xids) == set(range(1, 173))
    assert cat.version == "2025-10-29"
    taxonomy = yaml.safe_load((REPO / "rules" / "symptoms.yaml").read_text())["symptoms"]
    assert set(cat.classes.values()) <= set(taxonomy)
    assert {"ignore", "restart-app", "reset-gpu", "reboot", "contact-support", "check-mechanicals",
            "restart-fabric-manager"} <= set(cat.actions)
    assert set(cat.buckets.values()) <= set(cat.actions)
    schema = json.loads((REPO / "docs" / "rule.schema.json").read_text())
    assert schema["$defs"]["rule"]["properties"]["action"]["enum"] == list(cat.actions)
    # the catalog's own buckets, as NVIDIA files them
    expect = {13: "restart-app", 31: "restart-app", 43: "ignore", 46: "reset-gpu", 48: "reset-gpu", 54: "check-mechanicals",
              63: "ignore", 74: "contact-support", 79: "reboot", 94: "restart-app", 95: "reset-gpu", 110: "reset-gpu",
              119: "reset-gpu", 151: "reboot"}
    for code, action in expect.items():
        assert cat.buckets[cat.xids[code].immediate] == action, code
    assert {cat.xids[c].cls for c in (13, 31, 43)} == {"application"}
    assert cat.classes["application"] == "illegal-memory-access"
    # the codes that need their line or the rest of the log, named by the catalog's own data
    assert cat.decoded == frozenset(range(144, 151))
    assert cat.follows_other == {45} and cat.recovery_changes == {154}


# (line, symptom, action): one line per catalog class, from public logs and fixtures.
CLASS_LINES = [
    # application (the job's own fault)
    ("NVRM: Xid (PCI:0000:01:00): 13, Graphics SM Warp Exception on (GPC 1, TPC 0): Out Of Range Address",
     "illegal-memory-access", "restart-app"),
    ("NVRM: Xid (PCI:0000:08:00): 31, pid=169800, name=chrome, Ch 00000023, intr 00000000. MMU Fault: ENGINE CE0 "
     "HUBCLIENT_HSCE0 faulted @ 0x0_0abe0000. Fault is of type FAULT_PTE ACCESS_TYPE_VIRT_READ",
     "illegal-memory-access", "restart-app"),
    ("NVRM: Xid (PCI:0000:01:00): 43, Ch 00000020, engmask 00000101", "illegal-memory-access", "ignore"),
    # memory
    ("NVRM: Xid (PCI:0000:8a:00): 48, An uncorrectable double bit error (DBE) has been detected on GPU in the "
     "framebuffer at partition 4, subpartition 1", "gpu-hardware-fault", "reset-gpu"),
    ("NVRM: Xid (PCI:0000:01:00): 94, pid=7062, Contained: CE User Channel (0x9). RST: No, D-RST: No",
     "gpu-hardware-fault", "restart-app"),
    ("NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to activate.",
     "gpu-hardware-fault", "ignore"),
    # nvlink
    ("NVRM: Xid (PCI:0000:c1:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error detected on link 1",
     "gpu-hardware-fault", "contact-support"),
    # gsp / firmware
    ("NVRM: Xid (PCI:0002:00:00): 119, pid=1582259, name=nvc:[driver], Timeout after 6s of waiting for RPC response "
     "from GPU1 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20802a02 0x8).", "gpu-hardware-fault", "reset-gpu"),
    ("NVRM: Xid (PCI:0000:01:00): 62, 224f811e 0000 00000000", "gpu-hardware-fault", "reset-gpu"),
    # power
    ("NVRM: Xid (PCI:0000:02:00): 54, pid=0, Auxiliary power is not connected to the GPU board",
     "gpu-hardware-fault", "check-mechanicals"),
    # bus
    ("NVRM: Xid (PCI:0000:05:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
     "gpu-hardware-fault", "reboot"),
    # driver / other
    ("NVRM: Xid (PCI:0000:01:00): 46, pid=2710, name=python, Ch 00000008", "gpu-hardware-fault", "reset-gpu"),
    ("NVRM: Xid (PCI:0000:3b:00): 151, pid=12, name=python3, Key rotation Error", "gpu-hardware-fault", "reboot"),
]


def _forms(line: str) -> list[str]:
    """The line as the old driver, current driver, `journalctl -k` and `dmesg -T` print it."""
    old = line.replace("Xid (PCI:", "Xid (")
    return [line, old, f"[ 7433.091255] {line}", f"Dec 01 08:01:59 gpu-node-07 kernel: {line}",
            f"[Tue Dec  1 08:01:59 2026] {line}"]


@pytest.mark.parametrize("line,symptom,action", CLASS_LINES, ids=[ln.split("): ")[1][:3].strip(",") for ln, *_ in CLASS_LINES])
def test_each_catalog_class_in_every_log_format(line, symptom, action, shipped):
    code = int(line.split("): ")[1].split(",")[0])
    for form in _forms(line):
        d = top(form, shipped)
        assert (d.symptom, d.action) == (symptom, action), form
        assert d.xid["code"] == code and d.xid["name"] == load_catalog().xids[code].name
        assert d.xid["pci"] and d.xid["pci"].endswith(line.split("PCI:")[1][5:10])


def test_nvlink5_lines_are_decoded_by_the_catalog_table(shipped):
    # gpud fixtures (kmsg_test.go): NETIR link-down on a GB200, subcode bits 20-25 of IntrInfo
    fatal = "NVRM: Xid (PCI:0008:01:00): 149, NETIR_LINK_EVT  Fatal   XC0 i0 Link 01 (0x021425c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)"
    v = verdict(149, fatal)
    assert (v.action, v.severity) == ("reset-gpu", "error") and "decoded" in v.detail
    # same unit, non-fatal rows of the table: SAW_MVB status 0x1 is IGNORE / Non-fatal
    nonfatal = "NVRM: Xid (PCI:0000:04:00): 144, SAW_MVB Nonfatal XC0 i0 Link 00 (0x00000001 0x00000001 0x00000000 0x00000000)"
    v = verdict(144, nonfatal)
    assert v.action == "ignore" and v.severity == "info"
    d = top(fatal, shipped)
    assert (d.symptom, d.action, d.severity) == ("gpu-hardware-fault", "reset-gpu", "error")
    d = top(nonfatal, shipped)
    assert d.action == "ignore" and d.severity != "error"
    # a unit the table lacks falls back to the line's own Fatal/Nonfatal word
    assert verdict(145, "NVRM: Xid (PCI:0000:5f:00): 145, RLW_REMAP Nonfatal XC0 i0 Link 02").action == "ignore"
    assert verdict(149, "NVRM: Xid (PCI:0019:01:00): 149, NETIR Fatal XC0 i0 Link -1").action == "reset-gpu"


def test_xid_154_takes_the_named_recovery_action(shipped):
    log = ("Sep 19 10:30:06 cn02 kernel: NVRM: Xid (PCI:0009:01:00): 149, NETIR_LINK_EVT  Fatal   XC0 i0 Link 00 "
           "(0x021405c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)\n"
           "Sep 19 10:30:06 cn02 kernel: NVRM: Xid (PCI:0009:01:00): 154, GPU recovery action changed from 0x0 (None) "
           "to 0x4 (Drain and Reset)\n")
    ds = pipeline.run(None, ruleset=shipped, log_text=log).diagnoses
    by_code = {d.xid["code"]: d for d in ds if d.xid}
    assert by_code[154].action == "reset-gpu"  # "Drain and Reset": the reset plan drains first
    assert by_code[149].action == "reset-gpu"
    assert ds[0].xid["code"] == 149  # 154 is about the fault before it: the fault leads
    reboot = "NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"
    assert top(reboot, shipped).action == "reboot"
    # the latest change is the one in force
    later = ("NVRM: Xid (PCI:0008:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x4 (Drain and Reset)\n"
             "NVRM: Xid (PCI:0008:01:00): 154, GPU recovery action changed from 0x4 (Drain and Reset) to 0x1 (GPU Reset Required)\n")
    assert top(later, shipped).action == "reset-gpu"
    p2p = "NVRM: Xid (PCI:0008:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x3 (Drain P2P)"
    assert top(p2p, shipped).action == "drain-p2p"
    # after Xid 79 a 154 asking only for a reset does not lower the fault's reboot
    fell = ("NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.\n"
            "NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)\n")
    d = top(fell, shipped)
    assert (d.xid["code"], d.action) == (79, "reboot")


def test_xid_45_follows_the_other_xid_and_alone_restarts_fabric_manager_on_nvswitch(shipped):
    with_other = ("kernel: NVRM: Xid (PCI:0000:dc:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error\n"
                  "kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001\n")
    d = top(with_other, shipped)
    assert d.xid["code"] == 48 and d.action == "reset-gpu"
    solo = "kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001"
    assert top(solo, shipped).action == "ignore"
    nvswitch = {"fabric_manager": {"installed": True, "nvswitch_count": 4}}
    d = top(solo, shipped, facts=nvswitch)
    assert d.action == "restart-fabric-manager"


def test_one_diagnosis_per_code_and_the_contract_keys(shipped):
    log = ("[ 1843.1] NVRM: Xid (PCI:0000:91:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n"
           "[ 1844.2] NVRM: Xid (PCI:0000:3b:00): 13, pid=99, name=python3, Graphics SM Warp Exception\n"
           "[ 1845.3] NVRM: Xid (PCI:0000:3b:00): 32, Channel ID 00000000 intr 00004000\n")
    ds = pipeline.run(None, ruleset=shipped, log_text=log).diagnoses
    codes = sorted(d.xid["code"] for d in ds if d.xid)
    assert codes == [13, 32, 79]
    assert ds[0].xid["code"] == 79  # the reboot-class fault first
    doc = json.loads(jsonfmt.render(ds))
    assert doc["schema"] == 1
    first = doc["diagnoses"][0]
    assert first["action"] == "reboot"
    assert first["xid"] == {"code": 79, "pci": "0000:91:00", "name": "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS"}
    assert all("action" in x and "xid" in x for x in doc["diagnoses"])
    out = text.render(ds)
    assert "Action: drain and reboot the node (Xid 79 on 0000:91:00)" in out


def test_benign_nvrm_lines_give_no_error(shipped):
    benign = """\
[    4.123456] nvidia: loading out-of-tree module taints kernel.
[    4.234567] nvidia-nvlink: Nvlink Core is being initialized, major device number 511
[    4.345678] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023
[    4.456789] nvidia-modeset: Loading NVIDIA Kernel Mode Setting Driver for UNIX platforms  535.104.05
[    4.567890] [drm] [nvidia-drm] [GPU ID 0x00000100] Loading driver
[    5.678901] NVRM: GPU at PCI:0000:01:00: GPU-2f6b1b4e-2b8f-5e7f-3c3a-4b1a3d2e1f00
[    5.789012] NVRM: GPU Board Serial Number: 1320000000000
[    6.890123] nvidia-persistenced[1234]: Started (1234)
[    6.901234] nvidia-uvm: Loaded the UVM driver, major device number 509.
"""
    ds = pipeline.run(None, ruleset=shipped, log_text=benign).diagnoses
    assert [d.rule.id for d in ds if d.severity == "error"] == []
