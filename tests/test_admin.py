"""The admin loop without Slurm: check's verdicts, exit codes and formats, the policy's decisions
and limits, the event store, the remediation ladder and its escalation, the circuit breaker,
verification parsers, the fleet report and the node-problem-detector example. The same loop on a
real Slurm: tests/test_admin_slurm.py."""

from __future__ import annotations

import json
import random
import re
import sqlite3
import stat
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

import admin_snapshots as snaps
from conftest import REPO, run_main
from test_output_schemas import assert_valid
from troubleshoot.admin import events as ev
from troubleshoot.admin import loop, policy, remediate, verify
from troubleshoot.admin.slurmctl import NodeState, parse_nodes
from troubleshoot.probes.base import CmdResult

NPD_EXAMPLE = REPO / "docs" / "examples" / "node-problem-detector" / "troubleshoot-gpu.json"


def check(tmp_path, snap: dict, *more: str):
    path = snaps.write(tmp_path / "node.json", snap)
    return run_main("check", "--snapshot", str(path), "--node", "node3", "--db", str(tmp_path / "ev.db"), *more)


# ------------------------------------------------------------------ check: verdicts, exit codes, formats

@pytest.mark.parametrize("snap, status, code", [(snaps.healthy, "PASS", 0), (snaps.throttled, "WARN", 1),
                                                (lambda: snaps.with_xid(79), "FAIL", 2), (snaps.nvml_hung, "FAIL", 2)])
def test_check_exit_codes_follow_the_verdict(tmp_path, snap, status, code):
    p = check(tmp_path, snap(), "--format", "json")
    assert p.returncode == code, p.stderr.decode()
    doc = json.loads(p.stdout)
    assert_valid("check.schema.json", doc)
    assert doc["status"] == status and doc["exit"] == code and doc["node"] == "node3"
    if status == "PASS":
        assert doc["findings"] == [] and doc["reason"] is None


def test_a_failing_check_names_the_xid_the_gpu_the_class_and_the_action(tmp_path):
    p = check(tmp_path, snaps.with_xid(79))
    out = p.stdout.decode()
    assert out.splitlines()[0].startswith("node3: FAIL")
    assert "[hw] error: Xid 79 on 0000:03:00 (GPU has fallen off the bus.)" in out
    assert "drain and reboot the node" in out
    doc = json.loads(check(tmp_path, snaps.with_xid(79), "--format", "json").stdout)
    assert doc["reason"] == "[hw] Xid 79 on 0000:03:00 (GPU has fallen off the bus.): reboot"
    assert doc["findings"][0] | {"class": "hw", "xid": 79, "gpu": "0000:03:00", "action": "reboot"} == doc["findings"][0]


def test_a_hung_nvml_is_itself_a_finding(tmp_path):
    doc = json.loads(check(tmp_path, snaps.nvml_hung(), "--format", "json").stdout)
    assert doc["findings"][0]["class"] == "driver" and "NVML did not answer within 4.0s" in doc["findings"][0]["text"]


def test_npd_format_is_one_line_and_the_plugin_exit_convention(tmp_path):
    for snap, code, start in ((snaps.healthy(), 0, "node3: PASS"), (snaps.throttled(), 0, "node3: WARN: [hw]"),
                              (snaps.with_xid(79), 1, "node3: FAIL: [hw] Xid 79 on 0000:03:00")):
        p = check(tmp_path, snap, "--format", "npd")
        lines = p.stdout.decode().splitlines()
        assert p.returncode == code and len(lines) == 1 and lines[0].startswith(start), (p.stdout, p.stderr)
    # a check that cannot run is Unknown (2), said on stdout where node-problem-detector reads it
    p = run_main("check", "--snapshot", str(tmp_path / "missing.json"), "--format", "npd", "--db", str(tmp_path / "e.db"))
    assert p.returncode == 2 and p.stdout.decode().startswith("Unknown: ") and len(p.stdout.decode().splitlines()) == 1


