"""Every front end enters a job through the same door: one command context (plugins, probes,
facts, rules, logs, colours, lint), one pipeline, one fix service. Each test drives the real
command (`run_cli`, a pseudo-terminal) or the TUI's pilot, and compares what two front ends do
with the same inputs."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import textwrap

import pytest

from conftest import REPO, run_cli
from procwait import read_pty, run_on_pty
from test_tui import wait_for

BASE = REPO / "tests" / "fixtures" / "snapshots" / "base.json"
PASTED = REPO / "tests" / "fixtures" / "pasted"
RANKS = REPO / "tests" / "fixtures" / "ranks" / "per-rank"
OOM_LINE = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB"
WAITING_FOR_DISK = "run-gpu-underused-waiting-for-disk"


def checkout_env(**extra: str) -> dict:
    """The environment of a command started outside the checkout (a plugin's folder): it runs
    this checkout's code, wherever the checkout is."""
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    return dict(os.environ, PYTHONPATH=path, **extra)


def no_traceback(p: subprocess.CompletedProcess) -> None:
    assert b"Traceback" not in p.stderr, p.stderr.decode()


# ------------------------------------------------------------------ probes: one per name, once


def test_a_plugin_probe_named_like_a_built_in_one_does_not_break_the_fix_verification(tmp_path):
    (tmp_path / "dup.py").write_text(textwrap.dedent("""
        from troubleshoot.hookspecs import hookimpl
        from troubleshoot.probes.base import Probe

        @hookimpl
        def troubleshoot_probes():
            return [Probe("kernel", lambda ctx: {"available": True, "nouveau_blacklisted": True}, timeout=2)]
    """))
    p = run_cli("fix", "blacklist-nouveau", "--root", "img", "--apply", "--yes", "-p", "./dup.py",
                cwd=tmp_path, env=checkout_env())
    no_traceback(p)
    assert p.returncode == 0, p.stderr.decode()
    out, err = p.stdout.decode(), p.stderr.decode()
    # One kernel probe ran (the -p plugin's: the hook gives it first) and verified the fix.
    assert "verified: kernel.nouveau_blacklisted == true: True" in out
    assert err.count("two probes are named 'kernel'; the second is ignored") == 1
    assert (tmp_path / "img" / "etc" / "modprobe.d" / "blacklist-nouveau.conf").read_text().startswith("blacklist nouveau")


# ------------------------------------------------------------------ NO_COLOR on a terminal


def on_a_terminal(argv: list[str], until_then=None) -> tuple[bytes, int]:
    """Run `troubleshoot ARGV` on a pseudo-terminal with NO_COLOR=1 set; `until_then(fd)` may
    drive it (it returns what it read). Returns everything the terminal showed and the exit code."""
    env = checkout_env(NO_COLOR="1", TERM="xterm-256color")
    return run_on_pty([sys.executable, "-m", "troubleshoot", *argv], env, REPO, until_then)


def test_no_color_leaves_run_without_an_escape_on_a_terminal(tmp_path):
    job = f"import sys; print({OOM_LINE!r}); sys.exit(1)"
    out, code = on_a_terminal(["run", "--log-to", str(tmp_path / "job.log"), "--", sys.executable, "-c", job])
    assert code == 1, out
    assert b"torch-cuda-oom" in out  # the diagnosis was shown, on the terminal
    assert b"\x1b" not in out, out


def test_no_color_leaves_diagnose_follow_without_an_escape_on_a_terminal(tmp_path):
    log = tmp_path / "train.log"
    log.write_text(f"epoch 1 loss 0.5\n{OOM_LINE}\n")
    # The process --pid watches: it ends when its stdin is closed, not after some time.
    job = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        def once_a_diagnosis_is_shown(fd: int) -> bytes:
            seen = read_pty(fd, until=b"new: [error]")
            job.stdin.close()  # the job ends: the follower prints the full diagnosis and stops
            return seen

        out, code = on_a_terminal(["diagnose", "--follow", str(log), "--pid", str(job.pid)], once_a_diagnosis_is_shown)
    finally:
        job.kill()
        job.wait()
    assert code == 0, out
    assert b"torch-cuda-oom" in out  # in the full diagnosis at the end, as in the first new: line
    assert b"\x1b" not in out, out


# ------------------------------------------------------------------ fix --rule: the pipeline's diagnosis


def _waiting_for_disk_example() -> str:
    from troubleshoot import pipeline

    return pipeline.load_rules().get(WAITING_FOR_DISK).examples.match[0]


@pytest.mark.parametrize("make_log,fires", [
    (lambda: (PASTED / "query-gpu-csv-low.txt").read_text() + (PASTED / "top-iowait.txt").read_text(), True),
    (_waiting_for_disk_example, True),  # the rule's own example: a `run --format json` report pasted
    (lambda: (PASTED / "query-gpu-csv-healthy.txt").read_text() + (PASTED / "top-iowait.txt").read_text(), False),
], ids=["pasted-monitoring", "rule-example", "healthy-gpu"])
def test_fix_rule_fires_exactly_when_diagnose_does(tmp_path, make_log, fires):
    """The rule needs facts (a watched job's, here pasted into the log): `fix --rule` must read
    them as `diagnose` does, with the snapshot's facts beside them."""
    log = tmp_path / "job.log"
    log.write_text(make_log())
    inputs = ["--log", str(log), "--snapshot", str(BASE)]
    d = run_cli("diagnose", "--format", "json", *inputs)
    assert d.returncode == 0, d.stderr.decode()
    assert (WAITING_FOR_DISK in [x["rule"] for x in json.loads(d.stdout)["diagnoses"]]) == fires
    p = run_cli("fix", "--rule", WAITING_FOR_DISK, "--format", "json", *inputs)
    no_traceback(p)
    if fires:
        assert p.returncode == 0, p.stderr.decode()
        assert [plan["fixer"] for plan in json.loads(p.stdout)["plans"]] == ["ramdisk", "profile"]
    else:
        assert p.returncode == 2 and b"does not fire" in p.stderr, p.stderr.decode()


# ------------------------------------------------------------------ several logs: the preview line


def _preview_lines(text: str) -> list[str]:
    return [ln.split("preview: ", 1)[1].split("   (add --apply", 1)[0] for ln in text.splitlines() if "preview: " in ln]


@pytest.mark.parametrize("logs", [
    lambda tmp: [str(RANKS)],  # a folder of rank logs
    lambda tmp: [str(RANKS / "job.gpu-01.rank0.log"), str(RANKS / "job.gpu-02.rank3.log")],  # two --log
], ids=["folder", "two-logs"])
def test_the_preview_line_under_a_multi_log_diagnosis_runs_as_printed(tmp_path, logs):
    specs = logs(tmp_path)
    p = run_cli("diagnose", "--no-probe", *[w for s in specs for w in ("--log", s)])
    assert p.returncode == 0, p.stderr.decode()
    previews = _preview_lines(p.stdout.decode())
    assert previews and "logs'" not in previews[0]
    words = shlex.split(previews[0])
    assert words[:2] == ["troubleshoot", "fix"] and words.count("--log") == len(specs)
    fix = run_cli(*words[1:], "--no-probe")  # as printed (without probing this machine)
    no_traceback(fix)
    assert fix.returncode == 0, fix.stderr.decode()
    assert fix.stdout.decode().startswith("Plan: ")


def test_fix_reads_the_folder_that_diagnose_read():
    d = json.loads(run_cli("diagnose", "--no-probe", "--format", "json", "--log", str(RANKS)).stdout)
    for rule in {x["rule"] for x in d["diagnoses"] if x["fixes"]}:
        p = run_cli("fix", "--rule", rule, "--log", str(RANKS), "--no-probe", "--format", "json")
        assert p.returncode == 0, (rule, p.stderr.decode())
        assert json.loads(p.stdout)["plans"]


# ------------------------------------------------------------------ the TUI: rank folders, lint, probe areas


@pytest.mark.asyncio
async def test_the_tui_opens_the_folder_of_rank_logs_that_the_cli_reads():
    from troubleshoot.tui.app import TroubleshootApp

    cli = json.loads(run_cli("diagnose", "--no-probe", "--format", "json", "--log", str(RANKS)).stdout)
    app = TroubleshootApp(log=str(RANKS), probe=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.diagnoses)
        assert [d.rule.id for d in app.diagnoses] == [d["rule"] for d in cli["diagnoses"]]
        assert app.result.logs == cli["logs"] == 4
        await pilot.press("l")
        note = str(app.query_one("#log-note").render())
        assert "4 logs" in note and "Is a directory" not in note
        await pilot.press("q")


@pytest.mark.asyncio
async def test_the_tui_opens_a_rank_folder_typed_in_the_open_box():
    from troubleshoot.tui.app import TroubleshootApp

    app = TroubleshootApp(snapshot=str(BASE), probe=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.ruleset is not None)
        await pilot.press("o")
        app.query_one("#log-path").value = str(RANKS)
        await pilot.press("enter")
        await wait_for(pilot, lambda: any(d.symptom == "cuda-oom" for d in app.diagnoses))
        assert app.result.logs == 4
        await pilot.press("q")


TEAM_RULE = """\
rules:
- id: team-two-fixes
  symptom: io-stall
  title: The acme marker is missing
  severity: error
  confidence: 0.9
  match:
    log: ['ACME MARKER MISSING']
  explain: The acme marker file is missing.
  fixes:
    - fixer: acme-write
    - fixer: acme-noop
  examples:
    match: ["ACME MARKER MISSING"]
    no_match: ["ACME MARKER OK"]
"""

PLUGIN = """\
from troubleshoot.fixes.api import Fixer
from troubleshoot.fixes.plan import EnsureLine, Plan, WriteFile
from troubleshoot.hookspecs import hookimpl


class Write(Fixer):
    id = "acme-write"
    title = "Write the acme marker"

    def plan(self, params, snapshot):
        return Plan(self.id, self.title, params, (WriteFile("/etc/acme-marker", "on\\n", why="the marker"),))


class Noop(Fixer):
    id = "acme-noop"
    title = "Keep the acme line"

    def plan(self, params, snapshot):
        return Plan(self.id, self.title, params, (EnsureLine("/etc/acme.conf", "acme=1", why="already there"),))


@hookimpl
def troubleshoot_fixers():
    return [Write(), Noop()]
"""


def _team(tmp_path, rule: str = TEAM_RULE):
    rules = tmp_path / "team-rules"
    rules.mkdir()
    (rules / "acme.yaml").write_text(rule)
    (tmp_path / "acme_plugin.py").write_text(PLUGIN)
    log = tmp_path / "job.log"
    log.write_text("step 1\nACME MARKER MISSING\n")
    return rules, tmp_path / "acme_plugin.py", log


def _image(root):
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "acme.conf").write_text("acme=1\n")  # acme-noop has nothing to change
    return root


