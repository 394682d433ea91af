"""Snapshots: this machine's probe, save/load round trip, bad files, redaction, docs."""

import json
import re

import pytest

from conftest import REPO, run_cli, run_main
from troubleshoot import snapshot
from troubleshoot.errors import TroubleshootError
from troubleshoot.schemas.factpaths import documented_paths

BASE = json.loads((REPO / "tests" / "fixtures" / "snapshots" / "base.json").read_text())
OOM_LOG = REPO / "examples" / "logs" / "cuda-oom.log"


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    """The real probes on this machine (no GPU, no Docker daemon here), saved by the CLI."""
    path = tmp_path_factory.mktemp("snap") / "this-machine.json"
    p = run_cli("probe", "--format", "json", "--save", str(path))
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout), path


def test_probe_on_this_machine_reports_nvml_unavailable_with_reason(probed):
    snap, _ = probed
    assert snap["schema"] == 1
    for area in ("host", "env", "nvml", "kernel", "cuda", "frameworks", "docker", "io", "probes"):
        assert area in snap
    nv = snap["nvml"]
    if nv["available"]:
        pytest.skip("this machine has a working NVML")
    assert nv["error"] and nv["gpus"] == []
    assert snap["probes"]["nvml"]["status"] == "unavailable"
    assert all(p["status"] != "error" for p in snap["probes"].values()), snap["probes"]


def test_probe_text_summary_is_readable():
    p = run_cli("probe")
    out = p.stdout.decode()
    assert p.returncode == 0
    for label in ("host:", "kernel:", "cuda:", "frameworks:", "docker:", "system:", "io:"):
        assert label in out


def test_saved_snapshot_loads_back_and_diagnoses_identically(probed):
    snap, path = probed
    assert snapshot.load(path).facts == snapshot.check(snap).facts
    a = run_main("diagnose", "--format", "json", "--snapshot", str(path), "--log", str(OOM_LOG))
    b = run_main("diagnose", "--format", "json", "--snapshot", str(path), "--log", str(OOM_LOG))
    assert a.returncode == b.returncode == 0
    assert json.loads(a.stdout)["diagnoses"] == json.loads(b.stdout)["diagnoses"]
    copy = path.with_name("copy.json")
    snapshot.save(snapshot.load(path).facts, copy)
    c = run_main("diagnose", "--format", "json", "--snapshot", str(copy), "--log", str(OOM_LOG))
    assert json.loads(c.stdout)["diagnoses"] == json.loads(a.stdout)["diagnoses"]


@pytest.mark.parametrize("content, fragment", [
    ("not json at all", "not valid JSON"),
    ("[1, 2]", "not a troubleshoot snapshot"),
    ('{"nvml": {}}', "no integer 'schema'"),
    ('{"schema": "1"}', "no integer 'schema'"),
    ('{"schema": 1,\n "nvml": {"driver_version": "5"\n', "snap.json:3: not valid JSON"),
])
def test_unusable_snapshots_are_one_line_errors(tmp_path, content, fragment):
    path = tmp_path / "snap.json"
    path.write_text(content)
    p = run_main("diagnose", "--snapshot", str(path), "--log", str(OOM_LOG))
    err = p.stderr.decode()
    assert p.returncode == 2 and fragment in err and err.count("\n") == 1 and "Traceback" not in err


def test_odd_snapshots_warn_and_still_diagnose(tmp_path):
    snap = json.loads(json.dumps(BASE))
    snap["schema"] = 7
    snap["nvml"]["driver_version"] = 535  # wrong type
    snap["nvml"]["gpus"][0]["temperature_c"] = "hot"  # wrong type
    snap["nvml"]["gpus"][0]["fan_rpm"] = 3000  # unknown fact
    del snap["docker"]  # missing area
    snap["acme"] = {"anything": 1}  # a plugin's area
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(snap))
    p = run_main("diagnose", "--format", "json", "--snapshot", str(path), "--log", str(OOM_LOG))
    err = p.stderr.decode()
    assert p.returncode == 0 and "Traceback" not in err
    assert "newer troubleshoot (snapshot schema 7" in err
    assert "nvml.driver_version: expected string or null, found int 535; ignored" in err
    assert "nvml.gpus[0].temperature_c: expected integer or null" in err
    assert "nvml.gpus[0].fan_rpm: unknown fact; ignored" in err
    assert "no 'docker' facts" in err
    assert json.loads(p.stdout)["diagnoses"][0]["symptom"] == "cuda-oom"
    loaded = snapshot.load(path)
    assert "driver_version" not in loaded.facts["nvml"] and loaded.facts["acme"] == {"anything": 1}