def test_a_user_class_error_warns_but_never_fails_a_node():
    from troubleshoot import pipeline
    from troubleshoot.admin.verdict import judge

    found = pipeline.run(None, log_text="RuntimeError: CUDA error: an illegal memory access was encountered\n").diagnoses
    v = judge("node3", found, None, "a log")
    assert found[0].severity == "error" and v.findings[0].cls == "user"
    assert v.status == "WARN" and v.exit_code == 1


def test_xid_events_before_the_last_repair_are_left_out(tmp_path):
    db = tmp_path / "ev.db"
    with ev.EventStore(db) as store:
        store.record("node3", "repair", status="done", action="reset-gpu", time="2026-12-06T04:00:00+00:00")
    old = snaps.write(tmp_path / "old.json", snaps.with_xid(48, time="2026-12-06T03:00:00+00:00"))
    new = snaps.write(tmp_path / "new.json", snaps.with_xid(48, time="2026-12-06T05:00:00+00:00"))
    p = run_main("check", "--snapshot", str(old), "--node", "node3", "--db", str(db), "--format", "json")
    doc = json.loads(p.stdout)
    assert doc["status"] == "PASS" and "before the repair at 2026-12-06T04:00:00+00:00" in doc["dropped"][0]
    assert json.loads(run_main("check", "--snapshot", str(new), "--node", "node3", "--db", str(db),
                               "--format", "json").stdout)["status"] == "FAIL"


def test_a_node_name_that_is_not_one_host_is_refused(tmp_path):
    p = run_main(
        "check", "--snapshot", str(snaps.write(tmp_path / "s.json", snaps.healthy())), "--node", "node[1-512]",
        "--db", str(tmp_path / "e.db"))
    assert p.returncode == 2 and b"is not one node name" in p.stderr and b"Traceback" not in p.stderr


# ------------------------------------------------------------------ the policy

IDLE = NodeState("node3", "IDLE", "", ("gpu",))
OURS = NodeState("node3", "IDLE+DRAIN", "troubleshoot: [hw] Xid 79", ("gpu",))
THEIRS = NodeState("node3", "IDLE+DRAIN", "maintenance: fan swap", ("gpu",))


def room(limits, drained=(), size=4):
    nodes = {f"n{i}": NodeState(f"n{i}", "IDLE+DRAIN" if f"n{i}" in drained else "IDLE",
                                "troubleshoot: x" if f"n{i}" in drained else "", ("gpu",)) for i in range(size)}
    return policy.Room.from_nodes(limits, nodes)


def test_decisions_on_failing_and_passing_checks():
    L = policy.Limits()
    assert policy.decide("FAIL", IDLE, ["FAIL"], L, room(L), None).act == "drain"
    assert policy.decide("FAIL", THEIRS, ["FAIL"], L, room(L), None).act == "record"
    assert "drained by someone else (maintenance: fan swap)" in policy.decide("PASS", THEIRS, ["PASS"] * 5, L,
                                                                              room(L), None).why
    assert policy.decide("FAIL", OURS, ["FAIL"], L, room(L), None).act == "record"
    # resumes only after pass_after passes in a row; a warning starts the count again
    assert policy.decide("PASS", OURS, ["PASS", "PASS"], L, room(L), None).why.startswith("2 of 3")
    assert policy.decide("PASS", OURS, ["PASS", "PASS", "PASS"], L, room(L), None).act == "resume"
    assert policy.decide("PASS", OURS, ["PASS", "WARN", "PASS"], L, room(L), None).act == "record"
    assert policy.decide("WARN", OURS, ["WARN"], L, room(L), None).act == "record"
    assert policy.decide("PASS", IDLE, ["PASS"], L, room(L), None).act == "none"


