"""The TUI driven by Textual's pilot: real app, real workers, real files under a temp root."""

import asyncio
import json

import pytest

from conftest import REPO
from troubleshoot.plugins import load_plugins
from troubleshoot.probes.base import Probe
from troubleshoot.tui.app import TroubleshootApp
from troubleshoot.tui.screens import ConfirmScreen, ExportScreen, FixScreen

OOM_LOG = str(REPO / "examples" / "logs" / "cuda-oom.log")
BASE = REPO / "tests" / "fixtures" / "snapshots" / "base.json"


async def wait_for(pilot, predicate, timeout=60.0):
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not predicate():
        if loop.time() > end:
            raise AssertionError("timed out waiting")
        await pilot.pause(0.05)


def nouveau_snapshot(tmp_path) -> str:
    snap = json.loads(BASE.read_text())
    snap["kernel"]["modules"]["nouveau"] = True
    snap["kernel"]["nouveau_blacklisted"] = False
    path = tmp_path / "nouveau.json"
    path.write_text(json.dumps(snap))
    return str(path)


@pytest.mark.asyncio
async def test_diagnose_preview_apply_and_undo(tmp_path):
    log = tmp_path / "install.log"
    log.write_text("ERROR: The Nouveau kernel driver is currently in use by your system.  This driver is "
                   "incompatible with the NVIDIA driver, and must be disabled before proceeding.\n")
    root = tmp_path / "root"
    app = TroubleshootApp(log=str(log), snapshot=nouveau_snapshot(tmp_path), root=str(root), probe=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.diagnoses)
        assert app.diagnoses[0].symptom == "nouveau-conflict"
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, FixScreen) and app.screen.prepared)
        assert "blacklist-nouveau.conf" in app.screen.preview_text
        assert "update-initramfs -u (not run under --root)" in app.screen.preview_text
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        conf = root / "etc" / "modprobe.d" / "blacklist-nouveau.conf"
        await wait_for(pilot, lambda: conf.exists())
        assert conf.read_text() == "blacklist nouveau\noptions nouveau modeset=0\n"
        await pilot.press("escape")
        await pilot.press("h")
        await wait_for(pilot, lambda: app.query_one("#history-table").row_count >= 1)
        await pilot.press("u")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: not conf.exists())
        await pilot.press("q")


@pytest.mark.asyncio
async def test_paste_a_log():
    app = TroubleshootApp(snapshot=str(BASE), probe=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.ruleset is not None)
        await pilot.press("l")
        app.query_one("#log-text").text = ("Traceback (most recent call last):\n"
                                          "RuntimeError: CUDA error: device-side assert triggered\n")
        await pilot.click("#diagnose-paste")
        await wait_for(pilot, lambda: app.diagnoses and app.diagnoses[0].symptom == "device-assert")
        assert app.query_one("TabbedContent").active == "diagnoses"


