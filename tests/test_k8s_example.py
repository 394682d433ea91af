"""The Kubernetes example (docs/examples/kubernetes): the manifest parses and names the folder and
the interval its README names, and its container command, run for real by /bin/sh with a fake
`troubleshoot` first on PATH, takes a snapshot every interval and renames each into place, which
`troubleshoot fleet diagnose` then reads. Every wait is on the script's own output lines."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap

import pytest
import yaml
from conftest import REPO, run_cli
from procwait import Output

EXAMPLE = REPO / "docs" / "examples" / "kubernetes"
MANIFEST = EXAMPLE / "troubleshoot-probe-daemonset.yaml"
README = EXAMPLE / "README.md"
BASE = REPO / "tests" / "fixtures" / "snapshots" / "base.json"

# A `troubleshoot probe --format json --save PATH` that writes the base snapshot with this node's
# name and a collected_at that counts its calls (second N), in two writes: a loop that saved
# straight to <node>.json would show a reader half a snapshot. From call FAKE_FAIL_FROM on, it
# fails with exit status 3 instead.
FAKE = textwrap.dedent("""\
    import json, os, sys
    args = sys.argv[1:]
    assert args[:3] == ["probe", "--format", "json"] and args[3] == "--save", args
    counter = os.environ["FAKE_COUNTER"]
    n = int(open(counter).read() or 0) + 1 if os.path.exists(counter) else 1
    open(counter, "w").write(str(n))
    if n >= int(os.environ.get("FAKE_FAIL_FROM") or n + 1):
        sys.exit(3)
    snap = json.load(open(os.environ["FAKE_SNAPSHOT"]))
    snap["host"]["hostname"] = os.environ["NODE_NAME"]
    snap["collected_at"] = f"2024-06-01T10:00:{n:02d}+00:00"
    text = json.dumps(snap)
    with open(args[4], "w") as f:
        f.write(text[:100])
        f.flush()
        f.write(text[100:])
    print(text)  # the snapshot on stdout, as the real command prints it