def _journal(state) -> list[dict]:
    """What the journal under one state folder records, without ids, times and folders."""
    out = []
    for path in sorted((state / "troubleshoot" / "journal").glob("*/journal.json")):
        data = json.loads(path.read_text())
        steps = [{k: s.get(k) for k in ("index", "kind", "title", "status", "path", "existed", "wrote")}
                 for s in data.get("steps", [])]
        out.append({"fixer": data.get("fixer"), "params": data.get("params"), "status": data.get("status"),
                    "title": data.get("title"), "steps": steps})
    return sorted(out, key=lambda e: e["fixer"])


@pytest.mark.asyncio
async def test_the_tui_and_the_cli_journal_the_same_entries_for_the_same_plan(tmp_path, monkeypatch):
    from troubleshoot.plugins import load_plugins
    from troubleshoot.tui.app import TroubleshootApp
    from troubleshoot.tui.screens import ConfirmScreen, FixScreen

    rules, plugin, log = _team(tmp_path)
    cli_state, tui_state = tmp_path / "cli-state", tmp_path / "tui-state"
    cli_root, tui_root = _image(tmp_path / "cli-img"), _image(tmp_path / "tui-img")
    p = run_cli("fix", "--rule", "team-two-fixes", "--log", str(log), "--rules", str(rules), "-p", str(plugin),
                "--root", str(cli_root), "--apply", "--yes", "--no-probe", "--format", "json",
                env=checkout_env(XDG_STATE_HOME=str(cli_state)), cwd=tmp_path)
    assert p.returncode == 0, p.stderr.decode()

    monkeypatch.setenv("XDG_STATE_HOME", str(tui_state))
    app = TroubleshootApp(log=str(log), rules=[str(rules)], root=str(tui_root), probe=False,
                          plugins=load_plugins([str(plugin)]))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.diagnoses)
        assert app.diagnoses[0].rule.id == "team-two-fixes"
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, FixScreen) and app.screen.built)
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, FixScreen) and app.screen.applied)
        await pilot.press("escape")
        await pilot.press("q")

    cli, tui = _journal(cli_state), _journal(tui_state)
    assert [e["fixer"] for e in cli] == ["acme-write"]  # the plan that changes nothing is not journalled
    assert tui == cli
    assert (tui_root / "etc" / "acme-marker").read_text() == (cli_root / "etc" / "acme-marker").read_text() == "on\n"