@pytest.mark.asyncio
async def test_follow_a_growing_file_shows_a_new_diagnosis(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("epoch 1 step 10 loss 0.5\n")
    app = TroubleshootApp(follow=str(log), snapshot=str(BASE), probe=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.ruleset is not None and app.sub_title)
        assert not app.diagnoses
        with open(log, "a") as f:
            f.write("[E ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective operation timeout: "
                    "WorkNCCL(SeqNum=7, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600050 milliseconds before timing out.\n")
        await wait_for(pilot, lambda: any(d.symptom == "nccl-timeout" for d in app.diagnoses))


@pytest.mark.asyncio
async def test_hung_probe_broken_rules_and_binary_log_leave_it_responsive(tmp_path, rules_dir):
    d = rules_dir({"broken.yaml": "rules:\n- id: x\n  title: [oops\n"})
    log = tmp_path / "core"
    # A text log with a megabyte of binary bytes in it (a core dump cat'ed into it): a file that
    # starts as binary is not read as a log at all (tests/test_not_logs.py).
    log.write_bytes(b"".join(b"step %d loss 0.5\n" % i for i in range(1000)) + bytes(range(256)) * 4000
                    + b"\nRuntimeError: CUDA error: an illegal memory access was encountered\n")
    plugins = load_plugins()

    class Hung:
        @staticmethod
        def troubleshoot_probes():
            import time

            return [Probe("slowfs", lambda ctx: time.sleep(30) or {}, timeout=0.5)]

    from troubleshoot.hookspecs import hookimpl

    Hung.troubleshoot_probes = hookimpl(Hung.troubleshoot_probes)
    plugins.pm.register(Hung, name="hung")
    app = TroubleshootApp(log=str(log), rules=[str(d)], plugins=plugins, probe=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.probe_status.get("slowfs") == "TIMED OUT", timeout=20)
        await pilot.press("m")  # input is handled while probes run
        assert app.query_one("TabbedContent").active == "machine"
        await wait_for(pilot, lambda: any(x.symptom == "illegal-memory-access" for x in app.diagnoses))
        await pilot.press("r")
        problems = str(app.query_one("#rules-problems").render())
        assert "broken.yaml:3" in problems
        await pilot.press("down")
        assert "example (must match)" in str(app.query_one("#rule-text").render())


@pytest.mark.asyncio
async def test_export_writes_a_markdown_report(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    app = TroubleshootApp(log=OOM_LOG, snapshot=str(BASE), probe=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.diagnoses)
        await pilot.press("e")
        await wait_for(pilot, lambda: isinstance(app.screen, ExportScreen))
        field = app.screen.query_one("#export-path")
        assert field.value.startswith(str(tmp_path)) and field.value.endswith(".md")  # the default is shown
        assert not list(tmp_path.glob("*.md"))  # nothing written before the user says where
        field.value = str(tmp_path / "nope" / "r.md")
        await pilot.press("enter")  # a folder that does not exist: said, not created
        await wait_for(pilot, lambda: "no such folder" in str(app.screen.query_one("#export-error").render()))
        field.value = str(tmp_path / "report.md")
        await pilot.press("enter")
        await wait_for(pilot, lambda: (tmp_path / "report.md").exists())
    text = (tmp_path / "report.md").read_text()
    assert "| 1 | error | `cuda-oom`" in text and "## Machine" in text and "## Log excerpt" in text


@pytest.mark.slow
@pytest.mark.asyncio
async def test_a_500_mb_log_does_not_block_input(tmp_path, monkeypatch):
    import sys

    # RE2 (~150 MB/s) keeps the scan running for seconds; hyperscan may finish 500 MB before
    # the key press is even sent, and the test is about input during a scan.
    monkeypatch.setenv("TROUBLESHOOT_SCAN_ENGINE", "re2")

    sys.path.insert(0, str(REPO / "benchmarks"))
    import scan_bench

    log = tmp_path / "big.log"
    scan_bench.generate(log, 500)
    app = TroubleshootApp(log=str(log), snapshot=str(BASE), probe=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.ruleset is not None)
        await pilot.press("m")  # handled while the 500 MB scan runs in its worker
        assert app.query_one("TabbedContent").active == "machine"
        assert not app.diagnoses
        await wait_for(pilot, lambda: app.diagnoses, timeout=120)
        assert any(d.symptom == "cuda-oom" for d in app.diagnoses)


# ------------------------------------------------------------------ paste in one key

# A real NCCL watchdog timeout, from XPixelGroup/BasicSR#737 (tests/corpus/distributed.yaml,
# nccltimeout-basicsr-737).
def nccl_log() -> str:
    import yaml

    cases = yaml.safe_load((REPO / "tests" / "corpus" / "distributed.yaml").read_text())
    return next(c for c in cases if c["id"] == "nccltimeout-basicsr-737")["log"]


@pytest.mark.asyncio
async def test_p_paste_ctrl_r_diagnoses_and_the_detail_starts_at_the_top(tmp_path):
    from textual import events

    app = TroubleshootApp(snapshot=nouveau_snapshot(tmp_path), probe=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.ruleset is not None and app.result is not None)
        await pilot.press("p")
        area = app.query_one("#log-text")
        assert app.focused is area and "ctrl+r" in str(area.placeholder)
        app.post_message(events.Paste(nccl_log()))  # what a terminal's bracketed paste delivers
        await wait_for(pilot, lambda: "Watchdog caught" in area.text)
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: any(d.symptom == "nccl-timeout" for d in app.diagnoses))
        assert app.query_one("TabbedContent").active == "diagnoses"
        assert len(app.diagnoses) >= 2  # the NCCL timeout and the nouveau conflict from the snapshot
        detail = app.query_one("#diag-detail")
        detail.scroll_end(animate=False)
        await wait_for(pilot, lambda: detail.scroll_y > 0)
        await pilot.press("down")
        await wait_for(pilot, lambda: app.query_one("#diag-table").cursor_row == 1)
        await pilot.pause()
        assert detail.scroll_y == 0
        # The Log tab shows the pasted log with its evidence lines; n jumps to one.
        await pilot.press("l")
        view = app.query_one("#log-view")
        assert len(view.rows) == 3 and view.evidence
        await pilot.press("n")
        assert view.current == 0
        await pilot.press("p", "ctrl+l")
        assert area.text == ""


@pytest.mark.asyncio
async def test_no_probe_never_waits_for_probes_and_says_what_runs():
    app = TroubleshootApp(probe=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.ruleset is not None)
        await pilot.pause()
        head = str(app.query_one("#diag-head").render())
        assert "probe" not in head and "paste one (p)" in head
        assert "--no-probe" in str(app.query_one("#probe-status").render())


@pytest.mark.asyncio
async def test_facts_after_the_scan_rediagnose_without_reading_the_log_again():
    app = TroubleshootApp(log=OOM_LOG, probe=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.diagnoses and app.scanned is not None)
        assert app.scans == 1
        app._facts_ready(json.loads(BASE.read_text()))  # what the probes deliver when they finish
        await wait_for(pilot, lambda: not app.progress.diagnosing and app.result is not None)
        assert app.scans == 1 and app.diagnoses[0].symptom == "cuda-oom"


@pytest.mark.asyncio
async def test_advice_only_plan_says_why_a_cannot_apply_and_c_copies(tmp_path):
    app = TroubleshootApp(log=OOM_LOG, snapshot=str(BASE), probe=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.diagnoses)
        await pilot.press("down") if len(app.diagnoses) > 1 else None
        d = app.selected()
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, FixScreen) and app.screen.built)
        fix = app.screen
        why = str(fix.query_one("#fix-why").render())
        assert d.symptom == "cuda-oom"
        assert fix.query_one("#apply").disabled == bool(why)
        # the advice is Markdown, rendered (no raw ``` fences on screen)
        assert fix.query(".fix-advice")
        await pilot.press("c")
        script = tmp_path / "xdg-state" / "troubleshoot" / "commands" / f"{d.rule.id}.sh"
        await wait_for(pilot, lambda: script.exists())
        assert "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in script.read_text()


