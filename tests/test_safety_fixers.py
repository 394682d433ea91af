"""Fixers that change only what they mean to: every other byte of an edited file kept, no file
content or command argument taken raw from a snapshot, no limit or size lowered, and an
escalation only on evidence. Through the command's main (its arguments, output and exit status)
under a temporary --root."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from conftest import REPO, run_main
from troubleshoot.fixes import files, journal

BASE = json.loads((REPO / "tests" / "fixtures" / "snapshots" / "base.json").read_text())
OLD_LIST = "deb https://nvidia.github.io/nvidia-docker/ubuntu18.04/$(ARCH) /"
# Characters str.splitlines() takes for line breaks, inside quoted strings of one line each.
ODD_BREAKS = ["\x0c", "\x0b", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


def fix(*args: str):
    return run_main("fix", *args)


def machine(tmp_path: Path, name: str = "snap.json", **areas) -> str:
    """The base snapshot with some areas' facts changed (dicts are merged, None drops a key)."""
    s = copy.deepcopy(BASE)
    for area, facts in areas.items():
        s.setdefault(area, {})
        for k, v in facts.items():
            if v is None:
                s[area].pop(k, None)
            else:
                s[area][k] = v
    path = tmp_path / name
    path.write_text(json.dumps(s))
    return str(path)


def put(root: Path, rel: str, data: bytes) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)
    return p


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def one_line_error(p) -> str:
    err = p.stderr.decode()
    assert p.returncode == 2, (p.returncode, err, p.stdout.decode())
    assert "Traceback" not in err and err.count("\n") == 1, err
    return err


def plan_json(p) -> dict:
    assert p.returncode == 0, p.stderr.decode()
    return json.loads(p.stdout)["plans"][0]


# ------------------------------------------------------------------ other lines stay byte for byte

def test_replacing_a_profile_line_keeps_every_other_line_byte_for_byte(tmp_path):
    root = tmp_path / "root"
    odd = "".join(f"echo 'a{c}b'\n" for c in ODD_BREAKS)
    before = f"alias ll='ls -l'\r\n{odd}export MY_VAR=old\r\nPS1='\\u@\\h'\r\n".encode()
    bashrc = put(root, "home/ana/.bashrc", before)
    p = fix("set-env", "--param", "name=MY_VAR", "--param", "value=new", "--param", "profile=/home/ana/.bashrc",
            "--root", str(root), "--apply", "--yes")
    assert p.returncode == 0, p.stderr
    assert bashrc.read_bytes() == before.replace(b"export MY_VAR=old\r\n", b"export MY_VAR=new\r\n")


def test_the_preview_diff_splits_only_at_line_feeds(tmp_path):
    root = tmp_path / "root"
    put(root, "home/ana/.bashrc", "echo 'a\x0cb'\nexport MY_VAR=old\n".encode())
    d = plan_json(fix("set-env", "--param", "name=MY_VAR", "--param", "value=new", "--param",
                      "profile=/home/ana/.bashrc", "--root", str(root), "--format", "json"))["steps"][1]["diff"]
    body = d.split("\n")[3:]
    assert body == [" echo 'a\x0cb'", "-export MY_VAR=old", "+export MY_VAR=new", ""], d


def test_the_preview_diff_marks_a_missing_final_newline(tmp_path):
    root = tmp_path / "root"
    put(root, "home/ana/.bashrc", b"alias ll='ls -l'")
    d = plan_json(fix("set-env", "--param", "name=MY_VAR", "--param", "value=1", "--param",
                      "profile=/home/ana/.bashrc", "--root", str(root), "--format", "json"))["steps"][1]["diff"]
    assert d.split("\n")[3:] == ["-alias ll='ls -l'", "\\ No newline at end of file", "+alias ll='ls -l'",
                                 "+export MY_VAR=1", ""], d


def test_line_edits_split_on_line_feeds_only():
    old = "a\rb\nc\x85d\r\nlast".encode("utf-8", "surrogateescape") + b"\xff"
    assert files.ensured_line(old, "new", r"^c") == "a\rb\nnew\r\nlast".encode() + b"\xff"
    assert files.ensured_line(b"x\r\ny\r\n", "z", None) == b"x\r\ny\r\nz\r\n"
    assert files.ensured_line(b"x\r\ny", "z", None) == b"x\r\ny\r\nz\r\n"
    assert files.diff("f", b"x\n", b"x").endswith("+x\n\\ No newline at end of file\n")


# ------------------------------------------------------------------ apt lines from a snapshot

