"""Fixers for real under a temporary --root: apply, check, undo byte for byte; safety rules."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, run_cli, run_main
from troubleshoot.errors import TroubleshootError
from troubleshoot.fixes import executor, journal
from troubleshoot.fixes.plan import Plan, RunCommand, Verify, WriteFile

BASE_SNAPSHOT = REPO / "tests" / "fixtures" / "snapshots" / "base.json"


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def fix(*args, env=None):
    return run_main("fix", *args, env=env)


def last_id() -> str:
    return next(e.id for _, e in journal.entries() if isinstance(e, journal.Entry))


# Every fixer that edits files, with what it must leave under --root, and files that were there before.
FILE_FIXERS = [
    ("blacklist-nouveau", [], {},
     {"etc/modprobe.d/blacklist-nouveau.conf": b"blacklist nouveau\noptions nouveau modeset=0\n"}),
    ("nvidia-container-toolkit", ["--param", "install=false"],
     {"etc/docker/daemon.json": b'{\n  "log-driver": "json-file",\n  "data-root": "/data/docker",\n'
                                b'  "runtimes": {"crun": {"path": "/usr/bin/crun"}}\n}\n'},
     None),
    ("nvidia-container-toolkit", [], {}, None),
    ("ramdisk", ["--param", "size=8G", "--param", "fstab=true"], {"etc/fstab": b"UUID=abcd / ext4 defaults 0 1\n"},
     {"etc/fstab": b"UUID=abcd / ext4 defaults 0 1\ntmpfs /mnt/ramdisk tmpfs size=8G,mode=1777 0 0\n"}),
    ("raise-shm", ["--param", "size=300G", "--param", "fstab=true"],
     {"etc/fstab": b"UUID=abcd / ext4 defaults 0 1\ntmpfs /dev/shm tmpfs defaults 0 0\n"},
     {"etc/fstab": b"UUID=abcd / ext4 defaults 0 1\ntmpfs /dev/shm tmpfs defaults,size=300G 0 0\n"}),
    ("set-env", ["--param", "name=PYTORCH_CUDA_ALLOC_CONF", "--param", "value=expandable_segments:True",
                 "--param", "profile=/home/ana/.bashrc"], {"home/ana/.bashrc": b"alias ll='ls -l'\n"},
     {"home/ana/.bashrc": b"alias ll='ls -l'\nexport PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n"}),
]


@pytest.mark.parametrize("fixer, params, before, expected", FILE_FIXERS,
                         ids=[f"{f[0]}-{i}" for i, f in enumerate(FILE_FIXERS)])
def test_file_fixers_apply_under_root_and_undo_byte_for_byte(tmp_path, fixer, params, before, expected):
    root = tmp_path / "root"
    for rel, data in before.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    if before:
        os.chmod(root / next(iter(before)), 0o640)
    original = tree(root)
    args = [fixer, *params, "--root", str(root), "--snapshot", str(BASE_SNAPSHOT)]
    dry = fix(*args)
    assert dry.returncode == 0, dry.stderr
    assert tree(root) == original, "the dry run changed something"
    p = fix(*args, "--apply", "--yes")
    assert p.returncode == 0, p.stderr + p.stdout
    after = tree(root)
    assert after != original
    if expected:
        for rel, data in expected.items():
            assert after[rel] == data
    if fixer == "nvidia-container-toolkit":
        daemon = json.loads(after["etc/docker/daemon.json"])
        assert daemon["runtimes"]["nvidia"]["path"] == "nvidia-container-runtime"
        if before:  # every other key kept
            assert daemon["log-driver"] == "json-file" and daemon["data-root"] == "/data/docker"
            assert daemon["runtimes"]["crun"] == {"path": "/usr/bin/crun"}
    if before:
        assert oct((root / next(iter(before))).stat().st_mode & 0o777) == oct(0o640), "permissions kept"
    has_commands = any(ln.split(". ", 1)[-1].startswith("run") for ln in dry.stdout.decode().splitlines())
    assert ("skipped: not run under --root" in p.stdout.decode()) == has_commands
    u = run_main("undo", last_id())
    assert u.returncode == 0, u.stderr
    assert tree(root) == original


def test_blacklist_nouveau_verifies_through_the_kernel_probe(tmp_path):
    p = fix("blacklist-nouveau", "--root", str(tmp_path), "--snapshot", str(BASE_SNAPSHOT), "--apply", "--yes")
    out = p.stdout.decode()
    assert "verified: kernel.nouveau_blacklisted == true: True" in out
    assert "not run under --root: update-initramfs -u" in out


def test_shell_metacharacters_stay_data(tmp_path):
    marker = tmp_path / "pwned"
    evil = f"$(touch {marker}); `touch {marker}`; touch {marker} && echo x\n rm -rf /"
    # As a file's content: quoted, never run.
    one_line = evil.replace("\n", " ")
    p = fix("set-env", "--param", "name=MY_VAR", "--param", f"value={one_line}", "--param", "profile=/p/.bashrc",
            "--root", str(tmp_path / "r"), "--apply", "--yes")
    assert p.returncode == 0, p.stderr
    import shlex

    line = (tmp_path / "r" / "p" / ".bashrc").read_text().splitlines()[0]
    assert shlex.split(line) == ["export", f"MY_VAR={one_line}"]
    p = fix("set-env", "--param", "name=MY_VAR", "--param", f"value={evil}", "--param", "profile=/p/.bashrc",
            "--root", str(tmp_path / "r2"), "--apply", "--yes")
    assert p.returncode == 2 and "line break" in p.stderr.decode()
    # As a command argument: one argv element, run for real, printed back verbatim.
    plan = Plan("t", "t", {}, (RunCommand(("printf", "%s", evil)),))
    out = executor.apply(executor.prepare(plan))
    assert out.failed is None
    rec = journal.load(out.entry.id).data["steps"][0]
    assert rec["output"] == evil and rec["argv"] == ["printf", "%s", evil]
    assert not marker.exists()
    # A parameter with a declared format refuses metacharacters outright.
    bad = fix("ramdisk", "--param", f"path=/mnt/x;touch {marker}", "--root", str(tmp_path), "--no-probe")
    assert bad.returncode == 2 and "is not valid" in bad.stderr.decode()
    assert not marker.exists()


def test_commands_are_never_shell_strings():
    with pytest.raises(TypeError):
        RunCommand("rm -rf /tmp/x")


def test_root_is_refused_with_the_exact_sudo_line(tmp_path, monkeypatch):
    monkeypatch.setattr(executor, "_is_root", lambda: False)
    target = tmp_path / "etc" / "modprobe.d" / "x.conf"
    plan = Plan("blacklist-nouveau", "t", {"k": "v w"},
                (WriteFile(str(target), "a\n", needs_root=True), RunCommand(("true",), needs_root=True)))
    prep = executor.prepare(plan)
    with pytest.raises(TroubleshootError) as exc:
        executor.apply(prep)
    assert "sudo troubleshoot fix blacklist-nouveau --param 'k=v w' --apply" in str(exc.value)
    assert "Nothing was changed" in str(exc.value)
    assert not target.exists() and journal.entries() == []


def test_a_crash_between_steps_leaves_files_old_or_new_and_undo_restores(tmp_path):
    a, b = tmp_path / "a.conf", tmp_path / "b.conf"
    a.write_text("old a\n")
    b.write_text("old b\n")
    script = f"""