def test_apply_blocker_says_why():
    from types import SimpleNamespace as NS

    from troubleshoot.tui.screens import apply_blocker

    advice = NS(plan=NS(ladder=None, title="t"), steps=[NS(kind="advice", changes=False)], needs_root=False)
    assert "advice only" in apply_blocker([advice], [], True, None, False)
    assert "still being built" in apply_blocker([], [], False, None, False)
    edit = NS(plan=NS(ladder=None, title="t", fixer="raise-shm", params={"size": "32G"}),
              steps=[NS(kind="write", changes=True)], needs_root=True)
    assert apply_blocker([edit], [], True, None, True) is None
    assert apply_blocker([edit], [], True, "E1", True).startswith("already applied")
    assert "needs root: run `sudo troubleshoot fix raise-shm --param size=32G --apply`" in apply_blocker(
        [edit], [], True, None, False)
    assert "no plan could be built: boom" == apply_blocker([], ["boom"], True, None, False)


def test_diff_lines_wrap_with_an_indent():
    from rich.console import Console

    from troubleshoot.tui.screens import DiffLines

    console = Console(width=40, record=True, color_system=None)
    console.print(DiffLines("+" + "x" * 100 + "\n-short"))
    lines = console.export_text().splitlines()
    assert lines[0] == "+" + "x" * 39
    assert lines[1].startswith("  ↪ x") and len(lines[1]) <= 40
    assert lines[-1] == "-short"


