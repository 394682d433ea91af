"""On a real Slurm with 4 emulated nodes (.ci/slurm-up.sh; docs/slurm.md): fleet probe through
srun, a node whose probe hangs, and a multi-node `troubleshoot run` read back by `fleet diagnose`.

Marked `slurm`: the default run leaves them out (pyproject addopts); CI runs them as their own
step (`python -m pytest -m slurm`, .ci/run) after starting Slurm. Without a running Slurm they skip
and say why."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import REPO, run_cli

pytestmark = pytest.mark.slurm
NODES = 4


@pytest.fixture(scope="module")
def slurm():
    if shutil.which("sinfo") is None or shutil.which("srun") is None:
        pytest.skip("Slurm is not installed: run .ci/slurm-up.sh as root (Debian packages; docs/slurm.md)")
    try:
        p = subprocess.run(["sinfo", "-h", "-t", "idle", "-o", "%D"], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        pytest.skip("Slurm does not answer (sinfo timed out): start it with .ci/slurm-up.sh")
    idle = sum(int(x) for x in p.stdout.split() if x.isdigit())
    if p.returncode != 0 or idle < NODES:
        pytest.skip(f"Slurm is not running with {NODES} idle nodes (sinfo: {p.stderr.strip() or idle}); "
                    "start it with .ci/slurm-up.sh")


def test_fleet_probe_writes_one_snapshot_per_node(slurm, tmp_path):
    out = tmp_path / "snaps"
    started = time.monotonic()
    # --python: the frameworks probe reads an interpreter without torch, as on a plain node.
    p = run_cli("fleet", "probe", "--slurm", "--nodes", str(NODES), "--out", str(out), "--python", "/usr/bin/python3",
                "--format", "json", timeout=120)
    seconds = time.monotonic() - started
    assert p.returncode == 0, p.stderr.decode()
    doc = json.loads(p.stdout)
    assert [n["status"] for n in doc["nodes"]] == ["ok"] * NODES
    assert sorted(f.name for f in out.iterdir()) == [f"node{i}.json" for i in range(1, NODES + 1)]
    for f in out.iterdir():
        snap = json.loads(f.read_text())
        assert snap["schema"] == 1 and snap["host"]["available"]
    assert seconds < 10, f"4 snapshots took {seconds:.1f} s"
    # and the folder diagnoses as a fleet: identical emulated nodes, no drift
    fleet = json.loads(run_cli("fleet", "diagnose", str(out), "--format", "json").stdout)
    assert fleet["nodes"] == [f"node{i}" for i in range(1, NODES + 1)]
    assert fleet["findings"] == []


# What each node runs (`fleet probe --command`): on node3 a probe that never answers, as one stuck in
# a driver call (it waits until its job step is ended); elsewhere this troubleshoot's probe.
HANGS_ON_NODE3 = textwrap.dedent("""\
    import os, runpy, sys, threading
    if os.environ["SLURMD_NODENAME"] == "node3":
        threading.Event().wait()
    sys.argv = ["troubleshoot", *sys.argv[1:]]
    runpy.run_module("troubleshoot", run_name="__main__", alter_sys=True)
""")


def test_a_hanging_node_is_reported_and_the_others_arrive(slurm, tmp_path):
    out = tmp_path / "snaps"
    probe = tmp_path / "hangs_on_node3.py"
    probe.write_text(HANGS_ON_NODE3)
    command = shlex.join([sys.executable, str(probe), "probe", "--format", "json"])
    p = run_cli("fleet", "probe", "--slurm", "--nodes", str(NODES), "--out", str(out), "--python", "/usr/bin/python3",
                "--command", command, "--timeout", "15", "--format", "json", timeout=120)
    assert p.returncode == 1, p.stderr.decode()
    status = {n["node"]: n["status"] for n in json.loads(p.stdout)["nodes"]}
    assert status == {"node1": "ok", "node2": "ok", "node3": "timeout", "node4": "ok"}
    assert sorted(f.name for f in out.iterdir()) == ["node1.json", "node2.json", "node4.json"]
    assert "no snapshot from node3" in p.stderr.decode()
    # the hung step was ended with the allocation: nothing of ours is left in the queue
    left = subprocess.run(["squeue", "-h", "-n", "troubleshoot-probe"], capture_output=True, text=True, timeout=20)
    assert left.stdout.strip() == ""


JOB = textwrap.dedent("""\
    import os, runpy, sys
    print(f"rank {os.environ['SLURM_PROCID']} on {os.environ['SLURMD_NODENAME']} starting", flush=True)
    if os.environ["SLURM_PROCID"] == "1":
        runpy.run_path(sys.argv[1], run_name="__main__")  # fails for real: too many open files
    print("done", flush=True)
""")


def test_multi_node_run_then_fleet_diagnose_puts_the_failing_rank_first(slurm, tmp_path):
    pytest.importorskip("torch")
    job = tmp_path / "job.py"
    job.write_text(JOB)
    logs = tmp_path / "logs"
    p = subprocess.run(["srun", "-Q", "-N2", "--ntasks-per-node=1", sys.executable, "-m", "troubleshoot", "run",
                        "--no-probe", "--no-watch", "--log-to", f"{logs}/", "--", sys.executable, str(job),
                        str(REPO / "examples" / "too_many_open_files.py")],
                       capture_output=True, timeout=300, cwd=REPO)
    assert p.returncode != 0, p.stderr.decode()[-2000:]
    names = sorted(f.name for f in logs.iterdir() if f.suffix == ".log")
    assert len(names) == 2 and names[0].endswith(".node1.rank0.log") and names[1].endswith(".node2.rank1.log")
    doc = json.loads(run_cli("fleet", "diagnose", str(logs), "--format", "json").stdout)
    top = doc["diagnoses"][0]
    assert top["symptom"] == "too-many-open-files" and top["ranks"] == [1] and top["nodes"] == ["node2"]
    assert doc["summary"].startswith("rank 1 on node node2 failed first with too-many-open-files")


def test_fleet_probe_on_the_nodes_of_a_running_job(slurm, tmp_path):
    p = subprocess.run(["sbatch", "--parsable", "-N2", "--ntasks-per-node=1", "-J", "ts-test-running", "-o", "/dev/null",
                        "--wrap", "srun sleep 300"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    job = p.stdout.strip().split(";")[0]
    try:
        deadline = time.monotonic() + 60
        while subprocess.run(["squeue", "-h", "-j", job, "-t", "R", "-o", "%N"], capture_output=True, text=True,
                             timeout=20).stdout.strip() == "":
            assert time.monotonic() < deadline, "the job never started"
            time.sleep(0.2)  # polling the job state: squeue has no way to wait on it
        out = tmp_path / "snaps"
        r = run_cli("fleet", "probe", "--slurm", "--job", job, "--out", str(out), "--python", "/usr/bin/python3",
                    "--format", "json", timeout=120)
        assert r.returncode == 0, r.stderr.decode()
        nodes = [n["node"] for n in json.loads(r.stdout)["nodes"]]
        assert len(nodes) == 2 and sorted(f.stem for f in out.iterdir()) == sorted(nodes)
        # the job itself was left running
        state = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True, timeout=20)
        assert state.stdout.strip() == "RUNNING"
    finally:
        subprocess.run(["scancel", job], capture_output=True, timeout=30)
