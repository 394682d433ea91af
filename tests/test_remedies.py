"""Remedies that cannot hurt the machine: limits the kernel accepts, sizes from its memory,
never a shrink, escaped and validated fstab lines, exact framework pins."""

import copy
import json
import shutil

import pytest

from conftest import REPO, run_cli
from troubleshoot.engine.ruleset import load_ruleset
from troubleshoot.errors import TroubleshootError
from troubleshoot.fixes import files
from troubleshoot_fixers.framework import MatchFrameworkToDriver
from troubleshoot_fixers.system import RamDisk, RaiseNofile, RaiseShm, _family

BASE = json.loads((REPO / "tests" / "fixtures" / "snapshots" / "base.json").read_text())


def snap(**io):
    s = copy.deepcopy(BASE)
    s["io"].update(io)
    return s


def plan(fixer, snapshot, **params):
    return fixer.plan(fixer.validate(params), snapshot)


def test_nofile_above_fs_nr_open_is_refused_with_the_reason(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(BASE))
    p = run_cli("fix", "raise-nofile", "--param", "limit=16777216", "--snapshot", str(path))
    assert p.returncode == 2 and b"fs.nr_open (1048576)" in p.stderr and b"PAM" in p.stderr
    assert b"Traceback" not in p.stderr


def test_nofile_is_a_drop_in_with_an_explicit_root_line():
    pl = plan(RaiseNofile(), snap(nofile_soft=1024, nofile_hard=4096), limit=262144)
    (write,) = [a for a in pl.actions if a.kind == "write"]
    assert write.path.startswith("/etc/security/limits.d/")
    assert "root    hard    nofile    262144" in write.content and "*       soft    nofile    262144" in write.content


def test_raise_shm_never_proposes_a_shrink():
    machine = snap(shm_size_mib=24 * 1024, mem_total_mib=64 * 1024)
    for size in ("16G", "24G"):
        pl = plan(RaiseShm(), machine, size=size)
        assert all(a.kind == "advice" for a in pl.actions), size
        assert "already 24 GiB" in pl.actions[0].text
    (cmd,) = [a for a in plan(RaiseShm(), machine).actions if a.kind == "command"]  # auto: half of 64 GiB
    assert "remount,size=32G" in cmd.argv
    pl = plan(RaiseShm(), snap(shm_size_mib=8 * 1024, mem_total_mib=128 * 1024, cgroup_memory_limit_mib=64 * 1024))
    (cmd,) = [a for a in pl.actions if a.kind == "command"]
    assert "remount,size=32G" in cmd.argv  # half of the cgroup's 64 GiB, not of the machine's 128


def test_ramdisk_size_comes_from_memory_and_cgroup_and_is_bounded():
    pl = plan(RamDisk(), snap(mem_available_mib=100 * 1024, cgroup_memory_limit_mib=16 * 1024))
    assert pl.params["size"] == "8G"
    with pytest.raises(TroubleshootError, match="more than half"):
        plan(RamDisk(), snap(mem_total_mib=32 * 1024), size="64G")


@pytest.mark.parametrize("path", ["/../../etc", "/etc/x", "/", "/proc/ramdisk"])
def test_ramdisk_refuses_bad_mount_points(path):
    with pytest.raises(TroubleshootError):
        plan(RamDisk(), BASE, size="1G", path=path)


def test_ramdisk_fstab_pattern_is_escaped(tmp_path):
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    fstab = "UUID=a / ext4 defaults 0 1\ntmpfs /mnt/r_d tmpfs size=1G,mode=1777 0 0\n"
    (root / "etc" / "fstab").write_text(fstab)
    s = tmp_path / "s.json"
    s.write_text(json.dumps(BASE))
    p = run_cli("fix", "ramdisk", "--param", "size=1G", "--param", "path=/mnt/r.d", "--param", "fstab=true",
                "--root", str(root), "--snapshot", str(s), "--apply", "--yes")
    assert p.returncode == 0, p.stderr
    assert (root / "etc" / "fstab").read_text() == fstab + "tmpfs /mnt/r.d tmpfs size=1G,mode=1777 0 0\n"


@pytest.mark.skipif(shutil.which("findmnt") is None, reason="findmnt (util-linux) not installed")
def test_an_fstab_findmnt_cannot_parse_is_refused():
    old = b"UUID=a / ext4 defaults 0 1\n"
    files.check_fstab(old, old + b"tmpfs /mnt/x tmpfs size=1G 0 0\n", on_this_machine=False)
    with pytest.raises(TroubleshootError, match="findmnt --verify"):
        files.check_fstab(old, old + b"tmpfs\n", on_this_machine=False)


def test_a_ramdisk_is_never_the_first_fix_for_a_hung_network_filesystem():
    rules = {r.id: r for r in load_ruleset().rules}
    for rid in ("nfs-server-not-responding", "kernel-hung-task"):
        assert rules[rid].fixes[0].fixer != "ramdisk", rid
    for r in rules.values():
        for f in r.fixes:
            if f.fixer == "ramdisk":
                assert str(dict(f.params).get("size", "auto")) == "auto", r.id


def test_framework_install_pins_one_release_the_driver_supports():
    s = copy.deepcopy(BASE)
    s["nvml"]["cuda_driver_version"] = "12.4"
    s["frameworks"]["torch"] = {**s["frameworks"].get("torch", {}), "version": "2.8.0+cu128", "cuda": "12.8"}
    pl = plan(MatchFrameworkToDriver(), s)
    argv = pl.actions[0].argv
    assert "--upgrade" not in argv and "-U" not in argv
    pins = [a for a in argv if "==" in a]
    assert [p.split("==")[0] for p in pins] == ["torch", "torchvision", "torchaudio"]
    tags = {p.split("+")[1] for p in pins}
    assert len(tags) == 1 and int(tags.pop()[2:]) <= 124
    assert "cu1" in argv[-1] and any("DOWNGRADE" in n for n in pl.notes)


@pytest.mark.parametrize("os_name, family", [("openSUSE Leap 15.5", "suse"), ("SUSE Linux Enterprise Server 15 SP5", "suse"),
                                              ("Arch Linux", "arch"), ("Rocky Linux 9.3 (Blue Onyx)", "redhat"),
                                              ("Ubuntu 22.04.4 LTS", "debian"), ("Gentoo Linux", None)])
def test_distribution_detection(os_name, family):
    s = copy.deepcopy(BASE)
    s["host"]["os"] = os_name
    assert _family(s) == family