def test_preview_blocks_split_markdown_and_diffs():
    from troubleshoot.tui.screens import preview_blocks

    text = ("Plan: p  (fixer f)\n1. advice: do\n   Use this:\n   \n   ```bash\n   ls\n   ```\n"
            "2. edit: /etc/x  (t)\n   --- a/etc/x\n   +++ b/etc/x\n   @@ -1 +1 @@\n   -a\n   +b\nverify: v\n")
    kinds = [b.kind for b in preview_blocks(text)]
    assert kinds == ["text", "markdown", "text", "diff", "text"]
    assert "Use this:\n\n```bash\nls\n```" in preview_blocks(text)[1].text


# ------------------------------------------------------------------ text is data

@pytest.mark.asyncio
async def test_markup_and_escapes_in_rules_and_logs_show_literally(tmp_path, rules_dir):
    d = rules_dir({"team.yaml": (
        "rules:\n- id: team-shm-markup\n  title: \"[/dev/shm] is [bold red]full\\e]52;c;aGk=\\a\"\n"
        "  symptom: shm-exhausted\n  severity: error\n  confidence: 0.9\n"
        "  explain: \"Clean [/dev/shm] \\e[2J now.\"\n"
        "  match:\n    log: ['shm full .x. ']\n"
        "  examples:\n    match: ['shm full [x] ']\n    no_match: ['shm ok']\n")})
    log = tmp_path / "job.log"
    log.write_bytes(b"shm full [x] \x1b]0;pwned\x07[/red]\n")
    app = TroubleshootApp(log=str(log), rules=[str(d)], snapshot=str(BASE), probe=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: any(x.rule.id == "team-shm-markup" for x in app.diagnoses))
        table = app.query_one("#diag-table")
        row = next(i for i, x in enumerate(app.diagnoses) if x.rule.id == "team-shm-markup")
        title = table.get_row_at(row)[2].plain
        assert title.startswith("[/dev/shm] is [bold red]full\\x1b]52") and "\x1b" not in title
        table.move_cursor(row=row)
        await pilot.pause()
        head = str(app.query_one("#diag-head").render())
        assert "[/dev/shm] is [bold red]full" in head and "\x1b" not in head and "\x07" not in head
        evidence = str(app.query_one("#diag-evidence").render())
        assert "shm full [x]" in evidence and "[/red]" in evidence  # the scanner drops the OSC sequence itself
        assert "\x1b" not in evidence and "\x07" not in evidence
        await pilot.press("r")
        app.query_one("#rules-filter").value = "team-shm"
        await wait_for(pilot, lambda: app.query_one("#rules-table").row_count == 1)
        await pilot.press("l")
        assert all("\x1b" not in t for _, t in app.query_one("#log-view").rows)


def test_a_crash_exits_non_zero_after_restoring_the_terminal(monkeypatch):
    from troubleshoot.tui import app as tui_app

    def boom(self, *args):
        raise RuntimeError("boom in the TUI")

    # Raised in what a background job delivers (the snapshot's facts, read in a worker): it must
    # end the app, not vanish with the thread. Textual prints every frame's locals on the way out.
    monkeypatch.setattr(tui_app.TroubleshootApp, "_snapshot_loaded", boom)
    real_run = tui_app.TroubleshootApp.run
    monkeypatch.setattr(tui_app.TroubleshootApp, "run", lambda self: real_run(self, headless=True))
    assert tui_app.run_tui(log=OOM_LOG, snapshot=str(BASE), probe=False) == 1