def test_flapping_is_suppressed_by_consecutive_failures():
    L = policy.Limits(fail_after=3)
    assert policy.decide("FAIL", IDLE, ["FAIL", "FAIL"], L, room(L), None).why == \
        "2 of 3 failing checks in a row before a drain"
    assert policy.decide("FAIL", IDLE, ["FAIL", "PASS", "FAIL"], L, room(L), None).act == "record"
    assert policy.decide("FAIL", IDLE, ["FAIL"] * 3, L, room(L), None).act == "drain"


def test_limits_on_reach():
    # default: 1 node or 10 % of the partition, whichever is larger
    assert policy.Limits().partition_cap(4) == 1 and policy.Limits().partition_cap(64) == 6
    L = policy.Limits()
    assert policy.decide("FAIL", IDLE, ["FAIL"], L, room(L, drained={"n0"}), None).act == "hold"
    big = policy.Limits()
    assert policy.decide("FAIL", IDLE, ["FAIL"], big, room(big, drained={"n0"}, size=64), None).act == "drain"
    only_n = policy.Limits(max_drain=2)
    held = policy.decide("FAIL", IDLE, ["FAIL"], only_n, room(only_n, drained={"n0", "n1"}, size=64), None)
    assert held.act == "hold" and "--max-drain 2" in held.why
    pct = policy.Limits(max_drain_percent=50)
    assert policy.decide("FAIL", IDLE, ["FAIL"], pct, room(pct, drained={"n0"}), None).act == "drain"
    assert policy.decide("FAIL", IDLE, ["FAIL"], pct, room(pct, drained={"n0", "n1"}), None).act == "hold"
    # the kill switch and the breaker turn actions into reports
    off = policy.Limits(report_only=True)
    assert policy.decide("FAIL", IDLE, ["FAIL"], off, room(off), None).act == "report"
    assert policy.decide("PASS", OURS, ["PASS"] * 3, off, room(off), None).act == "report"
    assert policy.decide("FAIL", IDLE, ["FAIL"], L, room(L), "the circuit breaker is open").act == "report"


def test_scontrol_node_lines_parse_with_the_reason_last():
    # `scontrol show node -o` as the single-host Slurm of .ci/slurm-up.sh printed it (Slurm 22.05.8)
    line = ("NodeName=node2 Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=1.78 "
            "AvailableFeatures=(null) ActiveFeatures=(null) Gres=(null) NodeAddr=127.0.0.1 NodeHostName=vm Port=6822 "
            "Version=22.05.8 OS=Linux 6.18.44-fc-v1272 #1 SMP PREEMPT_DYNAMIC @0  RealMemory=1000 AllocMem=0 "
            "FreeMem=15729 Sockets=2 Boards=1 State=IDLE+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A "
            "MCS_label=N/A Partitions=debug  BootTime=2026-12-05T23:19:30 SlurmdStartTime=2026-12-06T11:03:41 "
            "LastBusyTime=2026-12-06T11:03:41 CfgTRES=cpu=2,mem=1000M,billing=2 AllocTRES= CapWatts=n/a "
            "CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s "
            "Reason=maintenance: fan swap [root@2026-12-06T11:03:42]")
    node = parse_nodes(line)["node2"]
    assert node.state == "IDLE+DRAIN" and node.reason == "maintenance: fan swap" and node.partitions == ("debug",)
    assert node.drained and not node.ours


# ------------------------------------------------------------------ the event store

def test_event_store_schema_is_versioned_private_and_refuses_what_it_cannot_read(tmp_path):
    db = tmp_path / "s" / "events.db"
    with ev.EventStore(db) as store:
        e = store.record("node1", "drain", status="done", reason="troubleshoot: [hw] x", gpu="0000:03:00", xid=79)
        assert store.events(node="node1", kinds=("drain",)) == [e]
    assert stat.S_IMODE(db.stat().st_mode) == 0o600 and stat.S_IMODE(db.parent.stat().st_mode) == 0o700
    con = sqlite3.connect(db)
    assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("1",)
    con.execute("UPDATE meta SET value = '9' WHERE key = 'schema_version'")
    con.commit()
    con.close()
    p = run_main("events", "--db", str(db))
    assert p.returncode == 2 and b"schema 9 is newer" in p.stderr
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all" * 100)
    p = run_main("events", "--db", str(junk))
    assert p.returncode == 2 and b"not a troubleshoot event store" in p.stderr and b"Traceback" not in p.stderr


