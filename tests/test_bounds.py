"""Every input bounded: rule caches hold data, conditions and snapshots have limits, logs are
opened once. None of these ends in a traceback."""

import json
import marshal
import os
import pickle
import threading
from pathlib import Path

import pytest

from conftest import REPO, run_cli
from troubleshoot import usercache
from troubleshoot.engine import conditions, documents
from troubleshoot.engine.ruleset import load_ruleset

RULE = """\
rules:
- id: team-rule
  symptom: nan-loss
  title: a team rule
  severity: error
  match:
    log: ['loss is nan']
  explain: x
  examples: {{match: ["loss is nan"], no_match: ["ok"]}}
{extra}"""


def forget_rulesets() -> None:
    """The whole rule set is cached on top of each file's YAML (rulecache): these tests are
    about the files' cache, which a load reads only when the rule set is not cached."""
    import shutil

    shutil.rmtree(Path(os.environ["XDG_CACHE_HOME"]) / "troubleshoot" / "rulesets", ignore_errors=True)


def no_traceback(p) -> None:
    assert b"Traceback" not in p.stdout + p.stderr, (p.stdout + p.stderr).decode()[-3000:]


class Boom:
    def __reduce__(self):
        return (os.system, (f"touch {os.environ['XDG_CACHE_HOME']}/PWNED",))


@pytest.mark.cold_cache
def test_a_planted_cache_never_runs_code(rules_dir):
    d = rules_dir({"team.yaml": RULE.format(extra="")})
    load_ruleset([d])  # writes the cache
    cache = Path(os.environ["XDG_CACHE_HOME"]) / "troubleshoot" / "rules"
    files = list(cache.iterdir())
    assert files and all(usercache.unpack_entry(f.read_bytes()) for f in files)
    for f in files:
        f.write_bytes(pickle.dumps(Boom()))
        f.with_suffix(".pickle").write_bytes(pickle.dumps(Boom()))
    forget_rulesets()
    p = run_cli("rules", "list", "--rules", str(d))
    no_traceback(p)
    assert p.returncode == 0 and b"team-rule" in p.stdout
    assert not (Path(os.environ["XDG_CACHE_HOME"]) / "PWNED").exists()


@pytest.mark.cold_cache
def test_a_cache_others_can_write_is_ignored(rules_dir):
    d = rules_dir({"team.yaml": RULE.format(extra="")})
    load_ruleset([d])
    cache = Path(os.environ["XDG_CACHE_HOME"]) / "troubleshoot" / "rules"
    (f,) = [f for f in cache.iterdir() if usercache.unpack_entry(f.read_bytes())[0][2][0].endswith("team.yaml")]
    head, _ = usercache.unpack_entry(f.read_bytes())
    forged = usercache.pack_entry(head, marshal.dumps(("problems", ((1, "forged by someone else"),))))
    f.write_bytes(forged)
    forget_rulesets()
    os.chmod(cache, 0o777)
    assert "forged" not in " ".join(map(str, load_ruleset([d]).problems))
    forget_rulesets()
    os.chmod(cache, 0o700)
    os.chmod(f, 0o666)
    assert "forged" not in " ".join(map(str, load_ruleset([d]).problems))


@pytest.mark.cold_cache
def test_files_with_problems_are_cached_with_their_problems(rules_dir, monkeypatch):
    d = rules_dir({"bad.yaml": "rules: [\n  {id: x\n"})
    first = [str(p) for p in load_ruleset([d], include_shipped=False).problems]
    assert any("bad.yaml:" in p for p in first)

    def never(*a, **k):
        raise AssertionError("parsed again although the file did not change")

    monkeypatch.setattr(documents, "_parse", never)
    forget_rulesets()
    assert [str(p) for p in load_ruleset([d], include_shipped=False).problems] == first


def test_a_huge_rule_file_is_refused_while_parsing_at_its_line(rules_dir):
    d = rules_dir({"huge.yaml": "rules:\n" + "- [1, 2, 3, 4, 5, 6, 7, 8, 9]\n" * 30_000})
    problems = [p for p in load_ruleset([d], include_shipped=False).problems if "huge.yaml" in str(p)]
    assert problems and "too large" in problems[0].message and problems[0].line and problems[0].line > 1


