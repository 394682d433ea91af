"""Command-line habits users bring from other tools, through the real command: logs as
arguments, options before the command, `did you mean`, exit statuses in `--help`, shell
completion, a team's own `rules test`, `rules why --no-probe`, `fleet diagnose --fail-on`."""

from __future__ import annotations

import copy
import json
import os
import shlex
import subprocess
import sys

import pytest

from conftest import REPO, run_cli, run_main
from procwait import read_pty, run_on_pty

RANKS = REPO / "tests" / "fixtures" / "ranks" / "per-rank"
RANK_LOGS = sorted(str(p) for p in RANKS.iterdir())
OOM_LOG = str(RANKS / "job.gpu-02.rank3.log")
BASE_SNAPSHOT = json.loads((REPO / "tests" / "fixtures" / "snapshots" / "base.json").read_text())


def team_rule(rid: str, words: str) -> str:
    return f"""\
rules:
- id: {rid}
  symptom: io-stall
  title: {words} seen
  severity: error
  match:
    log: ['{words}']
  explain: The job said {words}.
  examples:
    match: ["ERROR {words}"]
    no_match: ["all fine"]
"""


def ok(p) -> str:
    assert p.returncode == 0, p.stderr.decode()
    assert b"Traceback" not in p.stderr
    return p.stdout.decode()


def error_line(p) -> str:
    """The one line of a usage error (exit 2)."""
    err = p.stderr.decode()
    assert p.returncode == 2 and err.count("\n") == 1 and err.startswith("troubleshoot: error: "), err
    return err.strip()


def diagnosed_rules(*argv: str, cwd=None) -> list[str]:
    out = ok(run_main("diagnose", "--no-probe", "--all", "--format", "json", *argv, cwd=cwd))
    return [d["rule"] for d in json.loads(out)["diagnoses"]]


# ------------------------------------------------------------------ logs as arguments


def test_logs_given_as_arguments_are_diagnosed_as_their_log_options():
    as_options = ok(run_main("diagnose", "--no-probe", "--format", "json", *[w for f in RANK_LOGS for w in ("--log", f)]))
    assert json.loads(as_options)["logs"] == 4
    as_arguments = ok(run_main("diagnose", *RANK_LOGS, "--no-probe", "--format", "json"))
    mixed = ok(run_main("diagnose", RANK_LOGS[0], "--no-probe", RANK_LOGS[1], "--log", RANK_LOGS[2], RANK_LOGS[3],
                        "--format", "json"))
    assert as_arguments == as_options and mixed == as_options


def test_logs_as_arguments_and_log_options_are_read_in_the_order_given(tmp_path):
    first, second = str(tmp_path / "first.log"), str(tmp_path / "second.log")  # neither exists: the first read fails
    assert error_line(run_main("diagnose", first, "--no-probe", "--log", second)).endswith(
        f"cannot read log {first}: No such file or directory")
    assert error_line(run_main("diagnose", "--log", second, first, "--no-probe")).endswith(
        f"cannot read log {second}: No such file or directory")


def test_after_a_double_dash_every_word_is_a_log(tmp_path):
    (tmp_path / "-odd.log").write_text(open(OOM_LOG).read())
    assert "torch-cuda-oom-fragmentation" in diagnosed_rules("--", "-odd.log", cwd=tmp_path)


def test_the_help_of_diagnose_and_tui_names_the_log_argument():
    for command in ("diagnose", "tui"):
        out = ok(run_main(command, "--help"))
        assert f"usage: troubleshoot {command} " in out and " LOG" in out.split("options:")[0]
        assert "read as --log LOG" in out


def test_the_tui_takes_its_log_as_an_argument(tmp_path):
    log = tmp_path / "positional-habit.log"
    log.write_text(open(OOM_LOG).read())
    env = {**os.environ, "TERM": "xterm-256color"}

    def once_the_log_is_diagnosed(fd: int) -> bytes:
        try:
            seen = read_pty(fd, until=b"positional-habit.log")  # the log it was given, named on the screen
            return seen + read_pty(fd, until=b"torch-cuda-oom")  # and its diagnosis
        finally:
            os.write(fd, b"q")  # whatever was seen: no TUI is left waiting

    # A short relative path: the screen shows it whole.
    out, code = run_on_pty([sys.executable, "-m", "troubleshoot", "tui", log.name, "--no-probe"], env, tmp_path,
                           once_the_log_is_diagnosed)
    assert code == 0, out[-2000:]