def test_config_admin_section_and_its_errors(tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text("admin:\n  report_only: true\n  db: events.db\n")
    snap = snaps.write(tmp_path / "x.json", snaps.with_xid(79))
    p = run_main("check", "--snapshot", str(snap), "--node", "node3", "--config", str(cfg), "--format", "json")
    assert p.returncode == 2 and (tmp_path / "events.db").exists()  # db relative to the config file
    cfg.write_text("admin:\n  pass_after: zero\n")
    p = run_main("check", "--snapshot", str(snap), "--config", str(cfg))
    assert p.returncode == 2 and p.stderr.decode().strip() == \
        f"troubleshoot: error: {cfg}: admin: pass_after must be an integer, not 'zero'"
    cfg.write_text("admin:\n  max_drian: 2\n")
    assert b"unknown setting 'max_drian'" in run_main("check", "--snapshot", str(snap), "--config", str(cfg)).stderr
    cfg.write_text("admin: [\n")
    assert re.search(rb"config.yaml:\d+: not valid YAML", run_main("check", "--snapshot", str(snap), "--config",
                                                                   str(cfg)).stderr)


# ------------------------------------------------------------------ remediation: the ladder

def dry_run(tmp_path, snap, *more):
    path = snaps.write(tmp_path / "xid.json", snap)
    return run_main("remediate", "--node", "node3", "--snapshot", str(path), "--db", str(tmp_path / "ev.db"), *more)


def test_remediate_dry_run_prints_the_ladder(tmp_path):
    p = dry_run(tmp_path, snaps.with_xid(48))
    out = p.stdout.decode()
    assert p.returncode == 1, p.stderr.decode()
    assert "rung: reset-gpu: the first step for Xid 48 on 0000:3b:00" in out
    steps = [line for line in out.splitlines() if re.match(r"  \d\. ", line)]
    assert [s.split(". ", 1)[1].split(" ")[0] for s in steps] == ["record", "keep", "drain:", "repair", "verify:",
                                                                  "passed:"]
    assert "nvidia-smi --gpu-reset -i 0000:3b:00" in out and "a matrix product on each GPU" in out
    assert "failed: escalate to reboot" in out and "dry run: nothing was changed" in out
    assert not (tmp_path / "ev.db").exists() or ev.EventStore(tmp_path / "ev.db").events() == []


def test_a_reset_that_did_not_hold_escalates_to_reboot_then_service_required(tmp_path):
    db = tmp_path / "ev.db"
    earlier = (datetime.now(timezone.utc) - timedelta(hours=2)).isoformat(timespec="seconds")
    with ev.EventStore(db) as store:
        store.record("node3", "repair", status="done", action="reset-gpu", gpu="0000:3b:00", xid=48, time=earlier)
    again = snaps.with_xid(48, time=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    doc = json.loads(dry_run(tmp_path, again, "--format", "json").stdout)
    assert doc["rung"] == "reboot" and "did not hold" in doc["why"]
    assert doc["repair"][0]["argv"][:2] == ["shutdown", "-r"]
    with ev.EventStore(db) as store:
        for _ in range(2):  # the configured reboots (max_reboots 2) done, and the fault is back
            store.record("node3", "repair", status="done", action="reboot", gpu="0000:3b:00", xid=48, time=earlier)
    doc = json.loads(dry_run(tmp_path, again, "--format", "json").stdout)
    assert doc["rung"] == "service_required" and "2 reboots" in doc["why"]
    text = dry_run(tmp_path, again).stdout.decode()
    assert "stays drained with reason 'troubleshoot: service_required [hw] Xid 48" in text and "evidence" in text


def test_remediate_refuses_to_apply_from_a_recorded_snapshot(tmp_path):
    p = dry_run(tmp_path, snaps.with_xid(48), "--apply")
    assert p.returncode == 2 and b"never from a recorded snapshot" in p.stderr


class Machine:
    """Commands of a node answered from recordings: the repair works, the matrix product gives
    `matmul` (the verification's own JSON lines), and nothing else is installed."""

    def __init__(self, matmul_ok: bool):
        self.matmul_ok, self.ran = matmul_ok, []

    def __call__(self, argv, timeout):
        self.ran.append(list(argv))
        if argv[0] == "nvidia-smi" and "--gpu-reset" in argv:
            return CmdResult(tuple(argv), 0, "GPU 00000000:3B:00.0 was successfully reset.\n")
        if argv[1:2] == ["-c"] and "torch.randn" in argv[2]:  # the matrix product's script
            row = {"gpu": 0, "name": "NVIDIA H100 80GB HBM3", "ok": self.matmul_ok, "max_rel_err": 1e-6 if
                   self.matmul_ok else 0.5, "tflops": 51.2}
            return CmdResult(tuple(argv), 0, json.dumps(row) + "\n")
        return CmdResult(tuple(argv), None, error=f"{argv[0]}: command not found")


def apply(tmp_path, store, node, machine, limits):
    from troubleshoot.snapshot import complete

    facts = complete(snaps.with_xid(48))  # as a probe of the node completes its facts
    from troubleshoot.admin.nodecheck import verdict_of
    from troubleshoot.engine.ruleset import load_ruleset

    v = verdict_of(node, facts, "test", load_ruleset(use_config=False))
    p = remediate.plan(v, NodeState(node, "UNKNOWN"), store, limits, policy.Room(limits), facts, False, "python3")
    return remediate.apply(p, NodeState(node, "UNKNOWN"), store, None, limits, machine, facts, "python3",
                           lambda line: None)


def test_a_verified_repair_is_recorded_with_its_evidence(tmp_path, monkeypatch):
    monkeypatch.setattr(remediate.os, "geteuid", lambda: 0)  # the repair's commands are recordings here
    with ev.EventStore(tmp_path / "ev.db") as store:
        machine = Machine(matmul_ok=True)
        assert apply(tmp_path, store, "node3", machine, policy.Limits()) == "resumed"
        kinds = [(e.kind, e.status) for e in store.events(node="node3")]
        assert kinds == [("incident", "remediation"), ("evidence", "saved"), ("repair", "done"), ("verify", "passed")]
        evidence = store.events(kinds=("evidence",))[0]
        kept = json.loads((Path(evidence.reason) / "facts.json").read_text())
        assert kept["kernel"]["xid_events"][0]["code"] == 48
        # evidence was kept before the reset ran
        first_reset = next(i for i, a in enumerate(machine.ran) if "--gpu-reset" in a)
        assert any(a[0] in ("journalctl", "dmesg") for a in machine.ran[:first_reset])


def test_the_circuit_breaker_trips_after_failed_verifications_and_holds_until_reset(tmp_path, monkeypatch):
    monkeypatch.setattr(remediate.os, "geteuid", lambda: 0)
    limits = policy.Limits(breaker_failures=3, cooldown_s=0)
    db = tmp_path / "ev.db"
    with ev.EventStore(db) as store:
        for node in ("node1", "node2", "node3"):
            assert apply(tmp_path, store, node, Machine(matmul_ok=False), limits) == "escalated"
        assert loop.breaker_open(store) and "3 failed verifications" in loop.breaker_open(store)
        with pytest.raises(Exception, match="circuit breaker is open"):
            apply(tmp_path, store, "node4", Machine(matmul_ok=True), limits)
        # a check's drain is only reported while it is open
        assert policy.decide("FAIL", IDLE, ["FAIL"], limits, room(limits), loop.breaker_open(store)).act == "report"
    p = run_main("breaker", "status", "--db", str(db))
    assert p.returncode == 1 and b"open since" in p.stdout
    assert run_main("breaker", "reset", "--db", str(db), "--why", "bad batch of risers replaced").returncode == 0
    assert run_main("breaker", "status", "--db", str(db)).stdout.startswith(b"the circuit breaker is closed")
    with ev.EventStore(db) as store:
        assert apply(tmp_path, store, "node4", Machine(matmul_ok=True), limits) == "resumed"


# ------------------------------------------------------------------ verification parsers

def test_matmul_and_allreduce_results_are_parsed():
    ok = '{"gpu": 0, "name": "NVIDIA H100", "ok": true, "max_rel_err": 2e-07, "tflops": 48.1}\n'
    assert verify.parse_matmul(ok) == ("passed", "GPU 0 NVIDIA H100: 48.1 TFLOP/s, error 2.0e-07")
    bad = ok + '{"gpu": 1, "name": "NVIDIA H100", "ok": false, "error": "RuntimeError: CUDA error: uncorrectable ECC"}\n'
    assert verify.parse_matmul(bad)[0] == "failed" and "uncorrectable ECC" in verify.parse_matmul(bad)[1]
    assert verify.parse_matmul('{"error": "torch.cuda.is_available() is False"}') == \
        ("failed", "torch.cuda.is_available() is False")
    assert verify.parse_matmul("") == ("failed", "the matrix product printed nothing")
    two = '{"rank": 0, "ok": true, "nccl": "2.21.5"}\n{"rank": 1, "ok": false, "nccl": "2.21.5"}\n'
    assert verify.parse_allreduce(two) == ("failed", "ranks [1] got a wrong sum (NCCL 2.21.5)")
    assert verify.verdict([verify.Check("dcgm-diag", "skipped", "")]) == "failed"  # nothing ran: no pass


# ------------------------------------------------------------------ fleet report

def test_fleet_report_on_a_year_of_generated_incidents(tmp_path):
    rnd = random.Random(7)
    start = datetime(2025, 12, 1, tzinfo=timezone.utc)
    upgrade = start + timedelta(days=180)
    nodes = [f"gpu{i:03d}" for i in range(40)]
    rows, incidents = [], {"hw": [0, 0], "driver": [0, 0]}
    for day in range(365):
        when = start + timedelta(days=day, hours=3)
        for n in nodes:
            rows.append(dict(node=n, kind="check", status="PASS", time=when.isoformat()))
        # drivers fail 4x less often after the upgrade; gpu007 is a repeat offender
        for cls, rate in (("hw", 0.01), ("driver", 0.04 if when < upgrade else 0.01)):
            for n in nodes:
                if rnd.random() < rate / 10 or (n == "gpu007" and cls == "hw" and day % 60 == 0):
                    rows.append(dict(node=n, kind="incident", status="open", cls=cls, time=when.isoformat()))
                    incidents[cls][when >= upgrade] += 1
    with ev.EventStore(tmp_path / "ev.db") as store:
        store.record_many(rows)
    until = (start + timedelta(days=365)).isoformat()
    p = run_main("fleet", "report", "--db", str(tmp_path / "ev.db"), "--since", start.isoformat(), "--until", until,
                 "--around", upgrade.isoformat(), "--format", "json")
    assert p.returncode == 0, p.stderr.decode()
    doc = json.loads(p.stdout)
    total = sum(sum(v) for v in incidents.values())
    assert doc["nodes"] == 40 and doc["incidents"] == total and doc["days"] == 365
    assert doc["repeat_offenders"][0]["node"] == "gpu007" and doc["repeat_offenders"][0]["incidents"] >= 7
    hw = next(c for c in doc["classes"] if c["class"] == "hw")
    assert hw["incidents"] == sum(incidents["hw"]) and hw["mtbi_node_days"] == round(40 * 365 / hw["incidents"], 1)
    rates = doc["before_after"]["per_100_node_days"]["driver"]
    assert rates["before"] == round(100 * incidents["driver"][0] / (40 * 180), 3)
    assert rates["after"] < rates["before"] / 2  # the upgrade shows
    assert 0 < doc["clean_share"] < 1
    text = run_main("fleet", "report", "--db", str(tmp_path / "ev.db"), "--since", start.isoformat(), "--until", until,
                    "--around", upgrade.isoformat()).stdout.decode()
    assert "clean (no incident):" in text and "gpu007" in text and "before / after" in text


# ------------------------------------------------------------------ node-problem-detector's config

def _go_duration(text: str) -> float:
    """Go's time.ParseDuration for the units a config uses."""
    parts = re.fullmatch(r"((?:\d+(?:\.\d+)?(?:ns|us|ms|s|m|h))+)", text)
    assert parts, f"{text!r} is not a Go duration"
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
    return sum(float(n) * scale[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)(ns|us|ms|s|m|h)", text))


def test_the_node_problem_detector_example_passes_its_validation():
    """The checks of node-problem-detector's pkg/custompluginmonitor/types/config.go
    (ApplyConfiguration, Validate), with the fields its structs declare."""
    doc = json.loads(NPD_EXAMPLE.read_text())
    assert set(doc) <= {"plugin", "pluginConfig", "source", "conditions", "rules", "metricsReporting"}
    assert doc["plugin"] == "custom" and doc["source"]
    glob = doc["pluginConfig"]
    assert set(glob) <= {"invoke_interval", "timeout", "max_output_length", "concurrency",
                         "enable_message_change_based_condition_update", "skip_initial_status"}
    timeout = _go_duration(glob.get("timeout", "5s"))
    _go_duration(glob.get("invoke_interval", "30s"))
    conditions = {c["type"] for c in doc["conditions"]}
    for c in doc["conditions"]:
        assert set(c) <= {"type", "status", "transition", "reason", "message"} and c["type"] and c["reason"]
    for rule in doc["rules"]:
        assert set(rule) <= {"type", "condition", "reason", "path", "args", "timeout", "invoke_interval"}
        assert rule["type"] in ("temporary", "permanent") and rule["reason"]
        assert _go_duration(rule["timeout"]) <= timeout
        if rule["type"] == "permanent":
            assert rule["condition"] in conditions
        # the plugin's command line is this tool's: it parses, and asks for the npd format
        assert rule["path"].endswith("/troubleshoot") and rule["args"][:3] == ["check", "--format", "npd"]
        from troubleshoot.cli import build_parser

        args = build_parser("check").parse_args(rule["args"])
        assert args.format == "npd" and args.timeout < _go_duration(rule["timeout"])
    # the one message line fits what node-problem-detector keeps
    assert glob["max_output_length"] >= 80


def test_a_failing_check_within_the_grace_window_after_boot_is_recorded_not_drained():
    L = policy.Limits(boot_grace_s=300)
    d = policy.decide("FAIL", IDLE, ["FAIL"], L, room(L), None, uptime_s=42.0)
    assert d.act == "record" and d.why == "42 s after boot, within the grace window (300 s): recorded, not drained"
    assert policy.decide("FAIL", IDLE, ["FAIL"], L, room(L), None, uptime_s=301.0).act == "drain"


DCGM = REPO / "tests" / "fixtures" / "dcgm"  # real dcgmi diag outputs, sources in SOURCE.md there


@pytest.mark.parametrize("name, status, words", [
    ("diag-r1-pass-virtualclient.json", "passed", "9 tests passed"),
    ("diag-r3-pass-virtualclient.json", "passed", "not run: EUD Test (skip)"),
    ("diag-r2-pass-aws-efa-cheatsheet-3.3.3.txt", "passed", "11 tests passed"),
    ("diag-r3-fail-nccl-tests-issue264-3.3.8.txt", "failed",
     "GPU Memory: GPU 0 Error using CUDA API cuInit Check DCGM and system logs for errors. Reset GPU. Restart DCGM."),
    ("diag-r2-fail-dcgm-issue253-4.4.1.txt", "failed", "pcie: There was an internal error during the test: 'Output "
                                                       "of child process (11167) couldn't be parsed"),
    ("diag-fail-dcgm-issue253-4.2.3.txt", "failed", "exited with non-zero status 1' Check DCGM and system logs for "
                                                    "errors."),
])
def test_dcgmi_diag_results_are_parsed_from_json_and_from_the_table(name, status, words):
    got = verify.parse_dcgm((DCGM / name).read_text())
    assert got[0] == status and words in got[1], got


def test_a_dcgm_4_test_entry_is_read_inside_its_document():
    # The one test entry DCGM 4 printed in NVIDIA/DCGM#215 (the paste is a fragment), placed where
    # DCGM 4's dcgmi/Diag.cpp puts tests: "DCGM Diagnostic" -> test_categories[] -> tests[].
    entry = json.loads((DCGM / "diag-v4-fragment-pass-dcgm-issue215.txt").read_text().strip().rstrip(","))
    doc = {"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [entry]}]}}
    assert verify.parse_dcgm(json.dumps(doc)) == ("passed", "1 tests passed")
    entry["results"][1]["status"] = "Fail"
    entry["results"][1]["warnings"] = [{"warning": "GPU 1 failed the diagnostic"}]
    assert verify.parse_dcgm(json.dumps(doc)) == ("failed", "diagnostic: GPU 1 failed the diagnostic")


def test_fleet_check_of_recorded_snapshots_without_slurm_gives_the_verdicts(tmp_path):
    folder = tmp_path / "snaps"
    folder.mkdir()
    snaps.write(folder / "gpu01.json", snaps.healthy())
    snaps.write(folder / "gpu02.json", snaps.throttled())
    snaps.write(folder / "gpu03.json", snaps.with_xid(79))
    p = run_main("fleet", "check", "--snapshots", str(folder), "--db", str(tmp_path / "ev.db"), "--format", "json")
    assert p.returncode == 2, p.stderr.decode()
    doc = json.loads(p.stdout)
    assert_valid("fleet-check.schema.json", doc)
    assert doc["counts"] == {"PASS": 1, "WARN": 1, "FAIL": 1} and doc["drained"] == []
    assert [n["status"] for n in doc["nodes"]] == ["PASS", "WARN", "FAIL"]
    with ev.EventStore(tmp_path / "ev.db") as store:  # every verdict remembered, the failure as an incident
        recorded = [(e.node, e.kind) for e in store.events(kinds=("check", "incident"))]
    assert recorded[:2] == [("gpu03", "check"), ("gpu03", "incident")]  # the failing node first
    assert sorted(recorded[2:]) == [("gpu01", "check"), ("gpu02", "check")]


def test_fleet_check_reports_an_unreadable_snapshot_and_checks_the_others(tmp_path):
    folder = tmp_path / "snaps"
    folder.mkdir()
    snaps.write(folder / "gpu01.json", snaps.healthy())
    (folder / "gpu02.json").write_text("{not json")
    p = run_main("fleet", "check", "--snapshots", str(folder), "--db", str(tmp_path / "ev.db"), "--format", "json")
    doc = json.loads(p.stdout)
    assert p.returncode == 1 and doc["counts"]["PASS"] == 1
    assert doc["missing"][0]["node"] == "gpu02" and "not valid JSON" in doc["missing"][0]["error"]
    assert b"node gpu02 left out" in p.stderr