# ------------------------------------------------------------------ what users see, at 80x24

# Snapshots show the log's path: run from the repository with relative paths, so that every
# checkout (a CI clone elsewhere) renders the same screen. Facts come from a fixed snapshot.
REL_LOG, REL_SNAP = "examples/logs/cuda-oom.log", "tests/fixtures/snapshots/base.json"


def settled(*keys: str, then=None):
    """A `run_before` that waits until the app is idle, so a loaded machine takes the same picture."""

    async def settle(pilot):
        app = pilot.app
        await wait_for(pilot, lambda: app.diagnoses and not app.progress.busy())
        app.query_one("#diag-table").focus()
        app.query_one("#diag-detail").scroll_home(animate=False)
        await pilot.press(*keys)
        if then is not None:
            await then(pilot)
        await wait_for(pilot, app.bg.idle)  # the lint a Rules tab starts, say
        await app.workers.wait_for_complete()
        await pilot.wait_for_scheduled_animations()
        await pilot.pause(0.5)

    return settle


def oom_app():
    return TroubleshootApp(log=REL_LOG, snapshot=REL_SNAP, probe=False)


@pytest.mark.parametrize("view,keys", [
    ("diagnoses", ()), ("detail", ("enter",)), ("machine", ("m",)), ("log", ("l", "n")), ("help", ("question_mark",)),
])
def test_view_at_80x24(snap_compare, monkeypatch, view, keys):
    monkeypatch.chdir(REPO)
    assert snap_compare(oom_app(), terminal_size=(80, 24), run_before=settled(*keys))


def test_fix_modal_at_80x24(snap_compare, monkeypatch):
    monkeypatch.chdir(REPO)

    async def built(pilot):
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, FixScreen) and pilot.app.screen.built)

    assert snap_compare(oom_app(), terminal_size=(80, 24), run_before=settled("f", then=built))


def test_rules_with_a_filter_at_80x24(snap_compare, monkeypatch):
    monkeypatch.chdir(REPO)
    assert snap_compare(oom_app(), terminal_size=(80, 24), run_before=settled("slash", *"nccl timeout", "enter"))


def test_history_at_80x24(snap_compare, monkeypatch):
    from troubleshoot.fixes import journal

    monkeypatch.chdir(REPO)
    eid = "20261129-120000-set-env-0a1b"
    folder = journal.state_dir() / eid
    (folder / "backups").mkdir(parents=True)
    journal.Entry(folder, {"schema": journal.SCHEMA, "id": eid, "fixer": "set-env", "title": "Set PYTORCH_CUDA_ALLOC_CONF",
                           "params": {}, "root": "/srv/images/node-07", "started": "2026-11-29T12:00:00+00:00",
                           "status": "applied", "steps": []}).save()
    assert journal.entries()[0][1] != "corrupt"
    assert snap_compare(oom_app(), terminal_size=(80, 24), run_before=settled("h"))


def test_diagnoses_at_60x15(snap_compare, monkeypatch):
    monkeypatch.chdir(REPO)
    assert snap_compare(oom_app(), terminal_size=(60, 15), run_before=settled())


@pytest.mark.asyncio
async def test_60x15_keeps_help_quit_and_the_whole_symptom():
    app = TroubleshootApp(log=OOM_LOG, snapshot=str(BASE), probe=False)
    async with app.run_test(size=(60, 15)) as pilot:
        await wait_for(pilot, lambda: app.diagnoses)
        await pilot.pause()
        keys = str(app.query_one("#keys").render())
        assert "? help" in keys and "q quit" in keys
        for i, d in enumerate(app.diagnoses):
            assert app.query_one("#diag-table").get_row_at(i)[1].plain == d.symptom
        await pilot.press("p")  # typing in the paste area: the keys that work there
        keys = str(app.query_one("#keys").render())
        assert "F1 help" in keys and "^q quit" in keys