def test_the_tui_takes_one_log():
    line = error_line(run_cli("tui", "a.log", "--log", "b.log"))
    assert "one log only (a.log and b.log given)" in line and "troubleshoot diagnose" in line


# ------------------------------------------------------------------ --rules before the command


def test_rules_before_the_command_join_those_after_it(rules_dir, tmp_path):
    d = rules_dir({"a.yaml": team_rule("team-alpha", "ALPHA BROKE")})
    other = tmp_path / "other-rules"
    other.mkdir()
    (other / "b.yaml").write_text(team_rule("team-beta", "BETA BROKE"))
    log = tmp_path / "job.log"
    log.write_text("ERROR ALPHA BROKE\nERROR BETA BROKE\n")
    after = diagnosed_rules("--rules", str(d), str(log))  # one folder, after the command
    assert "team-alpha" in after and "team-beta" not in after
    only_before = json.loads(ok(run_main("--rules", str(d), "diagnose", "--no-probe", "--format", "json", str(log))))
    assert [x["rule"] for x in only_before["diagnoses"]] == after
    both = json.loads(ok(run_main("--rules", str(d), "diagnose", "--no-probe", "--format", "json", str(log),
                                  "--rules", str(other))))
    assert {"team-alpha", "team-beta"} <= {x["rule"] for x in both["diagnoses"]}
    for argv in (["--rules", str(d), "rules", "list", "--format", "json"],
                 ["rules", "--rules", str(d), "list", "--format", "json"],
                 [f"--rules={d}", "rules", "list", "--format", "json"]):
        listed = json.loads(ok(run_main(*argv)))["rules"]
        assert any(r["id"] == "team-alpha" and r["pack"] == str(d) for r in listed), argv
    assert "team-alpha" in ok(run_main("--rules", str(d), "rules"))  # the group's default: list
    assert "team-alpha" in ok(run_main("--rules", str(d), "rules", "show", "team-alpha"))


def test_rules_before_a_command_that_reads_none_is_an_error(rules_dir):
    d = rules_dir({"a.yaml": team_rule("team-alpha", "ALPHA BROKE")})
    assert error_line(run_main("--rules", str(d), "history")).endswith("--rules: `troubleshoot history` reads no rules")
    assert error_line(run_main("--rules", str(d), "fleet", "probe", "--slurm", "--out", "x")).endswith(
        "--rules: `troubleshoot fleet probe` reads no rules")


def test_rules_before_the_command_still_build_one_parser():
    from troubleshoot import cli

    assert cli.command_in(["--rules", "team-rules", "diagnose", "x.log"]) == "diagnose"
    assert cli.command_in(["--rules=team-rules", "-p", "m", "rules", "test"]) == "rules"
    assert cli.command_in(["--rules"]) is None


# ------------------------------------------------------------------ did you mean


def test_a_misspelt_option_names_the_closest_and_the_help_of_its_command():
    assert error_line(run_main("diagnose", "--lgo", "x")) == (
        "troubleshoot: error: unrecognized arguments: --lgo (did you mean --log?) (see `troubleshoot diagnose --help`)")
    assert error_line(run_main("rules", "why", "torch-cuda-oom", "--nop-robe")).endswith(
        "unrecognized arguments: --nop-robe (did you mean --no-probe?) (see `troubleshoot rules why --help`)")
    assert error_line(run_main("diagnose", "--format=jsno", "x")).endswith(
        "argument --format: invalid choice: 'jsno' (did you mean json?) (see `troubleshoot diagnose --help`)")
    assert error_line(run_main("--verison")).endswith(
        "unrecognized arguments: --verison (did you mean --version?) (see `troubleshoot --help`)")


def test_a_misspelt_command_names_the_closest():
    assert error_line(run_cli("diagnoes")).endswith(
        "argument COMMAND: invalid choice: 'diagnoes' (did you mean diagnose?) (see `troubleshoot --help`)")
    assert "invalid choice: 'shwo' (did you mean show?)" in error_line(run_main("rules", "shwo", "x"))


@pytest.mark.parametrize("argv", [("fix", "--rule", "torch-cuda-om"), ("rules", "show", "torch-cuda-om"),
                                  ("rules", "why", "torch-cuda-om", "--log", OOM_LOG)], ids=" ".join)
def test_a_misspelt_rule_id_names_the_closest(argv):
    assert error_line(run_main(*argv)) == "troubleshoot: error: unknown rule 'torch-cuda-om' (did you mean torch-cuda-oom?)"