def _toolkit(tmp_path, root: Path, sources: list) -> tuple:
    snap = machine(tmp_path, host={"os_id": "ubuntu", "os_id_like": "debian", "os_version_id": "22.04"},
                   docker={"toolkit_apt_sources": sources})
    p = fix("nvidia-container-toolkit", "--snapshot", snap, "--root", str(root), "--apply", "--yes")
    return p, tree(root)


def test_a_snapshot_cannot_create_or_append_files_under_etc_apt(tmp_path):
    root = tmp_path / "root"
    put(root, "etc/apt/sources.list", b"deb http://archive.ubuntu.com/ubuntu jammy main\n")
    hook = 'APT::Update::Pre-Invoke {"touch /tmp/owned";};'
    p, after = _toolkit(tmp_path, root, [
        {"path": "/etc/apt/apt.conf.d/99hook", "line": hook},
        {"path": "/etc/apt/sources.list.d/new.list", "line": OLD_LIST},
        {"path": "/etc/apt/sources.list", "line": OLD_LIST},
        {"path": "/etc/apt/sources.list.d/../apt.conf.d/98hook.list", "line": OLD_LIST},
    ])
    assert p.returncode == 0, p.stderr
    assert not [n for n in after if "apt.conf.d" in n or n.endswith("new.list")], list(after)
    assert after["etc/apt/sources.list"] == b"deb http://archive.ubuntu.com/ubuntu jammy main\n"
    assert b"Pre-Invoke" not in b"".join(after.values())


def test_a_line_break_in_a_snapshot_line_never_becomes_an_apt_hook(tmp_path):
    root = tmp_path / "root"
    old = put(root, "etc/apt/sources.list.d/nvidia-docker.list", f"{OLD_LIST}\n".encode())
    for breaker in ("\n", "\x0b", "\u2028"):
        evil = f"{OLD_LIST}{breaker}APT::Update::Pre-Invoke {{\"touch /tmp/owned\";}};"
        p, after = _toolkit(tmp_path, root, [{"path": "/etc/apt/sources.list.d/nvidia-docker.list", "line": evil}])
        assert p.returncode == 0, p.stderr
        assert old.read_bytes() == f"{OLD_LIST}\n".encode(), repr(breaker)
        assert b"Pre-Invoke" not in b"".join(after.values())


def test_only_an_nvidia_repository_line_is_commented_out(tmp_path):
    root = tmp_path / "root"
    main = b"deb http://archive.ubuntu.com/ubuntu jammy main\n"
    put(root, "etc/apt/sources.list", main)
    lst = put(root, "etc/apt/sources.list.d/nvidia-docker.list", f"# keep\n{OLD_LIST}\n".encode())
    p, _ = _toolkit(tmp_path, root, [{"path": "/etc/apt/sources.list", "line": main.decode().strip()},
                                     {"path": "/etc/apt/sources.list.d/nvidia-docker.list", "line": OLD_LIST}])
    assert p.returncode == 0, p.stderr
    assert (root / "etc/apt/sources.list").read_bytes() == main
    lines = lst.read_text().split("\n")
    assert lines[0] == "# keep" and lines[1].startswith("# disabled by troubleshoot") and lines[1].endswith(OLD_LIST)


# ------------------------------------------------------------------ other snapshot values

def never_in_argv(p, value: str) -> None:
    """The value reached no command: refused in one line, or left out of the plan."""
    assert b"Traceback" not in p.stderr, p.stderr.decode()
    if p.returncode == 2:
        one_line_error(p)
        return
    steps = [s for pl in json.loads(p.stdout)["plans"] for s in pl["steps"]]
    assert not [s["argv"] for s in steps if any(value in a for a in s.get("argv") or [])]


def planned(fixer, snapshot: dict, **params):
    return fixer.plan(fixer.validate(params), snapshot)


BAD_NODE_NAMES = [("slurm_node", "gpu[001-512]"), ("slurm_node", "gpu1,gpu2"),
                  ("kubernetes_node", "--selector=gpu=true"), ("kubernetes_node", "-l"),
                  ("kubernetes_node", "k8s gpu")]


@pytest.mark.parametrize("key, value", BAD_NODE_NAMES[::2])
def test_node_names_from_a_snapshot_never_become_options_or_host_lists(tmp_path, key, value):
    snap = machine(tmp_path, node={"available": True, key: value})
    never_in_argv(fix("gpu-fault", "--param", "xid=79", "--param", "pci=0000:91:00.0", "--snapshot", snap,
                      "--format", "json"), value)