def test_huge_or_deep_snapshot_is_refused_cleanly(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"schema": 1, "x": ' + "[" * 100000 + "]" * 100000 + "}")
    with pytest.raises(TroubleshootError):
        snapshot.load(path)


XID79_LINE = "NVRM: Xid (PCI:0000:68:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."


def test_verdicts_an_older_snapshot_holds_are_recomputed_and_diagnose_the_same(tmp_path):
    from troubleshoot import pipeline
    from troubleshoot.engine.ruleset import load_ruleset

    raw = {"code": 79, "pci": "0000:68:00", "pid": None, "process": None, "message": "GPU has fallen off the bus.",
           "line": XID79_LINE, "uptime_s": None, "time": None, "current": True}
    written = {
        "raw events": raw,
        "with the probe's verdict": {**raw, "symptom": "gpu-hardware-fault", "action": "reboot"},
        "with a stale verdict": {**raw, "symptom": "illegal-memory-access", "action": "ignore"},
        "before time and verdicts": {k: raw[k] for k in ("code", "pci", "pid", "process", "message", "line")},
    }
    ruleset = load_ruleset(use_config=False)
    found = {}
    for name, event in written.items():
        snap = json.loads(json.dumps(BASE))
        snap["kernel"]["xid_events"] = [event]
        path = tmp_path / "snap.json"
        path.write_text(json.dumps(snap))
        facts = snapshot.load(path).facts
        e = facts["kernel"]["xid_events"][0]
        assert (e["current"], e["symptom"], e["action"]) == (True, "gpu-hardware-fault", "reboot"), name
        found[name] = [(d.rule.id, d.action, d.confidence) for d in pipeline.run(None, ruleset=ruleset, facts=facts).diagnoses]
    assert found["raw events"][0] == ("kernel-xid-reboot-probe", "reboot", 0.95)
    assert all(ds == found["raw events"] for ds in found.values()), found


def test_redaction_is_stable_and_keeps_diagnoses(tmp_path):
    snap = json.loads(json.dumps(BASE))
    snap["env"]["MASTER_ADDR"] = "10.1.2.3"
    snap["env"]["NCCL_SOCKET_IFNAME"] = "eth0"
    snap["cuda"]["ld_library_path"] = ["/home/ana/cuda/lib64"]
    snap["docker"]["daemon_json"] = {"registry-mirrors": ["http://gpu-node-07:5000"], "mac": "00:1b:21:3a:4f:5e"}
    red = snapshot.redact(snap)
    text = json.dumps(red)
    for secret in ("gpu-node-07", "10.1.2.3", "00:1b:21:3a:4f:5e", "/home/ana", '"ana"'):
        assert secret not in text, secret
    assert red["redacted"] is True
    assert red["nvml"]["gpus"][0]["pci_bus_id"] == "00000000:68:00.0"  # not personal, kept
    assert snapshot.redact(snap) == red  # stable placeholders
    assert re.search(r"<host-[0-9a-f]{8}>", text)
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(snap))
    b.write_text(json.dumps(red))
    out = [json.loads(run_main("diagnose", "--format", "json", "--snapshot", str(f), "--log", str(OOM_LOG)).stdout)
           for f in (a, b)]
    assert [d["rule"] for d in out[0]["diagnoses"]] == [d["rule"] for d in out[1]["diagnoses"]]


def test_cli_redact_flag(tmp_path):
    p = run_cli("probe", "--format", "json", "--redact")
    snap = json.loads(p.stdout)
    import socket

    host = re.escape(socket.gethostname())  # as a name: a host `vm` is inside every "nvml"
    assert snap["redacted"] is True and not re.search(rf"(?<![\w.-]){host}(?![\w-])", p.stdout.decode())


def test_docs_list_every_fact():
    doc = (REPO / "docs" / "snapshot.md").read_text()
    missing = [p for p in documented_paths()
               if p not in ("schema", "collected_at", "redacted", "probes") and not p.endswith("[]")
               and f"`{p}`" not in doc]
    assert missing == []


def test_lint_rejects_undocumented_facts(rules_dir):
    d = rules_dir({"r.yaml": """\
        - id: bad-fact
          symptom: gpu-throttling
          title: t
          severity: warning
          match:
            facts: ['any(g in nvml.gpus: g.fan_rpm > 3000)', 'nvml.drivr_version < 500', 'env.ANY_VAR == "x"']
          explain: x
        """})
    p = run_main("rules", "lint", "--rules", str(d))
    out = p.stdout.decode()
    assert p.returncode == 2
    assert "nvml.gpus[].fan_rpm, a fact no probe documents" in out
    assert "nvml.drivr_version, a fact no probe documents" in out
    assert "env.ANY_VAR" not in out


def test_redaction_replaces_whole_names_only():
    # A host named `vm` is inside `nvml`: the NVML area and its error must survive redaction,
    # or the redacted snapshot warns "no 'nvml' facts" and loses the reason NVML failed.
    snap = {"schema": 1, "host": {"available": True, "hostname": "vm", "user": "ana", "home": "/home/ana"},
            "nvml": {"available": False, "error": "nvmlInit failed: NVML Shared Library Not Found", "gpus": []},
            "env": {"MASTER_ADDR": "vm", "SLURM_NODELIST": "vm,vm2", "PROMPT": "ana@vm:~"}}
    red = snapshot.redact(snap)
    assert red["nvml"] == snap["nvml"]
    host = red["host"]["hostname"]
    assert re.fullmatch(r"<host-[0-9a-f]{8}>", host)
    assert red["env"]["MASTER_ADDR"] == host and red["env"]["SLURM_NODELIST"] == f"{host},vm2"
    assert "ana" not in json.dumps(red["env"]) and "vm:" not in json.dumps(red["env"])
