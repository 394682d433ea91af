"""Text from rules, logs, snapshots and file names is data on every way out: no control
sequence reaches a terminal (OSC 52 clipboard writes, OSC 0 titles, bells, C1 controls), no log
or snapshot text becomes a Markdown link, and no shape of machine facts breaks the machine view."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from markdown_it import MarkdownIt

from conftest import REPO, run_cli
from test_tui import wait_for
from troubleshoot.tui.app import TroubleshootApp

BASE = REPO / "tests" / "fixtures" / "snapshots" / "base.json"
CLIPBOARD = "\x1b]52;c;ZXZpbA==\x07"
TITLE = "\x1b]0;pwned\x07"
C1_CSI = "\x9b"
HOSTILE = CLIPBOARD + TITLE + C1_CSI
LINK = "[Click here to fix](https://evil.example)"
# The first character of a control sequence: ESC, BEL, and the C1 range (CSI, OSC... in one byte).
CONTROL = re.compile(r"[\x1b\x07\x80-\x9f]")


def assert_no_control(*streams: bytes | str) -> None:
    for s in streams:
        text = s.decode("utf-8", "replace") if isinstance(s, bytes) else s
        found = CONTROL.search(text)
        assert found is None, f"control character {found.group(0)!r} in {text[max(0, found.start() - 60):][:160]!r}"


def hostile_snapshot(tmp_path, **changes) -> str:
    snap = json.loads(BASE.read_text())
    snap["host"]["hostname"] = "node-07" + HOSTILE
    snap["host"]["name" + TITLE] = "x"  # an unknown key: its name is quoted in a warning
    snap["env"]["NCCL_DEBUG" + CLIPBOARD] = "INFO" + TITLE
    for area, value in changes.items():
        snap[area] = value
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(snap))
    return str(path)


def write_team_rules(tmp_path) -> str:
    """A loadable rule and a broken one, both in files whose names hold control sequences."""
    folder = tmp_path / "team-rules"
    folder.mkdir()
    (folder / f"good{TITLE}{C1_CSI}.yaml").write_text(
        "rules:\n- id: team-hostile-name\n  symptom: io-stall\n  title: Stalled reads\n  severity: warning\n"
        "  explain: The reads stalled.\n  match:\n    log: ['READS STALLED']\n"
        "  examples:\n    match: ['READS STALLED']\n    no_match: ['reads ok']\n")
    (folder / f"broken{CLIPBOARD}.yaml").write_text("rules:\n- id: x\n  title: [oops\n")
    return str(folder)


# ------------------------------------------------------------------ terminals


def test_snapshot_keys_and_values_reach_the_terminal_as_visible_escapes(tmp_path):
    log = tmp_path / "job.log"
    log.write_text("READS STALLED\n")
    snap = hostile_snapshot(tmp_path)
    for args in (("diagnose", "--log", str(log)), ("diagnose", "--log", str(log), "--format", "markdown"),
                 ("rules", "why", "torch-cuda-oom", "--log", str(log))):
        p = run_cli(*args, "--snapshot", snap)
        assert p.returncode == 0, p.stderr
        assert_no_control(p.stdout, p.stderr)
        assert "\\x1b]0;pwned\\x07" in p.stderr.decode()  # the unknown key, shown in its warning


@pytest.mark.parametrize("command", [("diagnose", "--no-probe", "--log", "-"), ("rules", "lint"), ("rules", "list"),
                                     ("rules", "test"), ("rules", "symptoms")])
def test_rule_file_names_in_problems_and_listings_are_visible_escapes(tmp_path, command):
    rules = write_team_rules(tmp_path)
    p = run_cli(*command, "--rules", rules, input="READS STALLED\n")
    assert_no_control(p.stdout, p.stderr)
    assert "broken\\x1b]52;c;ZXZpbA==\\x07.yaml" in (p.stdout + p.stderr).decode()


def test_rules_why_shows_the_rule_file_as_visible_escapes(tmp_path):
    rules = write_team_rules(tmp_path)
    p = run_cli("rules", "why", "team-hostile-name", "--rules", rules, "--log", "-", input="READS STALLED\n")
    assert p.returncode == 0, p.stderr
    assert_no_control(p.stdout, p.stderr)
    assert "good\\x1b]0;pwned\\x07\\x9b.yaml" in p.stdout.decode() and "fired" in p.stdout.decode()


def test_errors_naming_a_file_print_it_as_visible_escapes(tmp_path):
    bad = tmp_path / f"snap{TITLE}.json"
    bad.write_text("{not json")
    for args in (("diagnose", "--log", str(tmp_path / f"missing{CLIPBOARD}.log")),
                 ("diagnose", "--no-probe", "--log", "-", "--snapshot", str(bad))):
        p = run_cli(*args, input="x\n")
        assert p.returncode == 2
        assert_no_control(p.stdout, p.stderr)
        assert p.stderr.decode().startswith("troubleshoot: error: ") and "\\x1b]" in p.stderr.decode()


def test_probe_prints_this_machines_environment_as_visible_escapes():
    env = {**os.environ, "NCCL_DEBUG": "INFO" + HOSTILE}
    p = run_cli("probe", env=env)
    assert p.returncode == 0, p.stderr
    assert_no_control(p.stdout, p.stderr)
    assert "NCCL_DEBUG=INFO\\x1b]52;c;ZXZpbA==\\x07" in p.stdout.decode()


def run_on_a_terminal(*args: str) -> str:
    """What the command writes when its output is a terminal (a pseudo-terminal here)."""
    master, slave = os.openpty()
    child = subprocess.Popen([sys.executable, "-m", "troubleshoot", *args], stdin=subprocess.DEVNULL,
                             stdout=slave, stderr=slave, cwd=REPO)
    os.close(slave)
    out = []
    while True:
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:  # the child closed its end
            break
        if not chunk:
            break
        out.append(chunk)
    os.close(master)
    assert child.wait(timeout=60) == 0
    return b"".join(out).decode("utf-8", "replace")


def test_rule_patterns_are_visible_escapes_on_a_terminal_and_raw_for_grep(tmp_path):
    folder = tmp_path / "team-rules"
    folder.mkdir()
    (folder / "team.yaml").write_text(
        "rules:\n- id: team-bell\n  symptom: io-stall\n  title: Bell\n  severity: info\n  explain: A bell.\n"
        "  match:\n    log: [\"RING \\a\\ec NOW\"]\n"
        "  examples:\n    match: [\"RING \\a\\ec NOW\"]\n    no_match: ['quiet']\n")
    shown = run_on_a_terminal("rules", "patterns", "--rules", str(folder))
    assert_no_control(shown)
    assert "RING \\x07\\x1bc NOW" in shown
    piped = run_cli("rules", "patterns", "--rules", str(folder)).stdout.decode()
    assert "RING \x07\x1bc NOW" in piped.splitlines()  # grep -E -f reads the bytes themselves


# ------------------------------------------------------------------ Markdown


def md_tokens(markdown: str) -> list:
    """Every token CommonMark (with GFM tables) reads in `markdown`, inline ones included."""
    out = []
    for tok in MarkdownIt("commonmark").enable("table").parse(markdown):
        out.append(tok)
        out += tok.children or []
    return out


def hiding(tokens: list) -> list:
    """Links that show other words than their URL, images, and HTML (a rule's `<https://...>`
    reference shows its URL: not one of them)."""
    return [t for t in tokens if t.type in ("image", "html_inline", "html_block")
            or (t.type == "link_open" and t.markup != "autolink")]


MD_RULE = """\
rules:
- id: team-md-data
  symptom: io-stall
  title: "Reads stalled \\e]0;pwned\\a on the dataset mount"
  severity: warning
  match:
    log: ['MOUNT STALLED (?P<what>.*)$']
    facts: ['exists(host.hostname)']
  explain: "The dataset mount stopped answering; see the evidence."
  fixes:
    - fixer: advice
      title: "Check the mount"
      params: {text: "Remount it.", mount: "{what}"}
  examples:
    match: ['MOUNT STALLED x']
    no_match: ['mount ok']