@pytest.mark.parametrize("key, value", BAD_NODE_NAMES)
def test_gpu_fault_refuses_a_node_name_that_is_not_one_host(key, value):
    from troubleshoot.fixes.api import FixerError
    from troubleshoot_fixers.gpu_fault import GpuFault

    with pytest.raises(FixerError, match="not a single host name"):
        planned(GpuFault(), {**BASE, "node": {key: value}}, xid=79, pci="0000:91:00.0")


def test_kubectl_gets_the_node_name_after_a_double_dash(tmp_path):
    snap = machine(tmp_path, node={"available": True, "kubernetes_node": "k8s-gpu-3.example.com"})
    pl = plan_json(fix("gpu-fault", "--param", "xid=79", "--param", "pci=0000:91:00.0", "--snapshot", snap,
                       "--format", "json"))
    kubectl = [s["argv"] for s in pl["steps"] if s.get("argv", [""])[0] == "kubectl"]
    assert kubectl and all(a[-2:] == ["--", "k8s-gpu-3.example.com"] for a in kubectl), kubectl


BAD_PYTHONS = ["/tmp/evil", "-c", "python3 -c x", "/opt/py/bin/../../../tmp/python3"]


@pytest.mark.parametrize("python", BAD_PYTHONS[::3])
def test_a_snapshot_interpreter_must_be_a_python(tmp_path, python):
    snap = machine(tmp_path, frameworks={"python": python})
    p = fix("match-framework-to-driver", "--snapshot", snap, "--format", "json")
    never_in_argv(p, python)
    assert p.returncode == 2 or json.loads(p.stdout)["plans"][0]["steps"][0]["argv"][0] != python


@pytest.mark.parametrize("python", BAD_PYTHONS)
def test_framework_fixer_refuses_an_interpreter_that_is_not_a_python(python):
    from troubleshoot.fixes.api import FixerError
    from troubleshoot_fixers.framework import MatchFrameworkToDriver

    snapshot = copy.deepcopy(BASE)
    snapshot["frameworks"]["python"] = python
    with pytest.raises(FixerError, match="interpreter"):
        planned(MatchFrameworkToDriver(), snapshot)


def test_a_snapshot_driver_version_must_be_a_version(tmp_path):
    bad = "550.1 -o APT::Update::Pre-Invoke::=x"
    snap = machine(tmp_path, fabric_manager={"available": True, "version": "550.90.07", "driver_version": bad})
    p = fix("fabric-manager", "--snapshot", snap, "--format", "json")
    never_in_argv(p, "Pre-Invoke")
    if p.returncode == 2:
        assert "driver version" in p.stderr.decode()


def test_a_snapshot_distribution_version_never_reaches_an_install_command(tmp_path):
    snap = machine(tmp_path, host={"os_id": "ubuntu", "os_version_id": "22.04;curl x|sh"},
                   nvml={"driver_version": "470.1"})
    pl = plan_json(fix("upgrade-driver", "--snapshot", snap, "--format", "json"))
    assert "curl x" not in json.dumps(pl)


# ------------------------------------------------------------------ limits and sizes never lowered

def _nofile(tmp_path, limit: str, **io):
    root = tmp_path / "root"
    p = fix("raise-nofile", "--param", f"limit={limit}", "--snapshot", machine(tmp_path, io=io), "--root", str(root),
            "--apply", "--yes")
    return p, root / "etc/security/limits.d/90-troubleshoot-nofile.conf"


def test_raise_nofile_never_lowers_the_hard_limit(tmp_path):
    p, conf = _nofile(tmp_path, "65535", nofile_soft=1024, nofile_hard=1048576)
    assert p.returncode == 0, p.stderr
    lines = [ln.split() for ln in conf.read_text().splitlines() if not ln.startswith("#")]
    assert lines == [["*", "soft", "nofile", "65535"], ["*", "hard", "nofile", "1048576"],
                     ["root", "soft", "nofile", "65535"], ["root", "hard", "nofile", "1048576"]]
    eid = next(e.id for _, e in journal.entries() if isinstance(e, journal.Entry))
    assert run_main("undo", eid).returncode == 0 and not conf.exists()


def test_raise_nofile_writes_nothing_when_both_limits_are_already_higher(tmp_path):
    p, conf = _nofile(tmp_path, "65536", nofile_soft=1048576, nofile_hard=1048576)
    assert p.returncode == 0, p.stderr
    assert not conf.exists()