""")


def manifest() -> dict:
    docs = [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]
    assert [d["kind"] for d in docs] == ["DaemonSet"]
    return docs[0]


def container() -> dict:
    (c,) = manifest()["spec"]["template"]["spec"]["containers"]
    return c


def env_of(c: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in c["env"] if "value" in e}


def start(tmp_path, shell: str | None = None, **env: str) -> tuple[subprocess.Popen, dict]:
    """The container's command as the kubelet runs it, with a fake troubleshoot first on PATH;
    `shell`: another shell in place of /bin/sh (images differ: dash on Debian, bash on RHEL)."""
    c = container()
    bin_dir, snaps = tmp_path / "bin", tmp_path / "snaps"
    bin_dir.mkdir()
    snaps.mkdir()
    (tmp_path / "fake.py").write_text(FAKE)
    fake = bin_dir / "troubleshoot"
    fake.write_text('#!/bin/sh\nexec "$FAKE_PYTHON" "$FAKE_SCRIPT" "$@"\n')
    fake.chmod(0o755)
    full = {**env_of(c), "PATH": f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin", "NODE_NAME": "gpu-node-07",
            "SNAPSHOT_DIR": str(snaps), "PROBE_INTERVAL_SECONDS": "0.05", "XDG_CACHE_HOME": str(tmp_path / "cache"),
            "XDG_STATE_HOME": str(tmp_path / "state"), "FAKE_PYTHON": sys.executable,
            "FAKE_SCRIPT": str(tmp_path / "fake.py"), "FAKE_COUNTER": str(tmp_path / "calls"),
            "FAKE_SNAPSHOT": str(BASE), **env}
    command = [shell or c["command"][0], *c["command"][1:]]
    proc = subprocess.Popen([*command, *c["args"]], env=full, cwd=tmp_path, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return proc, full


def stop(proc: subprocess.Popen) -> tuple[int, bytes]:
    try:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        return proc.returncode, err
    finally:
        proc.kill()


def test_the_manifest_parses_and_names_the_folder_the_interval_and_the_command_the_readme_names():
    pod = manifest()["spec"]["template"]["spec"]
    c = container()
    readme = README.read_text()
    (host_path,) = [v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v]
    (mount,) = [m["mountPath"] for m in c["volumeMounts"] if m["name"] == "snapshots"]
    env = env_of(c)
    assert host_path == "/var/lib/troubleshoot/snapshots" and f"`{host_path}`" in readme
    assert env["SNAPSHOT_DIR"] == mount and f"mounted at `{mount}`, which `SNAPSHOT_DIR` names" in readme
    assert env["PROBE_INTERVAL_SECONDS"] == "300" and "`PROBE_INTERVAL_SECONDS` (default `300`" in readme
    assert c["command"] == ["/bin/sh", "-c"] and len(c["args"]) == 1
    assert "troubleshoot probe --format json --save" in c["args"][0]
    assert "troubleshoot fleet diagnose snaps/" in readme and "CronJob" in readme
    assert "kubectl -n kube-system set env ds/troubleshoot-probe PROBE_INTERVAL_SECONDS=60" in readme
    assert manifest()["metadata"]["name"] == "troubleshoot-probe" and "ds/troubleshoot-probe" in readme


SHELLS = [None] + [s for s in ("/bin/dash", "/bin/bash") if os.path.exists(s)]


@pytest.mark.parametrize("shell", SHELLS, ids=lambda s: s or "/bin/sh")
def test_the_container_takes_a_snapshot_every_interval_and_renames_each_into_place(tmp_path, shell):
    proc, _ = start(tmp_path, shell)
    snaps = tmp_path / "snaps"
    final = snaps / "gpu-node-07.json"
    try:
        out = Output(proc.stdout)
        first = out.wait_for(b" saved ", timeout=60).decode()
        assert re.fullmatch(rf"troubleshoot-probe: \d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\dZ saved {final}\n", first)
        out.wait_for(b" saved ", timeout=60)
        taken = json.loads(final.read_text())  # whole whenever it is read: each one was renamed in
        assert taken["host"]["hostname"] == "gpu-node-07" and taken["collected_at"] >= "2024-06-01T10:00:02+00:00"
    finally:
        code, err = stop(proc)
    assert code == 0, err.decode()  # SIGTERM ends the loop at once, as a pod's stop does
    assert err == b""
    assert [p.name for p in snaps.iterdir()] == ["gpu-node-07.json"]  # no temporary file left
    assert json.loads(final.read_text())["collected_at"] >= "2024-06-01T10:00:02+00:00"
    fleet = run_cli("fleet", "diagnose", str(snaps), "--format", "json")
    assert fleet.returncode == 0, fleet.stderr.decode()
    assert json.loads(fleet.stdout)["nodes"] == ["gpu-node-07"]


@pytest.mark.parametrize("shell", SHELLS, ids=lambda s: s or "/bin/sh")
def test_a_failed_probe_keeps_the_last_snapshot_and_says_so(tmp_path, shell):
    proc, _ = start(tmp_path, shell, FAKE_FAIL_FROM="2")
    final = tmp_path / "snaps" / "gpu-node-07.json"
    try:
        Output(proc.stdout).wait_for(b" saved ", timeout=60)
        errors = Output(proc.stderr)
        for _ in range(2):  # and again the next round
            failed = errors.wait_for(b"probe failed", timeout=60).decode()
            assert re.fullmatch(r"troubleshoot-probe: \S+ probe failed \(exit 3\); kept the last snapshot\n", failed)
        assert json.loads(final.read_text())["collected_at"] == "2024-06-01T10:00:01+00:00"
    finally:
        code, _ = stop(proc)
    assert code == 0
    assert [p.name for p in (tmp_path / "snaps").iterdir()] == ["gpu-node-07.json"]


@pytest.mark.parametrize("interval", ["5m", "1.2.3", "-1", ".5", "1e3"])
def test_an_interval_that_is_no_number_stops_the_pod_with_one_line(tmp_path, interval):
    proc, _ = start(tmp_path, PROBE_INTERVAL_SECONDS=interval)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and out == b""
    assert err.decode() == (f"troubleshoot-probe: PROBE_INTERVAL_SECONDS must be a number of seconds, "
                            f"not '{interval}'\n")
    assert not (tmp_path / "calls").exists()
