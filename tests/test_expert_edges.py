"""What someone who runs GPU clusters would check: a PyTorch build for an old driver through CUDA
minor-version compatibility, Fabric Manager facts that a diagnosis reads, a relative --root, and a
file without a final newline in a fix's diff. Through the real CLI (`run_main`)."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest

from conftest import REPO, run_main
from troubleshoot.fixes import journal
from troubleshoot.probes import services
from troubleshoot.probes.base import CmdResult, ProbeContext

BASE = json.loads((REPO / "tests" / "fixtures" / "snapshots" / "base.json").read_text())
MACHINES = REPO / "tests" / "fixtures" / "machines"


def write(tmp_path: Path, snap: dict, name: str = "snap.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(snap))
    return str(path)


# ----------------------------------------------------------------- a PyTorch build for an old driver

def old_driver(driver: str, cuda: str, torch: dict | None, python: str = "3.11.9") -> dict:
    """The base machine (an A100 on driver 555.42.02) with another driver and torch."""
    s = copy.deepcopy(BASE)
    s["nvml"].update(driver_version=driver, cuda_driver_version=cuda)
    s["frameworks"]["python_version"] = python
    if torch is None:
        s["frameworks"]["torch"] = None
    else:
        s["frameworks"]["torch"] = torch
    return s


def fix_rule(tmp_path, snap: dict, rule: str = "torch-driver-too-old", *extra: str):
    return run_main("fix", "--rule", rule, "--snapshot", write(tmp_path, snap), *extra)


def test_a_cuda_11_4_driver_gets_the_installed_release_built_for_cuda_11_8(tmp_path):
    # torch 2.4.1+cu124 on driver 470 (CUDA 11.4): "The NVIDIA driver on your system is too old
    # (found version 11040)". 2.4.1 has a CUDA 11.8 build, which CUDA minor-version compatibility
    # runs on any driver >= 450.80.02.
    p = fix_rule(tmp_path, old_driver("470.82.01", "11.4", {"version": "2.4.1+cu124", "cuda": "12.4"}))
    out = p.stdout.decode()
    assert p.returncode == 0, p.stderr
    assert ("pip install torch==2.4.1+cu118 torchvision==0.19.1+cu118 torchaudio==2.4.1+cu118 "
            "--index-url https://download.pytorch.org/whl/cu118") in out
    assert "minor-version compatibility" in out and "driver ≥ 450.80.02" in out
    assert "PTX JIT compilation needs a driver of CUDA 11.8 or newer" in out
    assert "DOWNGRADE" not in out and "no PyTorch release" not in p.stderr.decode()


def test_without_torch_the_newest_release_with_a_cuda_11_build_is_proposed(tmp_path):
    snap = old_driver("470.82.01", "11.4", None, python="3.12.3")
    p = fix_rule(tmp_path, snap, "torch-driver-too-old", "--format", "json")
    assert p.returncode == 0, p.stderr
    plan = next(pl for pl in json.loads(p.stdout)["plans"] if pl["fixer"] == "match-framework-to-driver")
    argv = plan["steps"][0]["argv"]
    assert argv[3:] == ["install", "torch==2.7.1+cu118", "torchvision==0.22.1+cu118", "torchaudio==2.7.1+cu118",
                        "--index-url", "https://download.pytorch.org/whl/cu118"]


def test_a_cuda_10_2_driver_gets_a_cu102_build_as_pytorch_org_installs_it(tmp_path):
    # No minor-version compatibility before CUDA 11: only a build for CUDA <= 10.2 runs, and
    # releases before 2.0 come from pytorch.org's index beside PyPI.
    snap = old_driver("440.33.01", "10.2", {"version": "1.12.1+cu113", "cuda": "11.3"}, python="3.10.12")
    out = fix_rule(tmp_path, snap).stdout.decode()
    assert ("torch==1.12.1+cu102 torchvision==0.13.1+cu102 torchaudio==0.12.1+cu102 "
            "--extra-index-url https://download.pytorch.org/whl/cu102") in out
    assert "minor-version compatibility" not in out


def test_an_11_0_driver_below_450_80_02_runs_no_cuda_11_8_build(tmp_path):
    # CUDA 11.0's own driver (450.36.06) predates the family's minimum for minor-version
    # compatibility, and Python 3.11 has no wheels of a release with a CUDA <= 11.0 build.
    # The rule's other fix, a newer driver, is still planned: one fixer's refusal hides no other.
    p = fix_rule(tmp_path, old_driver("450.36.06", "11.0", {"version": "2.4.1+cu124", "cuda": "12.4"}))
    err = p.stderr.decode()
    assert p.returncode == 0 and err.startswith("troubleshoot: warning: match-framework-to-driver: ") \
        and err.count("\n") == 1, err
    assert "no PyTorch release in the table with wheels for Python 3.11 runs on it" in err
    assert "(fixer upgrade-driver)" in p.stdout.decode()
    alone = run_main("fix", "match-framework-to-driver", "--snapshot",
                     write(tmp_path, old_driver("450.36.06", "11.0", {"version": "2.4.1+cu124", "cuda": "12.4"})))
    assert alone.returncode == 2 and "no PyTorch release in the table" in alone.stderr.decode()  # named alone: strict


def test_a_build_that_already_relies_on_minor_version_compatibility_is_replaced_by_a_native_one(tmp_path):
    snap = old_driver("535.104.05", "12.2", {"version": "2.5.1+cu124", "cuda": "12.4"})
    out = fix_rule(tmp_path, snap, "torch-cuda-newer-than-driver").stdout.decode()
    assert "torch==2.5.1+cu121 torchvision==0.20.1+cu121 torchaudio==2.5.1+cu121" in out
    assert "already runs on this driver through minor-version compatibility" in out


# ----------------------------------------------------------------- Fabric Manager facts

def fabric(**fm) -> dict:
    """The base machine (4x A100-SXM4 on driver 555.42.02, recorded in
    tests/fixtures/machines/healthy-multi-gpu) with a `fabric_manager` area of the probe's shape
    (troubleshoot/probes/services.py `fabric_manager`): 4 NVSwitches, Fabric Manager 555.42.02
    installed and active, and the fields given changed."""
    s = copy.deepcopy(BASE)
    s["fabric_manager"] = {"available": True, "nvswitch_count": 4, "driver_version": "555.42.02",
                           "version": "555.42.02", "installed": True, "state": "active", "active": True,
                           "version_matches": True}
    s["fabric_manager"].update(fm)
    return s


def diagnoses(tmp_path, snap: dict) -> list[dict]:
    p = run_main("diagnose", "--format", "json", "--snapshot", write(tmp_path, snap))
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)["diagnoses"]


def fabric_rules(ds: list[dict]) -> list[str]:
    return [d["rule"] for d in ds if d["symptom"] == "fabric-manager"]


def test_fabric_manager_550_failed_against_driver_555_is_diagnosed_as_the_version_mismatch(tmp_path):
    ds = diagnoses(tmp_path, fabric(version="550.90.07", state="failed", active=False, version_matches=False))
    assert fabric_rules(ds) == ["fabric-manager-version-mismatch-facts"]  # it refines "not running"
    d = ds[0]
    assert d["symptom"] == "fabric-manager" and d["severity"] == "error" and d["action"] == "restart-fabric-manager"
    evidence = {e["path"]: e["value"] for e in d["evidence"] if e["source"] == "fact"}
    assert evidence["fabric_manager.version"] == "550.90.07"
    assert evidence["fabric_manager.driver_version"] == "555.42.02"
    assert "Fabric Manager 550.90.07 runs only against the driver it was built for" in d["explain"]
    assert "is not running (systemd: `failed`)" in d["explain"]
    assert [f["fixer"] for f in d["fixes"]] == ["fabric-manager", "advice"]


def test_a_newer_fabric_manager_than_the_loaded_driver_says_reboot_before_downgrading(tmp_path):
    ds = diagnoses(tmp_path, fabric(version="560.35.03", driver_version="555.42.02", state="active", active=True))
    d = next(d for d in ds if d["rule"] == "fabric-manager-version-mismatch-facts")
    assert "reboot (or reload the nvidia modules) instead of downgrading" in d["explain"]
    assert "will refuse to start at its next restart" in d["explain"]


@pytest.mark.parametrize("fm, note", [
    ({"state": "failed", "active": False}, "as `failed`"),
    ({"state": "inactive", "active": False}, "as `inactive`"),
    ({"installed": False, "version": None, "state": None, "active": None, "version_matches": None},
     "No Fabric Manager is installed"),
])
def test_fabric_manager_not_running_on_an_nvswitch_machine_is_diagnosed(tmp_path, fm, note):
    ds = diagnoses(tmp_path, fabric(**fm))
    assert fabric_rules(ds) == ["fabric-manager-not-running-facts"]
    d = next(d for d in ds if d["rule"] == "fabric-manager-not-running-facts")
    assert "sees 4 NVSwitch(es)" in d["explain"] and note in d["explain"]
    assert [f["fixer"] for f in d["fixes"]] == ["advice", "fabric-manager"]
    assert "systemctl status nvidia-fabricmanager" in d["fixes"][0]["params"]["text"]
    assert "nvidia-smi -q | grep -i -A2 fabric" in d["fixes"][0]["params"]["text"]


@pytest.mark.parametrize("fm", [
    {},  # running, at the driver's version
    {"nvswitch_count": 0, "state": "failed", "active": False, "version": "550.90.07"},  # no NVSwitch: not needed
    {"state": "activating", "active": False},  # still setting the fabric up
    {"state": None, "active": None},  # no systemd to ask (a container)
])
def test_no_fabric_manager_diagnosis_where_it_is_fine_or_unknown(tmp_path, fm):
    assert fabric_rules(diagnoses(tmp_path, fabric(**fm))) == []


def replay(outputs: dict[str, str]):
    """A runner that answers each command by its name, and a `which` that finds those names."""
    def runner(argv, timeout):
        out = outputs.get(argv[0])
        return CmdResult(tuple(argv), 0 if out is not None else 1, out or "", "")
    return runner, (lambda name: f"/usr/bin/{name}" if name in outputs else None)


def nvswitch_root(tmp_path: Path) -> Path:
    root = tmp_path / "machine"
    for i in range(4):
        (root / f"proc/driver/nvidia-nvswitch/devices/0000:0{i}:00.0").mkdir(parents=True)
    (root / "proc/driver/nvidia").mkdir(parents=True)
    # Recorded: the open kernel module 565.57.01 (tests/fixtures/machines/healthy-multi-gpu/SOURCE.md)
    (root / "proc/driver/nvidia/version").write_text(
        (MACHINES / "healthy-multi-gpu" / "proc-driver-nvidia-version.txt").read_text())
    return root


def test_the_probe_reads_systemds_values_in_the_order_systemctl_prints_them(tmp_path):
    # `systemctl show -p ActiveState,LoadState --value` prints LoadState first (its D-Bus order).
    runner, which = replay({"systemctl": "loaded\nactive\n",
                            "nv-fabricmanager": "Fabric Manager version is : 565.57.01\n"})
    fm = services.fabric_manager(ProbeContext(root=nvswitch_root(tmp_path), runner=runner, which=which, env={}))
    assert fm["state"] == "active" and fm["active"] is True and fm["version_matches"] is True
    s = copy.deepcopy(BASE)
    s["fabric_manager"] = fm
    assert fabric_rules(diagnoses(tmp_path, s)) == []


def test_the_probe_takes_the_installed_package_not_an_old_branchs_leftover(tmp_path):
    # After moving from branch 550 to 565, dpkg still knows nvidia-fabricmanager-550 ("rc": removed,
    # its configuration kept) with its version; only the installed package tells the version.
    runner, which = replay({
        "systemctl": "loaded\nfailed\n",
        "dpkg-query": "rc  nvidia-fabricmanager-550 550.90.07-1\nii  nvidia-fabricmanager-565 565.57.01-1\n"})
    fm = services.fabric_manager(ProbeContext(root=nvswitch_root(tmp_path), runner=runner, which=which, env={}))
    assert fm["version"] == "565.57.01" and fm["installed"] is True and fm["state"] == "failed"
    runner, which = replay({"systemctl": "not-found\ninactive\n",
                            "dpkg-query": "rc  nvidia-fabricmanager-550 550.90.07-1\n"})
    gone = services.fabric_manager(ProbeContext(root=nvswitch_root(tmp_path / "b"), runner=runner, which=which, env={}))
    assert gone["version"] is None and gone["installed"] is False and gone["state"] is None
    s = copy.deepcopy(BASE)
    s["fabric_manager"] = gone
    assert fabric_rules(diagnoses(tmp_path, s)) == ["fabric-manager-not-running-facts"]


# ----------------------------------------------------------------- a relative --root

BLACKLIST = "etc/modprobe.d/blacklist-nouveau.conf"


def nouveau_fix(cwd: Path, root: str, *extra: str):
    return run_main("fix", "--rule", "nouveau-loaded-facts", "--root", root,
                    "--snapshot", str(REPO / "tests" / "fixtures" / "snapshots" / "base.json"), *extra, cwd=cwd)


def test_a_relative_root_is_the_folder_under_the_working_folder_and_no_symlink_note(tmp_path):
    cwd = tmp_path / "work"
    (cwd / "sandbox").mkdir(parents=True)
    p = nouveau_fix(cwd, "./sandbox")
    out = p.stdout.decode()
    assert p.returncode == 0, p.stderr
    assert "is a symlink" not in out, out
    assert f"files under {cwd / 'sandbox'};" in out and f"create: {cwd / 'sandbox' / BLACKLIST}" in out
    applied = nouveau_fix(cwd, "./sandbox", "--apply", "--yes")
    assert applied.returncode == 0, applied.stderr
    assert (cwd / "sandbox" / BLACKLIST).read_text() == "blacklist nouveau\noptions nouveau modeset=0\n"
    [(eid, entry)] = journal.entries()
    assert entry.data["root"] == str(cwd / "sandbox")


def test_a_real_symlink_under_a_relative_root_is_still_reported(tmp_path):
    cwd = tmp_path / "work"
    (cwd / "sandbox" / "etc" / "real-modprobe.d").mkdir(parents=True)
    (cwd / "sandbox" / "etc" / "modprobe.d").symlink_to("real-modprobe.d")
    out = nouveau_fix(cwd, "sandbox").stdout.decode()
    assert f"({cwd / 'sandbox' / BLACKLIST} is a symlink; its target inside the root is edited" in out
    assert f"create: {cwd / 'sandbox' / 'etc' / 'real-modprobe.d' / 'blacklist-nouveau.conf'}" in out


# ----------------------------------------------------------------- a file without a final newline

def test_a_file_without_a_final_newline_shows_diffs_marker_not_two_lines_glued(tmp_path):
    root = tmp_path / "root"
    (root / "etc" / "modprobe.d").mkdir(parents=True)
    (root / BLACKLIST).write_bytes(b"# local\nblacklist nouveau")  # saved by an editor that adds no newline
    out = nouveau_fix(tmp_path, str(root)).stdout.decode()
    diff = out[out.index("@@"):out.index("2. run")].splitlines()
    assert [ln.strip() for ln in diff[1:]] == [
        "# local", "-blacklist nouveau", "\\ No newline at end of file", "+blacklist nouveau",
        "+options nouveau modeset=0"], out
    p = nouveau_fix(tmp_path, str(root), "--format", "json")
    step = json.loads(p.stdout)["plans"][0]["steps"][0]
    assert "-blacklist nouveau\n\\ No newline at end of file\n+blacklist nouveau\n" in step["diff"]
    assert nouveau_fix(tmp_path, str(root), "--apply", "--yes").returncode == 0
    assert (root / BLACKLIST).read_bytes() == b"# local\nblacklist nouveau\noptions nouveau modeset=0\n"
    assert not os.path.islink(root / BLACKLIST)


def test_a_snapshot_that_does_not_name_its_release_says_so_instead_of_calling_the_distribution_unknown(tmp_path):
    """base.json names its system only as "Ubuntu 22.04.4 LTS" (no host.os_id): the driver
    repository's URL needs the release, so the plan says which facts are missing."""
    p = fix_rule(tmp_path, old_driver("470.82.01", "11.4", {"version": "2.4.1+cu124", "cuda": "12.4"}), "torch-driver-too-old",
                 "--format", "json")
    texts = [s["text"] for pl in json.loads(p.stdout)["plans"] for s in pl["steps"] if s["kind"] == "advice"]
    said = next(t for t in texts if t.startswith("Ubuntu 22.04.4 LTS:"))
    assert "the facts do not say which release this is (host.os_id" in said and "not a distribution" not in said