@pytest.mark.asyncio
async def test_the_tui_lints_team_rules_with_fixers_as_rules_lint_does(tmp_path):
    from troubleshoot.plugins import load_plugins
    from troubleshoot.tui.app import TroubleshootApp

    # A fix naming a fixer that no plugin provides: only a lint that knows the fixers sees it.
    rules, plugin, _ = _team(tmp_path, TEAM_RULE.replace("    - fixer: acme-noop\n",
                                                         "    - fixer: acme-noop\n    - fixer: acme-missing\n"))
    lint = run_cli("rules", "lint", "--rules", str(rules), "-p", str(plugin), env=checkout_env(), cwd=tmp_path)
    problems = lint.stdout.decode().splitlines()
    assert lint.returncode == 2 and len(problems) == 1 and "'acme-missing'" in problems[0]
    app = TroubleshootApp(snapshot=str(BASE), rules=[str(rules)], probe=False, plugins=load_plugins([str(plugin)]))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.ruleset is not None)
        await pilot.press("r")
        await wait_for(pilot, lambda: app.linted and "linting" not in str(app.query_one("#rules-problems").render()))
        note = str(app.query_one("#rules-problems").render())
        assert "1 problem:" in note and "'acme-missing'" in note and "no installed plugin" in note
        await pilot.press("q")


@pytest.mark.asyncio
async def test_the_tui_lists_every_probe_area():
    from troubleshoot.plugins import load_plugins
    from troubleshoot.tui.app import TroubleshootApp

    registered = [p.name for p in load_plugins().collect("troubleshoot_probes")]
    app = TroubleshootApp(snapshot=str(BASE), probe=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.probe_status)
        assert {"fabric_manager", "node"} <= set(app.probe_status)
        assert list(app.probe_status) == registered
        await pilot.press("q")
