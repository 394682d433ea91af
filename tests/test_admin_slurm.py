"""The admin loop on a real Slurm with 4 emulated nodes (.ci/slurm-up.sh; docs/slurm.md): a node
drained by `check --slurm` on a recorded Xid 79 and resumed after three passing checks, a node an
admin drained by hand left alone, and `fleet check` holding the other faulty nodes back at
`--max-drain 1`. Every test leaves the nodes as it found them (idle)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

import admin_snapshots as snaps
from conftest import run_cli

pytestmark = pytest.mark.slurm
NODES = 4


def sinfo() -> dict[str, tuple[str, str]]:
    out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N|%T|%E"], capture_output=True, text=True, timeout=20).stdout
    return {n: (state, reason) for n, state, reason in (line.split("|", 2) for line in out.splitlines())}


def resume_all() -> None:
    for node, (state, _) in sinfo().items():
        if "drain" in state:
            subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"], timeout=20, check=True)


@pytest.fixture
def nodes():
    if shutil.which("sinfo") is None or shutil.which("scontrol") is None:
        pytest.skip("Slurm is not installed: run .ci/slurm-up.sh as root (Debian packages; docs/slurm.md)")
    try:
        states = sinfo()
    except (subprocess.TimeoutExpired, ValueError):
        pytest.skip("Slurm does not answer: start it with .ci/slurm-up.sh")
    if len(states) < NODES:
        pytest.skip(f"Slurm is not running with {NODES} nodes; start it with .ci/slurm-up.sh")
    resume_all()
    yield
    resume_all()


def check(tmp_path, node, snap, *more):
    path = snaps.write(tmp_path / f"{node}-{len(list(tmp_path.iterdir()))}.json", snap)
    return run_cli("check", "--slurm", "--node", node, "--snapshot", str(path), "--db", str(tmp_path / "ev.db"),
                   *more, timeout=60)


def test_check_drains_on_xid_79_and_resumes_after_three_passing_checks(nodes, tmp_path):
    p = check(tmp_path, "node3", snaps.with_xid(79))
    assert p.returncode == 2, p.stderr.decode()
    state, reason = sinfo()["node3"]
    assert "drain" in state
    assert reason == "troubleshoot: [hw] Xid 79 on 0000:03:00 (GPU has fallen off the bus.): reboot"
    for i in (1, 2):
        p = check(tmp_path, "node3", snaps.healthy())
        assert p.returncode == 0 and f"{i} of 3 passing checks" in p.stdout.decode()
        assert "drain" in sinfo()["node3"][0]
    p = check(tmp_path, "node3", snaps.healthy())
    assert "slurm: resumed node3" in p.stdout.decode()
    assert "drain" not in sinfo()["node3"][0]
    events = json.loads(run_cli("events", "--db", str(tmp_path / "ev.db"), "--format", "json").stdout)["events"]
    acts = [(e["node"], e["kind"], e["reason"]) for e in events if e["kind"] in ("drain", "resume")]
    assert acts == [("node3", "drain", f"troubleshoot: {reason.removeprefix('troubleshoot: ')}"),
                    ("node3", "resume", "3 passing checks in a row")]
    assert all(e["time"] for e in events)


def test_a_node_drained_by_an_admin_stays_drained(nodes, tmp_path):
    subprocess.run(["scontrol", "update", "nodename=node2", "state=drain", "reason=maintenance: fan swap"],
                   timeout=20, check=True)
    for _ in range(4):
        p = check(tmp_path, "node2", snaps.healthy())
        assert "drained by someone else (maintenance: fan swap)" in p.stdout.decode()
    p = check(tmp_path, "node2", snaps.with_xid(79))
    assert p.returncode == 2 and "the reason left as it is" in p.stdout.decode()
    assert sinfo()["node2"] == ("drained", "maintenance: fan swap")


def test_fleet_check_drains_one_node_and_holds_the_others_at_max_drain_1(nodes, tmp_path):
    folder = tmp_path / "snaps"
    folder.mkdir()
    snaps.write(folder / "node1.json", snaps.healthy())
    for n in ("node2", "node3", "node4"):
        snaps.write(folder / f"{n}.json", snaps.with_xid(79))
    p = run_cli("fleet", "check", "--snapshots", str(folder), "--slurm", "--max-drain", "1",
                "--db", str(tmp_path / "ev.db"), "--format", "json", timeout=60)
    assert p.returncode == 2, p.stderr.decode()
    doc = json.loads(p.stdout)
    assert doc["counts"] == {"PASS": 1, "WARN": 0, "FAIL": 3}
    assert doc["drained"] == ["node2"] and doc["held"] == ["node3", "node4"]
    states = sinfo()
    assert [n for n, (s, _) in states.items() if "drain" in s] == ["node2"]
    held = {n["node"]: n["slurm"]["why"] for n in doc["nodes"] if n["slurm"]["act"] == "hold"}
    assert held["node3"] == "held by the limit: 1 node drained by troubleshoot already (--max-drain 1)"
    text = run_cli("fleet", "check", "--snapshots", str(folder), "--db", str(tmp_path / "ev2.db")).stdout.decode()
    assert "4 nodes: 1 PASS, 0 WARN, 3 FAIL" in text  # without --slurm: the verdicts only
    assert [n for n, (s, _) in sinfo().items() if "drain" in s] == ["node2"]


def test_fleet_check_probes_the_nodes_through_srun(nodes, tmp_path):
    # the emulated nodes are this machine: no GPU, a healthy host; each answers with its node probes
    p = run_cli("fleet", "check", "--slurm", "--nodes", str(NODES), "--db", str(tmp_path / "ev.db"),
                "--format", "json", timeout=120)
    assert p.returncode == 0, p.stderr.decode()
    doc = json.loads(p.stdout)
    assert doc["counts"]["FAIL"] == 0 and doc["missing"] == []
    assert sorted(n["node"] for n in doc["nodes"]) == [f"node{i}" for i in range(1, NODES + 1)]
    assert all(n["facts_from"].endswith("through srun") for n in doc["nodes"])
    assert doc["drained"] == [] and [n for n, (s, _) in sinfo().items() if "drain" in s] == []


def test_the_end_of_the_ladder_gives_troubleshoot_s_own_drain_a_new_reason_and_leaves_an_admin_s(nodes, tmp_path,
                                                                                               monkeypatch):
    from datetime import datetime, timedelta, timezone

    from troubleshoot.admin import events, policy, remediate
    from troubleshoot.admin.nodecheck import verdict_of
    from troubleshoot.admin.slurmctl import Slurm
    from troubleshoot.engine.ruleset import load_ruleset
    from troubleshoot.probes.base import run_command
    from troubleshoot.snapshot import complete

    monkeypatch.setattr(remediate.os, "geteuid", lambda: 0)  # the ladder's last rung runs no command
    subprocess.run(["scontrol", "update", "nodename=node2", "state=drain", "reason=maintenance: fan swap"],
                   timeout=20, check=True)
    facts = complete(snaps.with_xid(48))
    limits = policy.Limits(max_drain=4)
    earlier = (datetime.now(timezone.utc) - timedelta(hours=3)).isoformat(timespec="seconds")
    slurm = Slurm()
    with events.EventStore(tmp_path / "ev.db") as store:
        for node in ("node2", "node3"):  # two reboots of this GPU already: the ladder is spent
            for _ in range(2):
                store.record(node, "repair", status="done", action="reboot", gpu="0000:3b:00", xid=48, time=earlier)
            v = verdict_of(node, facts, "test", load_ruleset(use_config=False))
            states = slurm.nodes()
            p = remediate.plan(v, states[node], store, limits, policy.Room.from_nodes(limits, states), facts, True,
                               "python3")
            assert p.rung.name == "service_required"
            # the evidence is this machine's own (journalctl, nvidia-smi where present)
            assert remediate.apply(p, states[node], store, slurm, limits, run_command, facts, "python3",
                                   lambda line: None) == "service_required"
    after = sinfo()
    assert after["node2"] == ("drained", "maintenance: fan swap")
    assert after["node3"][1].startswith("troubleshoot: service_required [hw] Xid 48 on 0000:3b:00")
    assert "evidence" in after["node3"][1]


def test_a_node_slurm_does_not_know_is_one_line(nodes, tmp_path):
    p = check(tmp_path, "node9", snaps.healthy())
    assert p.returncode == 2 and p.stderr.decode().strip() == "troubleshoot: error: scontrol show node: Node node9 not found"