def test_a_disabled_rule_names_what_disabled_it(rules_dir):
    d = rules_dir({"off.yaml": "disable: [torch-cuda-oom]\n"})
    line = error_line(run_main("rules", "show", "torch-cuda-oom", "--rules", str(d)))
    assert line.endswith(f"rule 'torch-cuda-oom' is disabled by {d / 'off.yaml'}:1")


# ------------------------------------------------------------------ exit statuses in --help


@pytest.mark.parametrize("command,statuses", [((), ("0", "1", "2", "130", "run:")),
                                              (("diagnose",), ("0", "1", "2", "130")),
                                              (("fleet", "diagnose"), ("0", "1", "2", "130")),
                                              (("run",), ("N", "127", "126", "2"))], ids=lambda x: " ".join(x))
def test_help_lists_the_exit_statuses(command, statuses):
    out = ok(run_main(*command, "--help"))
    listed = out.split("\nexit status:\n", 1)[1].splitlines()
    assert [ln.split()[0] for ln in listed if ln.startswith("  ") and not ln.startswith("   ")] == list(statuses)


def test_the_listed_fail_on_status_is_the_one_returned(tmp_path):
    from troubleshoot.cli_help import FAIL_ON_CHOICES
    from troubleshoot.model import SEVERITIES

    assert FAIL_ON_CHOICES == SEVERITIES
    assert run_main("diagnose", OOM_LOG, "--no-probe", "--fail-on", "error").returncode == 1
    assert run_main("diagnose", str(tmp_path), "--no-probe", "--fail-on", "error").returncode == 2  # no log in it


# ------------------------------------------------------------------ shell completion


def completion(shell: str) -> str:
    return ok(run_cli("completion", shell))


def test_bash_completion_registers_and_completes_commands_options_choices_and_paths():
    script = f"""
        source <({shlex.quote(sys.executable)} -m troubleshoot completion bash) || exit 1
        complete -p troubleshoot
        fn=$(complete -p troubleshoot | sed -E 's/.* -F ([^ ]+) .*/\\1/')
        comp() {{ COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${{#COMP_LINE}}; COMPREPLY=()
                 "$fn" troubleshoot "${{@: -1}}" "${{@: -2:1}}"; echo "$* => ${{COMPREPLY[*]}}"; }}
        comp troubleshoot diag
        comp troubleshoot diagnose --lo
        comp troubleshoot diagnose --format ''
        comp troubleshoot rules why torch-cuda-oom --no-p
        comp troubleshoot diagnose tests/fixtures/ranks/per-rank/job.gpu-02.rank
    """
    p = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith("complete ") and lines[0].endswith(" troubleshoot")
    assert "troubleshoot diag => diagnose" in lines
    assert "troubleshoot diagnose --lo => --log" in lines
    assert "troubleshoot diagnose --format  => text json markdown" in lines
    assert "troubleshoot rules why torch-cuda-oom --no-p => --no-probe" in lines
    paths = next(ln for ln in lines if ln.startswith("troubleshoot diagnose tests/")).split(" => ")[1]
    assert sorted(paths.split()) == [f"tests/fixtures/ranks/per-rank/job.gpu-02.rank{n}.log" for n in (2, 3)]


def test_zsh_and_tcsh_completion_come_from_the_same_parser():
    zsh = completion("zsh")
    assert zsh.startswith("#compdef troubleshoot") and "--fail-on" in zsh and "completion" in zsh
    tcsh = completion("tcsh")
    assert "complete troubleshoot" in tcsh and "diagnose" in tcsh
    assert error_line(run_cli("completion", "fsh")).endswith("invalid choice: 'fsh' (did you mean zsh?) "
                                                             "(see `troubleshoot completion --help`)")