def test_raise_nofile_refuses_without_the_current_limits(tmp_path):
    p, conf = _nofile(tmp_path, "65536", nofile_soft=None, nofile_hard=None)
    assert "current open-files limits" in one_line_error(p)
    assert not conf.exists()


@pytest.mark.parametrize("fixer", ["ramdisk", "raise-shm"])
@pytest.mark.parametrize("size", ["0", "000m"])
def test_a_zero_size_is_refused(tmp_path, fixer, size):
    err = one_line_error(fix(fixer, "--param", f"size={size}", "--snapshot", machine(tmp_path), "--format", "json"))
    assert "size" in err and "unlimited" in err


def test_raise_shm_refuses_when_the_current_size_is_unknown(tmp_path):
    snap = machine(tmp_path, io={"shm_size_mib": None})
    err = one_line_error(fix("raise-shm", "--param", "size=16G", "--snapshot", snap, "--format", "json"))
    assert "current size of /dev/shm" in err


FSTAB = (b"UUID=abcd / ext4 defaults 0 1\n"
         b"#tmpfs /dev/shm tmpfs defaults 0 0\n"
         b"tmpfs\t/dev/shm  tmpfs   rw,nosuid,nodev,noexec,size=8G  0 0\n"
         b"# the end\n")


def _shm(tmp_path, fstab: bytes, size: str = "32G"):
    root = tmp_path / "root"
    path = put(root, "etc/fstab", fstab)
    snap = machine(tmp_path, io={"shm_size_mib": 8192, "mem_total_mib": 128 * 1024})
    p = fix("raise-shm", "--param", f"size={size}", "--param", "fstab=true", "--snapshot", snap, "--root", str(root),
            "--apply", "--yes")
    return p, path


def test_raise_shm_changes_only_the_size_option_of_the_active_line(tmp_path):
    p, fstab = _shm(tmp_path, FSTAB)
    assert p.returncode == 0, p.stderr
    assert fstab.read_bytes() == FSTAB.replace(b"size=8G", b"size=32G")


def test_raise_shm_adds_a_size_option_and_never_uncomments(tmp_path):
    p, fstab = _shm(tmp_path, b"#tmpfs /dev/shm tmpfs defaults 0 0\ntmpfs /dev/shm tmpfs nosuid,nodev 0 0\n")
    assert p.returncode == 0, p.stderr
    assert fstab.read_bytes() == b"#tmpfs /dev/shm tmpfs defaults 0 0\ntmpfs /dev/shm tmpfs nosuid,nodev,size=32G 0 0\n"


def test_raise_shm_appends_a_line_only_when_no_active_line_exists(tmp_path):
    p, fstab = _shm(tmp_path, b"UUID=abcd / ext4 defaults 0 1\n#tmpfs /dev/shm tmpfs defaults 0 0\n")
    assert p.returncode == 0, p.stderr
    assert fstab.read_bytes() == (b"UUID=abcd / ext4 defaults 0 1\n#tmpfs /dev/shm tmpfs defaults 0 0\n"
                                  b"tmpfs /dev/shm tmpfs defaults,nosuid,nodev,size=32G 0 0\n")


def test_raise_shm_never_lowers_the_size_in_fstab(tmp_path):
    big = FSTAB.replace(b"size=8G", b"size=64G")
    p, fstab = _shm(tmp_path, big)
    assert p.returncode == 0, p.stderr
    assert fstab.read_bytes() == big


def test_option_edit_is_computed_from_the_content_it_is_given():
    from troubleshoot.fixes.plan import LineMatch, SetOption

    rule = LineMatch(r"^\S+\s+/dev/shm/?(?:\s|$)", option=SetOption(3, "size", "32G", never_lower=True))
    line = "tmpfs /dev/shm tmpfs defaults,size=32G 0 0"
    assert files.ensured_line(None, line, rule) == (line + "\n").encode()
    big = b"tmpfs /dev/shm tmpfs size=1T 0 0\n"
    assert files.ensured_line(big, line, rule) == big
    assert files.ensured_line(b"tmpfs /dev/shm tmpfs\n", line, rule) == b"tmpfs /dev/shm tmpfs size=32G\n"


# ------------------------------------------------------------------ the nouveau blacklist