"""


def test_markdown_report_keeps_log_and_snapshot_text_literal(tmp_path):
    folder = tmp_path / "team-rules"
    folder.mkdir()
    (folder / "team.yaml").write_text(MD_RULE)
    breakout = f"node\n```\n{LINK} <b>bold</b> ![i](https://evil.example/i.png)"
    snap = hostile_snapshot(tmp_path, host={**json.loads(BASE.read_text())["host"], "hostname": breakout})
    log = tmp_path / f"job`{TITLE}`.log"
    log.write_text(f"MOUNT STALLED ``` {LINK} | **loud** <img src=x>\n")
    p = run_cli("diagnose", "--log", str(log), "--snapshot", snap, "--rules", str(folder), "--format", "markdown")
    assert p.returncode == 0, p.stderr
    out = p.stdout.decode()
    assert_no_control(out, p.stderr)
    tokens = md_tokens(out)
    assert not hiding(tokens)
    text = "".join(t.content for t in tokens if t.type in ("text", "code_inline", "fence"))
    assert f"MOUNT STALLED ``` {LINK} | **loud** <img src=x>" in text  # the evidence, as the log wrote it
    assert "host.hostname = " + breakout.replace("\n", "\\n") in text  # the snapshot's value, one line in its block
    assert "Reads stalled \\x1b]0;pwned\\x07 on the dataset mount" in text
    assert "job`\\x1b]0;pwned\\x07`.log" in text  # the source's name, whole in its code span


def rendered(widget) -> str:
    """The text a Markdown widget shows, block by block, with the links each block holds."""
    parts = []
    for block in widget.query("MarkdownBlock"):
        content = block.render()
        parts.append(str(content))
        parts += [f"<link {s.style}>" for s in getattr(content, "spans", []) if "link(" in str(s.style)]
    return "\n".join(parts)


LINK_RULE = """\
rules:
- id: team-link-capture
  symptom: io-stall
  title: Reads stalled
  severity: warning
  match:
    log: ['STALLED ON (?P<what>.*)$']
  explain: "Reads stalled on {what}; kill <pid> to retry."
  fixes:
    - fixer: advice
      title: Look at the mount
      params: {text: "Look at {what} first."}
  examples:
    match: ['STALLED ON x']
    no_match: ['fine']