# ------------------------------------------------------------------ quitting stops the work

def _child_probe_plugin(started: list):
    import sys as _sys

    from troubleshoot.hookspecs import hookimpl

    class Slow:
        @staticmethod
        @hookimpl
        def troubleshoot_probes():
            def run(ctx):
                started.append(True)
                r = ctx.run([_sys.executable, "-c", "import time; time.sleep(600)"], timeout=600)
                return {"available": r.ok}

            return [Probe("slowchild", run, timeout=600)]

    return Slow


@pytest.mark.asyncio
async def test_quit_kills_the_probes_children_at_once():
    started: list = []
    plugins = load_plugins()
    plugins.pm.register(_child_probe_plugin(started), name="slowchild")
    app = TroubleshootApp(plugins=plugins, probe=True)
    async with app.run_test(size=(80, 24)) as pilot:
        def sleeper():
            return next((c for c in list(app.bg.runner._children) if "time.sleep(600)" in c.args[-1]), None)

        await wait_for(pilot, sleeper)  # the probe's child interpreter runs
        child = sleeper()
        assert "probing" in str(app.query_one("#status").render())
        await pilot.press("q")
    assert child.wait(30) == -9  # killed by the quit, not left to run its 600 s
    assert app.bg.stopped.is_set()


@pytest.mark.slow
@pytest.mark.asyncio
async def test_quit_stops_a_scan_between_chunks(tmp_path, monkeypatch):
    import sys
    import threading

    monkeypatch.setenv("TROUBLESHOOT_SCAN_ENGINE", "re2")  # seconds of scanning, not a blink
    sys.path.insert(0, str(REPO / "benchmarks"))
    import scan_bench

    log = tmp_path / "big.log"
    scan_bench.generate(log, 400)
    app = TroubleshootApp(log=str(log), snapshot=str(BASE), probe=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.progress.scan_done > 0, timeout=120)
        assert "scanning" in str(app.query_one("#status").render())
        await pilot.press("q")

    def scan_threads():
        return [t for t in threading.enumerate() if t.name == "tui-scan"]

    loop_end = asyncio.get_running_loop().time() + 30
    while scan_threads():
        assert asyncio.get_running_loop().time() < loop_end, "the scan did not stop"
        await asyncio.sleep(0.01)
    assert app.result is None  # it stopped: no diagnosis of a half-read log


# ------------------------------------------------------------------ the tabs render the views

@pytest.mark.asyncio
async def test_undo_of_an_undone_fix_says_so_without_asking():
    from troubleshoot.fixes import journal

    eid = "20261129-120000-set-env-0a1b"
    folder = journal.state_dir() / eid
    (folder / "backups").mkdir(parents=True)
    journal.Entry(folder, {"schema": journal.SCHEMA, "id": eid, "fixer": "set-env", "params": {}, "root": None,
                           "started": "2026-11-29T12:00:00+00:00", "status": "undone", "steps": []}).save()
    app = TroubleshootApp(probe=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("h")
        await wait_for(pilot, lambda: app.query_one("#history-table").row_count == 1)
        await pilot.press("u")
        await wait_for(pilot, lambda: any("already undone" in str(n.message) for n in app._notifications))
        assert not isinstance(app.screen, ConfirmScreen)


@pytest.mark.asyncio
async def test_facts_read_from_pasted_state_say_so_in_the_machine_tab():
    app = TroubleshootApp(log=str(REPO / "tests" / "fixtures" / "pasted" / "lsmod-nouveau.txt"), probe=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: any(d.rule.id == "nouveau-loaded-facts" for d in app.diagnoses))
        await pilot.press("m")
        shown = str(app.query_one("#machine-facts").render())
        assert "★ kernel.modules.nouveau = true   (nouveau-loaded-facts, from the log)" in shown
