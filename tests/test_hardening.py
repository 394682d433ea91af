"""Bad input cannot hang, crash or mislead: careless patterns, huge lines, failing disks."""

import errno
import json
import sys

import pytest

from conftest import REPO, run_cli
from troubleshoot.fixes import executor, journal
from troubleshoot.fixes.plan import Plan, WriteFile

sys.path.insert(0, str(REPO / "benchmarks"))
import scan_bench  # noqa: E402

EVIL = """\
rules:
- id: evil-backtracking
  symptom: nan-loss
  title: backtracking patterns
  severity: error
  match:
    log: ['(a+)+$', '(.*a){20}']
  explain: x
  examples: {match: ["aaaa"], no_match: ["b"]}
- id: matches-everything
  symptom: nan-loss
  title: matches every line
  severity: warning
  match:
    log: ['.*']
  explain: x
  examples: {match: ["x"], no_match: ["y"]}
"""


def test_catastrophic_patterns_run_in_linear_time_and_lint_says_why(rules_dir, tmp_path):
    d = rules_dir({"evil.yaml": EVIL})
    log = tmp_path / "a.log"
    log.write_text("a" * 100_000 + "\n" + "a" * 100_000 + "b\n")
    # A backtracking engine would not finish this in hours; the timeout only guards the test run.
    p = run_cli("diagnose", "--no-probe", "--format", "json", "--rules", str(d), "--log", str(log), timeout=120)
    assert p.returncode == 0
    ids = [x["rule"] for x in json.loads(p.stdout)["diagnoses"]]
    assert "evil-backtracking" in ids
    lint = run_cli("rules", "lint", "--rules", str(d)).stdout.decode()
    assert "nested repetition" in lint and "pattern matches an empty line" in lint


def test_a_pattern_matching_every_line_is_capped(rules_dir, tmp_path):
    d = rules_dir({"evil.yaml": EVIL})
    log = tmp_path / "big.log"
    log.write_text("".join(f"step {i} loss 0.{i % 97}\n" for i in range(60_000)))
    p = run_cli("diagnose", "--no-probe", "--format", "json", "--rules", str(d), "--log", str(log), timeout=120)
    hit = next(x for x in json.loads(p.stdout)["diagnoses"] if x["rule"] == "matches-everything")
    assert len(hit["evidence"]) <= 6
    assert any("at least" in n and "counting stopped" in n for n in hit["notes"])


@pytest.mark.slow
def test_a_100_mb_line_without_newline(tmp_path):
    log = tmp_path / "one-line.log"
    with open(log, "wb") as f:
        block = b"x" * (1 << 20)
        for i in range(100):
            f.write(block if i != 60 else block[:-120] + b" RuntimeError: CUDA error: an illegal memory access was encountered ")
    out = tmp_path / "out.json"
    with open(out, "wb") as fo:
        _, rss_kib, res = scan_bench.timed([sys.executable, "-m", "troubleshoot", "diagnose", "--no-probe", "--format",
                                            "json", "--log", str(log)], stdout=fo)
    assert res.returncode == 0, res.stderr
    doc = json.loads(out.read_text())
    assert doc["lines"] == 1
    assert doc["diagnoses"] and doc["diagnoses"][0]["symptom"] == "illegal-memory-access"
    assert len(doc["diagnoses"][0]["evidence"][0]["text"]) <= 400
    assert rss_kib / 1024 < 200


def test_binary_file_is_one_line_and_binary_bytes_inside_a_log_are_read_through(tmp_path):
    core = tmp_path / "core.bin"
    tail = b"\nRuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB\x00\xff\n"
    core.write_bytes(bytes(range(256)) * 40_000 + tail)
    p = run_cli("diagnose", "--no-probe", "--format", "json", "--log", str(core))
    err = p.stderr.decode()
    assert p.returncode == 2 and err.count("\n") == 1 and f"{core} is not a text log" in err and "Traceback" not in err
    log = tmp_path / "train.log"  # a text log with a megabyte of binary in it (a core dump cat'ed into it)
    log.write_bytes(b"".join(b"step %d loss 0.5\n" % i for i in range(1000)) + bytes(range(256)) * 4_000 + tail)
    p = run_cli("diagnose", "--no-probe", "--format", "json", "--log", str(log))
    assert p.returncode == 0 and json.loads(p.stdout)["diagnoses"][0]["symptom"] == "cuda-oom"


def test_yaml_bomb_and_deep_nesting_in_a_team_file_are_reported(rules_dir):
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    prev = "a"
    for name in "bcdefghi":
        bomb += f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 10) + "]\n"
        prev = name
    d = rules_dir({"bomb.yaml": bomb, "deep.yaml": "rules: " + "[" * 5000 + "]" * 5000 + "\n"})
    p = run_cli("rules", "lint", "--rules", str(d), timeout=120)
    out = p.stdout.decode()
    assert p.returncode == 2 and "bomb.yaml:" in out and "deep.yaml" in out and "Traceback" not in p.stderr.decode()


def test_disk_full_mid_plan_stops_and_everything_is_restorable(tmp_path, monkeypatch):
    a, b = tmp_path / "a.conf", tmp_path / "b.conf"
    a.write_text("old a\n")
    b.write_text("old b\n")
    real = executor.write_in

    def full_on_b(fd, name, data, mode=None):
        if name == b.name:
            raise OSError(errno.ENOSPC, "No space left on device", str(b))
        return real(fd, name, data, mode)

    monkeypatch.setattr(executor, "write_in", full_on_b)
    out = executor.apply(executor.prepare(Plan("t", "t", {}, (WriteFile(str(a), "new a\n"), WriteFile(str(b), "new b\n")))))
    assert out.failed and "No space left on device" in out.failed
    assert a.read_text() == "new a\n" and b.read_text() == "old b\n"
    monkeypatch.setattr(executor, "write_in", real)
    executor.undo(out.entry.id)
    assert a.read_text() == "old a\n" and b.read_text() == "old b\n"


def test_read_only_target_fails_cleanly(tmp_path, monkeypatch):
    a = tmp_path / "ro.conf"
    a.write_text("old\n")
    import os

    real_replace = os.replace

    def erofs(src, dst, **kw):
        if str(dst) == a.name:
            raise OSError(errno.EROFS, "Read-only file system", str(a))
        return real_replace(src, dst, **kw)

    monkeypatch.setattr(os, "replace", erofs)
    out = executor.apply(executor.prepare(Plan("t", "t", {}, (WriteFile(str(a), "new\n"),))))
    monkeypatch.setattr(os, "replace", real_replace)
    assert out.failed and "Read-only file system" in out.failed
    assert a.read_text() == "old\n" and not list(tmp_path.glob(".ro.conf.*"))
    assert journal.load(out.entry.id).data["status"] == "failed"


def test_real_tiny_tmpfs_when_we_may_mount(tiny_disk):
    """A real full disk: a 64 KiB tmpfs, when this machine lets us mount one (root, no sandbox)."""
    target = tiny_disk / "conf"
    target.write_text("old\n")
    out = executor.apply(executor.prepare(Plan("t", "t", {}, (WriteFile(str(target), "x" * (1 << 20)),))))
    assert out.failed and "No space left" in out.failed
    assert target.read_text() == "old\n"