"""


@pytest.mark.asyncio
async def test_a_link_captured_from_the_log_shows_literally_in_the_detail_and_the_fix(tmp_path):
    from troubleshoot.tui.screens import FixScreen

    folder = tmp_path / "team-rules"
    folder.mkdir()
    (folder / "team.yaml").write_text(LINK_RULE)
    log = tmp_path / "job.log"
    log.write_text(f"STALLED ON {LINK}\n")
    app = TroubleshootApp(log=str(log), rules=[str(folder)], snapshot=str(BASE), probe=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: any(d.rule.id == "team-link-capture" for d in app.diagnoses))
        row = next(i for i, d in enumerate(app.diagnoses) if d.rule.id == "team-link-capture")
        app.query_one("#diag-table").move_cursor(row=row)
        explain = app.query_one("#diag-explain")
        await wait_for(pilot, lambda: "Reads stalled on" in rendered(explain))
        shown = rendered(explain)
        assert LINK in shown and "kill <pid> to retry" in shown and "<link" not in shown
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, FixScreen) and app.screen.built)
        advice = "\n".join(rendered(w) for w in app.screen.query(".fix-advice"))
        assert LINK in advice and "<link" not in advice


@pytest.mark.asyncio
async def test_exported_report_keeps_snapshot_and_log_text_inside_their_blocks(tmp_path, monkeypatch):
    from troubleshoot.tui.screens import ExportScreen

    monkeypatch.chdir(tmp_path)
    host = {**json.loads(BASE.read_text())["host"], "hostname": f"node\n```\n{LINK}\n"}
    snap = hostile_snapshot(tmp_path, host=host)
    log = tmp_path / "job.log"
    log.write_text(f"RuntimeError: CUDA error: an illegal memory access was encountered ``` {LINK}\n")
    app = TroubleshootApp(log=str(log), snapshot=snap, probe=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.diagnoses)
        await pilot.press("e")
        await wait_for(pilot, lambda: isinstance(app.screen, ExportScreen))
        app.screen.query_one("#export-path").value = str(tmp_path / "report.md")
        await pilot.press("enter")
        await wait_for(pilot, lambda: (tmp_path / "report.md").exists())
    report = (tmp_path / "report.md").read_text()
    assert_no_control(report)
    assert not hiding(md_tokens(report))
    assert f"encountered ``` {LINK}" in report


# ------------------------------------------------------------------ machine view

ODD_LIBRARIES = [{"version": "12.4.127", "path": "/usr/lib/libcudart.so.12"}, {"name": 5, "version": None},
                 {"name": "libcublas", "version": ["12"]}, "libnccl", None, 3]


@pytest.mark.asyncio
async def test_machine_view_shows_cuda_libraries_of_any_shape(tmp_path):
    cuda = {**json.loads(BASE.read_text())["cuda"], "libraries": ODD_LIBRARIES,
            "conflicts": [{"majors": ["11", "12"]}, {"name": "libcublas", "majors": "12"}]}
    app = TroubleshootApp(snapshot=hostile_snapshot(tmp_path, cuda=cuda), probe=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.facts is not None)
        await pilot.press("m")
        await wait_for(pilot, lambda: "cuda:" in str(app.query_one("#machine-facts").render()))
        shown = str(app.query_one("#machine-facts").render())
        assert "libraries:" in shown and "libcublas" in shown
        assert "node-07\\x1b]52" in shown
        assert app.is_running


SHAPES = [None, 0, 2.5, True, "text" + TITLE, [], [None, 1, "x", [2]], {}, {"name": None, "x": {"y": []}}]


def odd_facts(shape) -> list[dict]:
    """`shape` where each area is, then where each part of an area that a view reads is."""
    areas = ("host", "nvml", "kernel", "cuda", "frameworks", "docker", "io", "env", "probes")
    gpus = [shape, {"name": shape, "throttle_reasons": shape, "processes": [shape]}]
    parts = {"nvml": {"available": True, "gpus": gpus},
             "kernel": {"modules": shape, "xid_events": [shape, {"code": shape}]},
             "cuda": {"libraries": [shape, {"name": shape, "version": shape}], "conflicts": [shape, {"majors": shape}]},
             "frameworks": {"torch": shape, "jax": {"import_error": shape}},
             "docker": {"installed": True, "server_version": "27", "runtimes": shape},
             "env": {"K": shape}, "probes": {"p": shape, "q": {"status": "error", "error": shape}}}
    return [{area: shape for area in areas}, parts]


@pytest.mark.asyncio
async def test_machine_view_never_breaks_on_any_shape_of_facts():
    app = TroubleshootApp(probe=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("m")
        for shape in SHAPES:
            for facts in odd_facts(shape):
                app.facts = facts
                app._render_machine()
                await pilot.pause()
                shown = str(app.query_one("#machine-facts").render())
                assert "host:" in shown and "cuda:" in shown, shape
                assert_no_control(shown)
        assert app.is_running


def test_a_plugin_failure_and_a_missing_job_reach_the_terminal_as_visible_escapes(tmp_path):
    """A plugin's exception text and the job's own command name are printed by the tool itself:
    both come from outside it."""
    plugin = tmp_path / "noisy.py"
    plugin.write_text("from troubleshoot.hookspecs import hookimpl\n\n\n@hookimpl\ndef troubleshoot_rule_dirs():\n"
                      f"    raise RuntimeError({HOSTILE!r})\n")
    log = tmp_path / "train.log"
    log.write_text("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    p = run_cli("diagnose", "--log", str(log), "--no-probe", "-p", str(plugin))
    assert "failed" in p.stderr.decode() and "\\x1b]52" in p.stderr.decode()
    assert_no_control(p.stdout, p.stderr)
    job = "no-such-job" + HOSTILE
    p = run_cli("run", "--log-to", str(tmp_path / "run.log"), "--", job)
    assert p.returncode != 0 and "\\x1b]0;pwned" in p.stderr.decode()
    assert_no_control(p.stdout, p.stderr)