def test_blacklist_nouveau_keeps_the_other_lines_of_an_existing_file(tmp_path):
    root = tmp_path / "root"
    before = b"# site settings\noptions nvidia NVreg_PreserveVideoMemoryAllocations=1\noptions nouveau modeset=1\n"
    conf = put(root, "etc/modprobe.d/blacklist-nouveau.conf", before)
    p = fix("blacklist-nouveau", "--root", str(root), "--snapshot", machine(tmp_path), "--apply", "--yes")
    assert p.returncode == 0, p.stderr
    assert conf.read_bytes() == (b"# site settings\noptions nvidia NVreg_PreserveVideoMemoryAllocations=1\n"
                                 b"options nouveau modeset=0\nblacklist nouveau\n")
    eid = next(e.id for _, e in journal.entries() if isinstance(e, journal.Entry))
    assert run_main("undo", eid).returncode == 0
    assert conf.read_bytes() == before


# ------------------------------------------------------------------ gpu-fault escalation

def _gpu_fault(*args: str) -> dict:
    return plan_json(fix("gpu-fault", "--param", "xid=13", "--param", "pci=0000:3b:00", *args, "--format", "json"))


def test_fixes_applied_under_a_root_do_not_escalate_the_real_machine(tmp_path):
    snap = machine(tmp_path)
    for _ in range(2):  # before, these two made the real machine's next step a reboot
        p = fix("gpu-fault", "--param", "xid=13", "--param", "pci=0000:3b:00", "--snapshot", snap,
                "--root", str(tmp_path / "root"), "--apply", "--yes")
        assert p.returncode == 0, p.stderr
    pl = _gpu_fault("--snapshot", snap)
    assert pl["rung"] == "restart-app"
    assert not [s for s in pl["steps"] if s.get("argv", [""])[0] == "shutdown"]


def test_no_escalation_without_a_fault_seen_after_the_attempt(tmp_path):
    # restart-app is advice only: applying it for real changes nothing on this machine
    snap = machine(tmp_path)
    p = fix("gpu-fault", "--param", "xid=13", "--param", "pci=0000:3b:00", "--snapshot", snap, "--apply", "--yes")
    assert p.returncode == 0, p.stderr
    pl = _gpu_fault("--snapshot", snap)
    assert pl["rung"] == "restart-app" and any("no timed Xid" in n for n in pl["notes"]), pl["notes"]
    line = "NVRM: Xid (PCI:0000:3b:00): 13, Graphics Engine Exception"
    later = machine(tmp_path, "later.json", kernel={"xid_events": [
        {"code": 13, "pci": "0000:3b:00", "line": line, "time": "2999-01-01T00:00:00+00:00", "current": True}]})
    assert _gpu_fault("--snapshot", later)["rung"] == "reset-gpu"


def _reset_attempt(status: str) -> None:
    """A reset-gpu attempt in the journal, its command step with `status`."""
    e = journal.Entry.create("gpu-fault", {"xid": 48}, None, {"title": "t", "ladder": "gpu-fault:0000:3b:00",
                                                             "rung": "reset-gpu"})
    e.data["steps"] = [{"index": 0, "kind": "command", "title": "reset", "status": status,
                        "argv": ["nvidia-smi", "--gpu-reset"], "undo": None}]
    e.data["status"] = "failed" if status == "failed" else "applied"
    e.save()


def test_an_attempt_whose_commands_were_skipped_does_not_count(tmp_path):
    _reset_attempt("skipped")
    line = "NVRM: Xid (PCI:0000:3b:00): 48, An uncorrectable double bit error"
    later = machine(tmp_path, kernel={"xid_events": [
        {"code": 48, "pci": "0000:3b:00", "line": line, "time": "2999-01-01T00:00:00+00:00", "current": True}]})
    pl = plan_json(fix("gpu-fault", "--param", "xid=48", "--param", "pci=0000:3b:00", "--snapshot", later,
                       "--format", "json"))
    assert pl["rung"] == "reset-gpu"


def test_a_step_that_failed_is_evidence_for_the_next_one(tmp_path):
    _reset_attempt("failed")
    pl = plan_json(fix("gpu-fault", "--param", "xid=48", "--param", "pci=0000:3b:00", "--snapshot", machine(tmp_path),
                       "--format", "json"))
    assert pl["rung"] == "reboot" and any("the step itself failed" in n for n in pl["notes"]), pl["notes"]


def test_a_profile_value_with_a_control_character_is_refused(tmp_path):
    for value in ("a\x0bb", "a\u2028b", "a\x1bb"):
        p = fix("set-env", "--param", "name=MY_VAR", "--param", f"value={value}", "--param", "profile=/p/.bashrc",
                "--root", str(tmp_path), "--apply", "--yes")
        assert "control character" in one_line_error(p)
    assert not (tmp_path / "p").exists()