BAD_CONDITIONS = [
    ("'1' + " * 40 + "driver.version > 1", None),
    ("(" * 200 + "true" + ")" * 200, "nested deeper"),
    ("not " * 100 + "true", "nested deeper"),
    ("nvml.gpu_count > " + "9" * 5000, "condition longer"),
    ("nvml.gpu_count > " + "9" * 1000, "number longer"),
    ("nvml.driver_version >= 525.60.13.1.2.x", "unexpected"),
    ("nvml.driver_version >= 525.60.13", None),
    ("host.os matches '(a+)+$'", None),
    ("host.os matches '(?<=x)y'", "bad regex"),
]


def test_conditions_have_limits_reported_by_lint_at_file_line(rules_dir):
    text = "rules:\n"
    for n, (cond, _) in enumerate(BAD_CONDITIONS):
        text += RULE.format(extra="").split("rules:\n", 1)[1].replace("team-rule", f"team-rule-{n}").replace(
            "    log: ['loss is nan']", f"    log: ['loss is nan']\n    facts: [{json.dumps(cond)}]")
    d = rules_dir({"c.yaml": text})
    problems = {p.line: p.message for p in load_ruleset([d], include_shipped=False).problems if "c.yaml" in p.path}
    for n, (cond, message) in enumerate(BAD_CONDITIONS):
        line = 8 + 9 * n
        if message:
            assert message in problems.get(line, ""), (n, problems)
        else:
            assert line not in problems, problems[line]
    p = run_cli("rules", "lint", "--rules", str(d))
    no_traceback(p)
    assert p.returncode != 0 and b"c.yaml:17:" in p.stdout + p.stderr
    p = run_cli("diagnose", "--no-probe", "--rules", str(d), "--log", str(REPO / "examples" / "logs" / "cuda-oom.log"))
    no_traceback(p)


def test_version_literals_compare_as_versions():
    facts = {"nvml": {"driver_version": "535.104.05"}}
    assert conditions.evaluate(conditions.parse("nvml.driver_version >= 525.60.13"), facts) is True
    assert conditions.evaluate(conditions.parse("nvml.driver_version < 535.104.12"), facts) is True
    assert conditions.evaluate(conditions.parse("nvml.driver_version == 535.104.05"), facts) is True


def test_matches_runs_in_linear_time_on_a_catastrophic_pattern():
    # With Python's re this line takes minutes (each extra 'a' doubles it); RE2 is linear.
    facts = {"x": "a" * 40 + "!"}
    assert conditions.evaluate(conditions.parse("x matches '(a+)+$'"), facts) is False
    assert conditions.evaluate(conditions.parse("x matches '(a|aa)+!'"), facts) is True


def test_huge_numbers_in_a_snapshot_are_dropped_with_a_warning(tmp_path):
    snap = json.loads((REPO / "tests" / "fixtures" / "snapshots" / "base.json").read_text())
    snap["io"]["mem_available_mib"] = int("9" * 4000)
    snap.setdefault("probes", {})["x"] = {"n": -int("9" * 4000)}
    path = tmp_path / "big.json"
    path.write_text(json.dumps(snap))
    p = run_cli("diagnose", "--snapshot", str(path), "--log", str(REPO / "examples" / "logs" / "cuda-oom.log"))
    no_traceback(p)
    assert p.returncode in (0, 1) and b"out of range" in p.stderr


def test_a_fifo_log_is_read_once_as_a_stream(tmp_path):
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    data = (REPO / "examples" / "logs" / "cuda-oom.log").read_bytes()

    def writer():
        with open(fifo, "wb") as f:  # blocks until the reader opens it: exactly once
            f.write(data)

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    p = run_cli("diagnose", "--no-probe", "--log", str(fifo), timeout=60)
    t.join(10)
    no_traceback(p)
    assert p.returncode in (0, 1) and b"out of memory" in p.stdout


def test_an_unreadable_special_file_is_a_one_line_error():
    p = run_cli("fix", "--rule", "torch-cuda-oom-fragmentation", "--log", "/proc/self/mem", "--no-probe")
    no_traceback(p)
    assert p.returncode == 2 and b"cannot read log /proc/self/mem" in p.stderr
