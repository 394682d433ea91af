"""The CLI contract, run as a real child process the way users and scripts run it."""

import json
import os
import sys

from conftest import REPO, run_cli

OOM_LOG = (REPO / "examples" / "logs" / "cuda-oom.log")

TEAM_RULE = """\
rules:
- id: team-dataset-missing
  symptom: io-stall
  title: Dataset mount is gone
  severity: error
  confidence: 0.9
  match:
    log: ['DATASET (?P<mount>/mnt/\\S+) NOT MOUNTED']
  explain: The dataset at {mount} is not mounted.
  fixes:
    - fixer: advice
      title: Remount {mount}
      params: {text: "mount {mount}"}
  examples:
    match: ["ERROR DATASET /mnt/imagenet NOT MOUNTED"]
    no_match: ["DATASET /mnt/imagenet mounted"]
"""


def diagnose_json(*args, input=None):
    p = run_cli("diagnose", "--format", "json", "--no-probe", *args, input=input)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout), p


def test_json_contract_on_the_sample_log():
    doc, _ = diagnose_json("--log", str(OOM_LOG))
    assert doc["schema"] == 1
    top = doc["diagnoses"][0]
    assert set(top) >= {"rule", "symptom", "title", "severity", "confidence", "evidence", "explain", "fixes"}
    assert top["symptom"] == "cuda-oom"
    assert 0 <= top["confidence"] <= 1
    ev = top["evidence"][0]
    assert ev["source"] == "log" and isinstance(ev["line"], int) and "CUDA out of memory" in ev["text"]
    for fix in top["fixes"]:
        assert set(fix) >= {"fixer", "title", "params"}


def test_stdin_dash_and_piped_stdin_agree():
    log = OOM_LOG.read_bytes()
    a, _ = diagnose_json("--log", "-", input=log)
    b, _ = diagnose_json(input=log)
    assert a["diagnoses"] == b["diagnoses"] and a["diagnoses"]


def test_nothing_matched_is_an_empty_list_and_exit_0():
    doc, _ = diagnose_json(input=b"epoch 1 loss 0.3\nepoch 2 loss 0.2\ndone\n")
    assert doc["diagnoses"] == []


def test_unreadable_log_is_one_line_exit_2(tmp_path):
    (tmp_path / "empty").mkdir()  # a folder is read as per-rank logs; one without any is an error
    for target in (tmp_path / "missing.log", tmp_path / "empty"):
        p = run_cli("diagnose", "--log", str(target))
        assert p.returncode == 2
        err = p.stderr.decode()
        assert err.startswith("troubleshoot: error: cannot read log") and err.count("\n") == 1
        assert "Traceback" not in err


def test_bad_usage_is_one_line_exit_2():
    p = run_cli("diagnose", "--format", "yaml", input=b"x")
    assert p.returncode == 2 and p.stderr.decode().count("\n") == 1
    assert p.stderr.decode().startswith("troubleshoot: error:")


def test_text_and_markdown_outputs():
    p = run_cli("diagnose", "--no-probe", "--log", str(OOM_LOG))
    out = p.stdout.decode()
    assert p.returncode == 0 and "1. [ERROR]" in out and "CUDA out of memory" in out
    p = run_cli("diagnose", "--no-probe", "--log", str(OOM_LOG), "--format", "markdown")
    assert p.stdout.decode().startswith("# troubleshoot report") and "| 1 | error | `cuda-oom`" in p.stdout.decode()


def test_team_rule_folder_adds_a_rule_that_fires(rules_dir):
    d = rules_dir({"team.yaml": TEAM_RULE})
    doc, _ = diagnose_json("--rules", str(d), input=b"start\nERROR DATASET /mnt/coco NOT MOUNTED\n")
    top = doc["diagnoses"][0]
    assert top["rule"] == "team-dataset-missing"
    assert top["explain"] == "The dataset at /mnt/coco is not mounted."
    assert top["fixes"] == [{"fixer": "advice", "title": "Remount /mnt/coco", "params": {"text": "mount /mnt/coco"}}]
    assert top["origin"]["pack"] == str(d)