def test_only_the_completion_command_imports_its_library():
    code = ("import sys; from troubleshoot import cli;"
            f"cli.main(['diagnose', '--no-probe', '--format', 'json', {OOM_LOG!r}]);"
            "sys.stderr.write(repr(sorted(m for m in ('shtab', 'difflib') if m in sys.modules)))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=REPO, timeout=60)
    assert p.returncode == 0 and p.stderr.decode().rsplit("\n", 1)[-1] == "[]", p.stderr.decode()


# ------------------------------------------------------------------ rules test: a team's own folder


def test_rules_test_with_rules_tests_those_folders_alone(rules_dir):
    d = rules_dir({"a.yaml": team_rule("team-alpha", "ALPHA BROKE"), "b.yaml": team_rule("team-beta", "BETA BROKE")})
    own = run_main("rules", "test", "--rules", str(d))
    assert ok(own).strip() == "4 examples in 2 rules: 4 passed, 0 failed"
    every = ok(run_main("--rules", str(d), "rules", "test", "--all")).strip().splitlines()[-1]
    shipped = ok(run_main("rules", "test")).strip().splitlines()[-1]
    n_every, n_shipped = int(every.split(" rules:")[0].split()[-1]), int(shipped.split(" rules:")[0].split()[-1])
    assert n_every == n_shipped + 2 > 100
    help_text = ok(run_main("rules", "test", "--help"))
    assert "--all" in help_text and "With --rules, the rules of those folders alone" in " ".join(help_text.split())


def test_rules_test_with_rules_fails_on_its_own_broken_rule(rules_dir):
    d = rules_dir({"a.yaml": team_rule("team-alpha", "ALPHA BROKE").replace('no_match: ["all fine"]',
                                                                             'no_match: ["ERROR ALPHA BROKE"]')})
    p = run_main("rules", "test", "--rules", str(d))
    assert p.returncode == 1
    assert "rule 'team-alpha': examples.no_match[0] should not fire but did" in p.stdout.decode()
    assert p.stdout.decode().splitlines()[-1] == "2 examples in 1 rule: 1 passed, 1 failed"


# ------------------------------------------------------------------ rules why --no-probe


def test_rules_why_takes_no_probe_and_reads_no_machine_facts():
    plain = ok(run_main("rules", "why", "torch-cuda-oom", "--log", OOM_LOG))
    assert ok(run_main("rules", "why", "torch-cuda-oom", "--log", OOM_LOG, "--no-probe")) == plain
    assert plain.startswith("rule torch-cuda-oom")


# ------------------------------------------------------------------ fleet diagnose --fail-on


def snapshots(folder, docker_broken_on: tuple[int, ...] = ()):
    folder.mkdir()
    for i in (1, 2):
        snap = copy.deepcopy(BASE_SNAPSHOT)
        if i in docker_broken_on:  # docker without the nvidia runtime: a warning on that node
            snap["docker"].update(runtimes=["io.containerd.runc.v2", "runc"], nvidia_runtime=False, daemon_json=None,
                                  daemon_json_nvidia_runtime=None)
        (folder / f"node{i}.json").write_text(json.dumps(snap))
    return str(folder)


def test_fleet_diagnose_fail_on_counts_a_drifted_node_as_a_warning(tmp_path):
    folder = tmp_path / "drift"
    folder.mkdir()
    for i, driver in ((1, None), (2, None), (3, "535.161.08")):
        snap = copy.deepcopy(BASE_SNAPSHOT)
        if driver:
            snap["nvml"]["driver_version"] = driver
        (folder / f"node{i}.json").write_text(json.dumps(snap))
    doc = json.loads(ok(run_main("fleet", "diagnose", str(folder), "--format", "json", "--jobs", "1")))
    assert [(f["node"], f["kind"]) for f in doc["findings"]] == [("node3", "drift")]
    assert not any(doc["per_node"].values())  # no diagnosis: the drift alone decides
    for threshold, status in (("info", 1), ("warning", 1), ("error", 0)):
        assert run_main("fleet", "diagnose", str(folder), "--fail-on", threshold, "--jobs", "1").returncode == status


def test_fleet_diagnose_fail_on_exits_1_when_a_node_has_that_severity_or_worse(tmp_path):
    healthy, one_warning = snapshots(tmp_path / "healthy"), snapshots(tmp_path / "warned", (2,))
    doc = json.loads(ok(run_main("fleet", "diagnose", one_warning, "--format", "json", "--jobs", "1")))
    assert [d["severity"] for d in doc["per_node"]["node2"]] == ["warning"] and doc["per_node"]["node1"] == []
    for threshold, healthy_status, warned_status in (("info", 0, 1), ("warning", 0, 1), ("error", 0, 0)):
        for folder, status in ((healthy, healthy_status), (one_warning, warned_status)):
            p = run_main("fleet", "diagnose", folder, "--fail-on", threshold, "--jobs", "1")
            assert p.returncode == status, (folder, threshold, p.stderr.decode())
            assert "node1" in p.stdout.decode()  # the report is the same, only the status changes
    assert run_main("fleet", "diagnose", one_warning, "--jobs", "1").returncode == 0
    assert "--fail-on SEVERITY" in ok(run_main("fleet", "diagnose", "--help"))
