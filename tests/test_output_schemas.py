"""The JSON that `diagnose`, `fleet diagnose` and `run` write validates against the schemas shipped
in troubleshoot/schemas (docs/json-output.md): each document is made by the real command from
recorded logs and snapshots, and a key the emitter writes that a schema does not know fails."""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import sys

import jsonschema
import pytest
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from conftest import REPO, run_cli, run_main

SCHEMAS = REPO / "troubleshoot" / "schemas"
BASE_URI = "https://github.com/troubleshoot/troubleshoot/troubleshoot/schemas/"
OUTPUTS = ("diagnose.schema.json", "fleet.schema.json", "run.schema.json", "check.schema.json", "fleet-check.schema.json",
           "rules.schema.json", "symptoms.schema.json", "fixers.schema.json", "history.schema.json",
           "fleet-probe.schema.json")
FIXTURES = REPO / "tests" / "fixtures"
CUDA_OOM = REPO / "examples" / "logs" / "cuda-oom.log"
XID79_DMESG = FIXTURES / "machines" / "xid-79" / "dmesg.txt"
PASTED_NVSMI = FIXTURES / "pasted" / "nvsmi-470-pip-torch-cu121.txt"
PER_RANK = FIXTURES / "ranks" / "per-rank"
MERGED = FIXTURES / "ranks" / "merged" / "slurm-4242.out"
BASE = json.loads((FIXTURES / "snapshots" / "base.json").read_text())


def schema(name: str) -> dict:
    return json.loads((SCHEMAS / name).read_text())


def registry() -> Registry:
    """Every schema of the folder under the URI its `$ref`s name; no retrieval, so a reference
    that leaves the folder fails here instead of going to the network."""
    return Registry().with_resources(
        (BASE_URI + p.name, DRAFT202012.create_resource(json.loads(p.read_text())))
        for p in SCHEMAS.glob("*.schema.json"))


def errors(name: str, doc) -> list[str]:
    """`where: why` for each error; inside an `anyOf` (a value or null), the reason of the branch
    that came closest."""
    validator = jsonschema.Draft202012Validator(schema(name), registry=registry())
    found = [jsonschema.exceptions.best_match([e]) for e in validator.iter_errors(doc)]
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
            for e in sorted(found, key=lambda e: list(map(str, e.absolute_path)))]


def assert_valid(name: str, doc) -> None:
    found = errors(name, doc)
    assert found == [], "\n".join(found)


def diagnose(*args: str, stdin: bytes = b"") -> dict:
    p = run_main("diagnose", "--format", "json", *args, input=stdin)
    assert p.returncode == 0, p.stderr.decode()
    doc = json.loads(p.stdout)
    assert_valid("diagnose.schema.json", doc)
    return doc


def xid79_snapshot(path):
    """The healthy fixture snapshot with the Xid 79 event recorded in xid-79/dmesg.txt."""
    snap = copy.deepcopy(BASE)
    line = XID79_DMESG.read_text().splitlines()[1].split("kernel: ", 1)[1]
    snap["kernel"]["xid_events"] = [{"code": 79, "pci": "0000:03:00", "pid": None, "process": None,
                                     "message": "GPU has fallen off the bus.", "line": line}]
    path.write_text(json.dumps(snap))
    return path