import os, sys
from troubleshoot.fixes import executor
from troubleshoot.fixes.plan import Plan, WriteFile
plan = Plan("t", "two files", {{}}, (WriteFile({str(a)!r}, "new a\\n"), WriteFile({str(b)!r}, "new b\\n")))
executor._after_step = lambda i: os._exit(137) if i == 0 else None   # killed after the first file
executor.apply(executor.prepare(plan))
"""
    p = subprocess.run([sys.executable, "-c", script], env=dict(os.environ), capture_output=True)
    assert p.returncode == 137
    assert a.read_text() == "new a\n" and b.read_text() == "old b\n"
    eid = last_id()
    assert journal.load(eid).data["status"] == "applying"
    u = run_main("undo", eid)
    assert u.returncode == 0, u.stderr
    assert a.read_text() == "old a\n" and b.read_text() == "old b\n"
    assert not list(tmp_path.glob(".*.tmp"))


def test_failure_mid_plan_stops_and_is_restorable(tmp_path):
    a = tmp_path / "a.conf"
    a.write_text("old\n")
    plan = Plan("t", "t", {}, (WriteFile(str(a), "new\n"), RunCommand(("false",)), WriteFile(str(tmp_path / "c"), "c")))
    out = executor.apply(executor.prepare(plan))
    assert out.failed and "step 2" in out.failed and "exited 1" in out.failed
    assert not (tmp_path / "c").exists()
    res = executor.undo(out.entry.id)
    assert a.read_text() == "old\n" and res.restored == [str(a)]


def test_failed_verification_is_recorded(tmp_path):
    plan = Plan("t", "t", {}, (WriteFile(str(tmp_path / "x"), "x"),),
                verify=Verify("never", condition="kernel.nouveau_blacklisted == true", probes=("kernel",)))
    prep = executor.prepare(plan)
    out = executor.apply(prep)
    executor.verify(prep, out, probe=lambda names, root: {"kernel": {"nouveau_blacklisted": False}})
    assert out.verified is False
    assert journal.load(out.entry.id).data["status"] == "verify-failed"


def test_corrupt_journal_is_reported_not_trusted(tmp_path):
    plan = Plan("t", "t", {}, (WriteFile(str(tmp_path / "x"), "x"),))
    out = executor.apply(executor.prepare(plan))
    (out.entry.folder / "journal.json").write_text('{"schema": 1, "steps": [')
    p = run_main("undo", out.entry.id)
    assert p.returncode == 2 and "is corrupt" in p.stderr.decode() and "not trusting" in p.stderr.decode()
    assert "corrupt" in run_main("history").stdout.decode()


def test_fix_from_a_rule_uses_values_from_the_log():
    p = fix("--rule", "torch-cuda-oom-fragmentation", "--log", str(REPO / "examples" / "logs" / "cuda-oom.log"),
            "--format", "json", "--no-probe")
    plans = json.loads(p.stdout)["plans"]
    env = next(pl for pl in plans if pl["fixer"] == "set-env")
    assert env["steps"][0]["text"] == "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
    advice = next(pl for pl in plans if pl["fixer"] == "gpu-memory-advice")
    assert advice["params"]["requested"] == "2.00 GiB" and "2.00 GiB" in advice["steps"][0]["text"]


def test_bad_parameters_are_clear_errors():
    for args, fragment in ((["raise-nofile", "--param", "limit=lots"], "expected a whole number"),
                           (["raise-nofile", "--param", "limt=5"], "unknown parameter 'limt'"),
                           (["set-env", "--param", "name=1BAD", "--param", "value=x"], "is not valid"),
                           (["advice"], "parameter 'text' is required"),
                           (["no-such-fixer"], "no fixer 'no-such-fixer'")):
        p = fix(*args, "--no-probe")
        err = p.stderr.decode()
        assert p.returncode == 2 and fragment in err and err.count("\n") == 1, (args, err)


def test_gpu_fault_starts_at_the_catalog_rung_and_rehearsals_under_a_root_never_escalate(tmp_path):
    def propose(xid):
        p = fix("gpu-fault", "--param", f"xid={xid}", "--param", "pci=0000:3b:00", "--format", "json",
                "--snapshot", str(BASE_SNAPSHOT), "--root", str(tmp_path))
        return json.loads(p.stdout)["plans"][0]["rung"]

    assert propose(79) == "reboot"  # NVIDIA's catalog: Xid 79 needs a reboot
    assert propose(13) == "restart-app"  # application error: restart first
    # Fixes rehearsed under --root ran nothing on this machine: they never move its ladder.
    for _ in range(2):
        p = fix("gpu-fault", "--param", "xid=13", "--param", "pci=0000:3b:00", "--root", str(tmp_path),
                "--snapshot", str(BASE_SNAPSHOT), "--apply", "--yes")
        assert p.returncode == 0, p.stderr
    assert propose(13) == "restart-app"
    # Another GPU has its own ladder.
    p = fix("gpu-fault", "--param", "xid=13", "--param", "pci=0000:5e:00", "--format", "json", "--no-probe")
    assert json.loads(p.stdout)["plans"][0]["rung"] == "restart-app"


def test_history_lists_and_json(tmp_path):
    fix("blacklist-nouveau", "--root", str(tmp_path), "--snapshot", str(BASE_SNAPSHOT), "--apply", "--yes")
    rows = json.loads(run_main("history", "--format", "json").stdout)["history"]
    assert rows[0]["fixer"] == "blacklist-nouveau" and rows[0]["status"] == "applied"
    assert rows[0]["root"] == str(tmp_path)


@pytest.mark.slow  # pip installs a package into a fresh venv: seconds of the default suite's three minutes
def test_third_party_fixer_package_installs_and_a_team_rule_uses_it(tmp_path):
    site = tmp_path / "site"
    pkg = REPO / "docs" / "examples" / "troubleshoot-acme"
    p = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                        "--target", str(site), str(pkg)], capture_output=True, cwd=tmp_path)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    env = dict(os.environ, PYTHONPATH=str(site))
    listed = json.loads(run_cli("fixers", "list", "--format", "json", env=env).stdout)["fixers"]
    acme = next(f for f in listed if f["id"] == "acme-nccl-interface")
    assert acme["plugin"] == "acme_troubleshoot.plugin"
    rules = pkg / "team-rules"
    lint = run_cli("rules", "lint", "--rules", str(rules), env=env)
    assert lint.returncode == 0, lint.stdout
    log = tmp_path / "job.log"
    log.write_text("node3:123:140 [0] NCCL INFO NET/Plugin : No plugin found\n"
                   "node3:123:140 [0] NCCL WARN Bootstrap : no socket interface found\n")
    d = json.loads(run_cli("diagnose", "--format", "json", "--no-probe", "--rules", str(rules), "--log", str(log),
                           env=env).stdout)["diagnoses"][0]
    assert d["rule"] == "acme-nccl-no-fabric-interface" and d["fixes"][0]["fixer"] == "acme-nccl-interface"
    root = tmp_path / "image"
    p = run_cli("fix", "--rule", "acme-nccl-no-fabric-interface", "--rules", str(rules), "--log", str(log),
                "--root", str(root), "--apply", "--yes", "--no-probe", env=env)
    assert p.returncode == 0, p.stderr
    assert (root / "etc" / "nccl.conf").read_text() == "NCCL_SOCKET_IFNAME=ib0\nNCCL_IB_DISABLE=0\n"
    # Without the package installed, lint says the rule's fixer does not exist.
    lint = run_cli("rules", "lint", "--rules", str(rules))
    assert lint.returncode == 2 and "acme-nccl-interface" in lint.stdout.decode()