def test_broken_team_file_warns_with_file_line_and_keeps_shipped_rules(rules_dir):
    d = rules_dir({"team.yaml": TEAM_RULE, "broken.yaml": "rules:\n- id: x\n  title: [unclosed\n"})
    doc, p = diagnose_json("--rules", str(d), "--log", str(OOM_LOG))
    err = p.stderr.decode()
    assert f"{d / 'broken.yaml'}:" in err and "warning" in err
    assert doc["diagnoses"][0]["symptom"] == "cuda-oom"  # shipped rules still work
    lint = run_cli("rules", "lint", "--rules", str(d))
    assert lint.returncode == 2 and f"{d / 'broken.yaml'}:3:" in lint.stdout.decode()


def test_team_rule_overrides_and_disables_by_id(rules_dir):
    shipped = json.loads(run_cli("rules", "list", "--format", "json").stdout)["rules"]
    target = next(r for r in shipped if r["symptom"] == "cuda-oom")
    victim = next(r for r in shipped if r["symptom"] == "nan-loss")
    override = TEAM_RULE.replace("team-dataset-missing", target["id"])
    d = rules_dir({"override.yaml": override, "off.yaml": f"disable: [{victim['id']}]\n"})
    listed = json.loads(run_cli("rules", "list", "--format", "json", "--rules", str(d)).stdout)
    by_id = {r["id"]: r for r in listed["rules"]}
    assert by_id[target["id"]]["pack"] == str(d) and by_id[target["id"]]["overrides"]
    assert victim["id"] not in by_id and victim["id"] in listed["disabled"]


def test_rules_from_env_and_config(rules_dir, tmp_path):
    d = rules_dir({"team.yaml": TEAM_RULE})
    env = dict(os.environ, TROUBLESHOOT_RULES=str(d))
    listed = json.loads(run_cli("rules", "list", "--format", "json", env=env).stdout)
    assert any(r["id"] == "team-dataset-missing" and r["pack"].startswith("env:") for r in listed["rules"])
    cfg = tmp_path / "xdg-config" / "troubleshoot"
    cfg.mkdir(parents=True)
    (cfg / "config.yaml").write_text(f"rules:\n  - {d}\n")
    env = dict(os.environ)
    env.pop("TROUBLESHOOT_RULES", None)
    listed = json.loads(run_cli("rules", "list", "--format", "json", env=env).stdout)
    assert any(r["id"] == "team-dataset-missing" and r["pack"].startswith("config:") for r in listed["rules"])


def test_rules_why_traces_lines_and_reasons(rules_dir, tmp_path):
    d = rules_dir({"team.yaml": TEAM_RULE})
    log = tmp_path / "a.log"
    log.write_text("x\nERROR DATASET /mnt/a NOT MOUNTED\n")
    p = run_cli("rules", "why", "team-dataset-missing", "--log", str(log), "--rules", str(d))
    out = p.stdout.decode()
    assert p.returncode == 0 and ": fired" in out and "line 2: ERROR DATASET /mnt/a NOT MOUNTED" in out
    log.write_text("nothing here\n")
    out = run_cli("rules", "why", "team-dataset-missing", "--log", str(log), "--rules", str(d)).stdout.decode()
    assert "did not fire: no line matched match.log" in out
    p = run_cli("rules", "why", "no-such-rule", "--log", str(log))
    assert p.returncode == 2 and "unknown rule 'no-such-rule' (see" in p.stderr.decode()


def test_rules_show_and_list():
    listed = json.loads(run_cli("rules", "list", "--format", "json").stdout)
    rid = listed["rules"][0]["id"]
    p = run_cli("rules", "show", rid)
    assert p.returncode == 0 and p.stdout.decode().startswith(rid)


def test_diagnose_never_imports_textual():
    code = ("import sys, io; from troubleshoot import cli; sys.stdin = io.TextIOWrapper(io.BytesIO(b'x'));"
            f"cli.main(['diagnose', '--no-probe', '--log', {str(OOM_LOG)!r}, '--format', 'json']);"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('textual', 'rich')];"
            "sys.stderr.write(repr(bad)); sys.exit(1 if bad else 0)")
    import subprocess

    p = subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=REPO)
    assert p.returncode == 0, p.stderr.decode()