def walk(node, where=""):
    """Every subschema of a schema document, with its JSON pointer."""
    if isinstance(node, dict):
        yield where, node
        for key, value in node.items():
            yield from walk(value, f"{where}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from walk(value, f"{where}/{i}")


# ------------------------------------------------------------------ the schemas themselves

@pytest.mark.parametrize("name", OUTPUTS)
def test_schema_is_draft_2020_12_and_every_reference_resolves(name):
    doc = schema(name)
    jsonschema.Draft202012Validator.check_schema(doc)
    assert doc["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert doc["$id"] == BASE_URI + name and doc["title"] and doc["description"]
    resolver = registry().resolver(base_uri=doc["$id"])
    refs = [node["$ref"] for _, node in walk(doc) if isinstance(node.get("$ref"), str)]
    assert refs
    for ref in refs:
        assert resolver.lookup(ref).contents, ref


@pytest.mark.parametrize("name", OUTPUTS)
def test_every_object_is_closed_fully_required_and_described(name):
    """The emitters always write every key of an entry: each object schema requires all the keys
    it lists and says whether others may appear; every part says what it is."""
    doc = schema(name)
    for where, node in walk(doc):
        if "properties" in node and not where.endswith(("/properties", "/if")):
            assert node.get("additionalProperties") is False, where
            assert sorted(node.get("required", [])) == sorted(node["properties"]), where
            for key, prop in node["properties"].items():
                assert prop.get("description") or prop.get("$ref"), f"{where}/properties/{key}"
    for key, part in doc.get("$defs", {}).items():
        assert part.get("title") and part.get("description"), f"$defs/{key}"


def test_closed_sets_are_the_ones_the_code_uses():
    from troubleshoot.engine.loader import ID_RE
    from troubleshoot.engine.xid import actions
    from troubleshoot.model import SEVERITIES
    from troubleshoot.report.jsonfmt import SCHEMA

    defs = schema("diagnose.schema.json")["$defs"]
    assert defs["severity"]["enum"] == list(SEVERITIES)
    assert defs["diagnosis"]["properties"]["action"]["enum"] == [*actions(), None]
    assert defs["diagnosis"]["properties"]["rule"]["pattern"] == ID_RE.pattern
    assert defs["fix"]["properties"]["fixer"]["pattern"] == ID_RE.pattern
    from troubleshoot.fixes import journal, registry

    assert schema("fixers.schema.json")["$defs"]["fixer"]["properties"]["id"]["pattern"] == registry.ID_RE.pattern
    assert set(schema("history.schema.json")["$defs"]["applied"]["properties"]["status"]["enum"]) == journal.STATUSES
    for name in OUTPUTS:
        assert schema(name)["properties"]["schema"]["const"] == SCHEMA


# ------------------------------------------------------------------ diagnose

def test_one_log_without_facts():
    doc = diagnose("--no-probe", "--log", str(CUDA_OOM))
    assert doc["facts"] is None and doc["logs"] == 1 and doc["summary"] is None
    top = doc["diagnoses"][0]
    assert top["symptom"] == "cuda-oom" and top["captures"] and top["fixes"][0]["params"]
    assert top["evidence"][0]["source"] == "log" and top["evidence"][0]["span"]


def test_one_log_with_a_fixture_snapshot_names_it_in_facts(tmp_path):
    snap = xid79_snapshot(tmp_path / "node.json")
    doc = diagnose("--snapshot", str(snap), "--log", str(CUDA_OOM))
    assert doc["facts"] == f"snapshot {snap}"
    by_rule = {d["rule"]: d for d in doc["diagnoses"]}
    assert by_rule["torch-cuda-oom-fragmentation"]["count"] == 1
    from_facts = [d for d in doc["diagnoses"] if d["count"] == 0]
    assert from_facts and from_facts[0]["action"] == "reboot"
    fact = next(e for e in from_facts[0]["evidence"] if e["source"] == "fact")
    assert fact["path"] == "kernel.xid_events" and fact["value"][0]["code"] == 79


def test_the_healthy_fixture_snapshot_with_the_log_from_stdin():
    snap = FIXTURES / "snapshots" / "base.json"
    doc = diagnose("--snapshot", str(snap), "--log", "-", stdin=CUDA_OOM.read_bytes())
    assert doc["source"] == "stdin" and doc["facts"] == f"snapshot {snap}"
    assert [d["symptom"] for d in doc["diagnoses"]][:1] == ["cuda-oom"]


def test_an_xid_line_gives_its_code_and_action():
    doc = diagnose("--no-probe", "--log", str(XID79_DMESG))
    xids = [d for d in doc["diagnoses"] if d["xid"]]
    assert xids and xids[0]["xid"]["code"] == 79 and xids[0]["action"] == "reboot"


def test_pasted_state_gives_fact_evidence_and_its_lines():
    doc = diagnose("--no-probe", "--log", str(PASTED_NVSMI))
    evidence = [e for d in doc["diagnoses"] for e in d["evidence"]]
    assert any(e["source"] == "fact" for e in evidence)
    assert any(e["source"] == "log" and e["span"] is None for e in evidence)


@pytest.mark.parametrize("logs", [[PER_RANK], [MERGED], sorted(PER_RANK.iterdir()), [XID79_DMESG, CUDA_OOM]],
                         ids=["rank-folder", "merged-srun-label", "several-logs", "two-unrelated-logs"])
def test_several_logs_and_ranks(logs):
    doc = diagnose("--no-probe", *[a for log in logs for a in ("--log", str(log))])
    assert doc["logs"] > 1 and isinstance(doc["summary"], str)
    seen = [d for d in doc["diagnoses"] if d["count"]]
    assert seen and all(d["files"] for d in seen)
    if logs != [XID79_DMESG, CUDA_OOM]:
        assert seen[0]["ranks"] == [3] and seen[0]["first_seen"]


# ------------------------------------------------------------------ fleet diagnose

def fleet_folder(folder):
    """Five nodes from the fixture snapshot: one on the recorded pcie-degraded machine's driver,
    one GPU at x8 of x16, one with the recorded Xid 79, two without Docker's NVIDIA runtime;
    the recorded rank logs beside them, a file that is no snapshot and one that is no log."""
    folder.mkdir()
    nodes = {f"gpu-0{i}": copy.deepcopy(BASE) for i in range(1, 6)}
    nodes["gpu-02"]["nvml"].update(driver_version="550.54.14", cuda_driver_version="12.4")
    nodes["gpu-03"]["nvml"]["gpus"][0].update(pcie_width_current=8, pcie_width_max=16)
    xid79_snapshot(folder / "gpu-04.json")
    nodes["gpu-04"] = json.loads((folder / "gpu-04.json").read_text())
    for name in ("gpu-01", "gpu-05"):
        nodes[name]["docker"].update(runtimes=["io.containerd.runc.v2", "runc"], nvidia_runtime=False,
                                     daemon_json=None, daemon_json_nvidia_runtime=None)
    for name, snap in nodes.items():
        snap["host"]["hostname"] = name
        (folder / f"{name}.json").write_text(json.dumps(snap))
    (folder / "broken.json").write_text("{not json")
    shutil.copytree(PER_RANK, folder / "logs")
    (folder / "logs" / "core").write_bytes(b"\x7fELF\x02\x01\x01" + bytes(4096))  # no log: left out
    return folder


def fleet(*args: str) -> dict:
    p = run_cli("fleet", "diagnose", *args, "--format", "json", "--jobs", "2")
    assert p.returncode == 0, p.stderr.decode()
    doc = json.loads(p.stdout)
    assert_valid("fleet.schema.json", doc)
    return doc


def test_fleet_diagnose_of_fixture_snapshots_and_their_logs(tmp_path):
    doc = fleet(str(fleet_folder(tmp_path / "snaps")))
    assert {f["kind"] for f in doc["findings"]} == {"drift", "outlier"}
    assert set(doc["per_node"]) == set(doc["nodes"]) >= {f"gpu-0{i}" for i in range(1, 6)}
    assert any(g["nodes"] == ["gpu-01", "gpu-05"] for g in doc["groups"])
    assert doc["diagnoses"] and doc["summary"] and doc["logs"] == 4
    assert any("broken" in w for w in doc["warnings"]) and doc["left_out"] == 0
    assert [s["file"] for s in doc["skipped"]] == [str(tmp_path / "snaps" / "logs" / "core")]


def test_fleet_diagnose_with_nodes_left_out(tmp_path):
    folder = fleet_folder(tmp_path / "snaps")
    shutil.rmtree(folder / "logs")
    doc = fleet(str(folder), "--max-nodes", "3")
    assert doc["left_out"] == 3 and doc["logs"] == 0 and doc["diagnoses"] == [] and doc["summary"] is None


# ------------------------------------------------------------------ run

def run_job(tmp_path, *job: str, options=()) -> tuple[subprocess.CompletedProcess, dict]:
    """`troubleshoot run --format json` on a job; its report from beside the log unless
    `options` name one."""
    log = tmp_path / "job.log"
    argv = [sys.executable, "-m", "troubleshoot", "run", "--format", "json", "--no-probe", "--log-to", str(log),
            *options, "--", *job]
    p = subprocess.run(argv, capture_output=True, cwd=REPO, timeout=120, stdin=subprocess.DEVNULL)
    report = tmp_path / "report.json" if "--report" in options else tmp_path / "job.log.json"
    doc = json.loads(report.read_text())
    assert_valid("run.schema.json", doc)
    return p, doc


def test_run_report_of_a_job_that_exits_3(tmp_path):
    p, doc = run_job(tmp_path, sys.executable, "-c", "raise SystemExit(3)")
    assert p.returncode == 3 and doc["exit_code"] == 3 and doc["signal"] is None
    assert doc["run"]["available"] is True and doc["leftovers"] == []
    assert doc["source"] == str(tmp_path / "job.log")


def test_run_report_of_a_job_whose_output_is_diagnosed(tmp_path):
    job = f"import sys; sys.stdout.write(open({str(CUDA_OOM)!r}).read()); sys.exit(1)"
    p, doc = run_job(tmp_path, sys.executable, "-c", job,
                     options=("--no-watch", "--report", str(tmp_path / "report.json")))
    assert p.returncode == 1 and doc["run"] is None
    assert doc["diagnoses"][0]["symptom"] == "cuda-oom"


# The job starts a child in its own process group, then is killed by a signal: the child is a
# leftover that `run` stops. The job waits for the child's first line: Popen returns once the
# exec has begun, but the kernel sets the new command line a moment later, and a loaded machine
# could show the child by its name alone.
KILLED_WITH_A_CHILD = """
import os, signal, subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(120)"],
                         stdout=subprocess.PIPE)
child.stdout.readline()
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_run_report_of_a_job_killed_by_a_signal_with_a_leftover(tmp_path):
    p, doc = run_job(tmp_path, sys.executable, "-c", KILLED_WITH_A_CHILD, options=("--grace", "5"))
    assert p.returncode == 137 and doc["exit_code"] == 137 and doc["signal"] == 9
    assert len(doc["leftovers"]) == 1 and "time.sleep(120)" in doc["leftovers"][0]["command"]
    assert doc["leftovers"][0]["killed"] is False


def test_the_run_area_is_checked_against_the_snapshot_schema(tmp_path):
    _, doc = run_job(tmp_path, sys.executable, "-c", "raise SystemExit(3)")
    doc["run"]["samples"] = "many"
    assert any(e.startswith("run/samples:") for e in errors("run.schema.json", doc))


# ------------------------------------------------------------------ keys the schemas do not know

def test_a_key_the_emitter_adds_fails_validation_at_every_level(tmp_path):
    """What `additionalProperties: false` buys: an emitter that writes a new key fails the tests
    above until the schema (and docs/json-output.md) describe it."""
    doc = diagnose("--no-probe", "--log", str(XID79_DMESG), "--log", str(PASTED_NVSMI))
    with_xid = next(i for i, d in enumerate(doc["diagnoses"]) if d["xid"])
    with_fact = next(i for i, d in enumerate(doc["diagnoses"]) if any(e["source"] == "fact" for e in d["evidence"]))
    fact = next(j for j, e in enumerate(doc["diagnoses"][with_fact]["evidence"]) if e["source"] == "fact")
    places = [(), ("diagnoses", 0), ("diagnoses", 0, "evidence", 0), ("diagnoses", with_fact, "evidence", fact),
              ("diagnoses", 0, "fixes", 0), ("diagnoses", 0, "origin"), ("diagnoses", with_xid, "xid")]
    for place in places:
        changed = copy.deepcopy(doc)
        target = changed
        for key in place:
            target = target[key]
        target["new_key"] = 1
        found = errors("diagnose.schema.json", changed)
        assert any("'new_key' was unexpected" in e for e in found), (place, found)
    fleet_doc = fleet(str(fleet_folder(tmp_path / "snaps")))
    for place in [(), ("findings", 0), ("groups", 0), ("per_node", "gpu-04", 0), ("skipped", 0)]:
        changed = copy.deepcopy(fleet_doc)
        target = changed
        for key in place:
            target = target[key]
        target["new_key"] = 1
        assert any("'new_key' was unexpected" in e for e in errors("fleet.schema.json", changed)), place


def test_a_key_the_emitter_drops_fails_validation():
    doc = diagnose("--no-probe", "--log", str(CUDA_OOM))
    for key in ("facts", "summary"):
        assert errors("diagnose.schema.json", {k: v for k, v in doc.items() if k != key}) == [
            f"(top): '{key}' is a required property"]
    changed = copy.deepcopy(doc)
    del changed["diagnoses"][0]["first_seen"]
    assert errors("diagnose.schema.json", changed) == ["diagnoses/0: 'first_seen' is a required property"]


# ------------------------------------------------------------------ the documented way to validate

def documented_validator() -> str:
    text = (REPO / "docs" / "json-output.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 1
    return blocks[0]


def test_the_validation_script_in_the_docs_works_as_written(tmp_path):
    script = tmp_path / "validate.py"
    script.write_text(documented_validator())
    p = run_main("diagnose", "--format", "json", "--no-probe", "--log", str(PER_RANK))
    (tmp_path / "diagnosis.json").write_bytes(p.stdout)
    _, run_doc = run_job(tmp_path, sys.executable, "-c", "raise SystemExit(3)")
    bad = json.loads(p.stdout)
    bad["diagnoses"][0]["new_key"] = 1
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    for name, document, ok in (("diagnose.schema.json", "diagnosis.json", True),
                               ("run.schema.json", "job.log.json", True),
                               ("diagnose.schema.json", "bad.json", False)):
        v = subprocess.run([sys.executable, str(script), name, document], cwd=tmp_path, capture_output=True,
                           timeout=60)
        assert (v.returncode == 0) == ok, v.stderr.decode()[-2000:]
        if not ok:
            assert "'new_key' was unexpected" in v.stderr.decode()
    # The one-file validator the docs name for diagnose.schema.json, which refers to no other file.
    for document, code in (("diagnosis.json", 0), ("bad.json", 1)):
        v = subprocess.run([sys.executable, "-W", "ignore", "-m", "jsonschema", "-i", document,
                            str(SCHEMAS / "diagnose.schema.json")], cwd=tmp_path, capture_output=True, timeout=60)
        assert v.returncode == code, v.stderr.decode()[-2000:]


# ------------------------------------------------------------------ rules, symptoms, fixers, history

TEAM_RULE = """\
rules:
- id: {id}
  symptom: {symptom}
  title: {title}
  severity: warning
  match:
    log: ['loss is nan']
  explain: x
  examples: {{match: ["loss is nan"], no_match: ["ok"]}}
"""


def listed(*args: str) -> dict:
    p = run_main(*args, "--format", "json")
    assert p.returncode == 0, p.stderr.decode()
    return json.loads(p.stdout)


def test_rules_list_with_a_team_rule_an_override_and_a_disable(rules_dir):
    shipped = listed("rules", "list")
    assert_valid("rules.schema.json", shipped)
    target, victim = shipped["rules"][0]["id"], shipped["rules"][-1]["id"]
    d = rules_dir({"team.yaml": TEAM_RULE.format(id="team-nan", symptom="nan-loss", title="NaN"),
                   "override.yaml": TEAM_RULE.format(id=target, symptom="nan-loss", title="mine"),
                   "off.yaml": f"disable: [{victim}]\n"})
    doc = listed("rules", "list", "--rules", str(d))
    assert_valid("rules.schema.json", doc)
    by_id = {r["id"]: r for r in doc["rules"]}
    assert by_id[target]["overrides"] and by_id["team-nan"]["pack"] == str(d) and victim in doc["disabled"]


def test_rules_symptoms_with_a_team_symptom(rules_dir):
    d = rules_dir({"symptoms.yaml": "symptoms:\n  team-license-server: 'the license server is down'\n"})
    doc = listed("rules", "symptoms", "--rules", str(d))
    assert_valid("symptoms.schema.json", doc)
    rows = {r["id"]: r for r in doc["symptoms"]}
    assert rows["team-license-server"]["line"] == 2 and rows["cuda-oom"]["path"] is None


def test_fixers_list():
    doc = listed("fixers", "list")
    assert_valid("fixers.schema.json", doc)
    params = [p for f in doc["fixers"] for p in f["params"]]
    assert any(p["choices"] for p in params) and any(not p["required"] for p in params)


def test_history_with_an_applied_an_undone_and_a_corrupt_journal(tmp_path):
    from troubleshoot.fixes import journal

    base = FIXTURES / "snapshots" / "base.json"
    for root in (tmp_path / "a", tmp_path / "b"):
        root.mkdir()
        p = run_main("fix", "blacklist-nouveau", "--root", str(root), "--snapshot", str(base), "--apply", "--yes")
        assert p.returncode == 0, p.stderr.decode()
    latest = next(e.id for _, e in journal.entries() if isinstance(e, journal.Entry))
    assert run_main("undo", latest, "--yes").returncode == 0
    bad = journal.state_dir() / "20261129-120000-set-env-dead"
    bad.mkdir(mode=0o700)
    (bad / "journal.json").write_text('{"schema": 1, "id": "someone else"}')
    doc = listed("history")
    assert_valid("history.schema.json", doc)
    assert sorted(r["status"] for r in doc["history"]) == ["applied", "corrupt", "undone"]

