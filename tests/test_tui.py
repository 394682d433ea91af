"""The TUI driven by Textual's pilot: real app, real workers, real files under a temp root."""

import asyncio
import json

import pytest

from conftest import REPO
from troubleshoot.plugins import load_plugins
from troubleshoot.probes.base import Probe
from troubleshoot.tui.app import TroubleshootApp
from troubleshoot.tui.screens import ConfirmScreen, FixScreen

OOM_LOG = str(REPO / "examples" / "logs" / "cuda-oom.log")
BASE = REPO / "tests" / "fixtures" / "snapshots" / "base.json"


async def wait_for(pilot, predicate, timeout=30.0):
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
    log.write_bytes(bytes(range(256)) * 4000 + b"\nRuntimeError: CUDA error: an illegal memory access was encountered\n")
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
        await wait_for(pilot, lambda: list(tmp_path.glob("troubleshoot-report-*.md")))
    text = next(tmp_path.glob("troubleshoot-report-*.md")).read_text()
    assert "| 1 | error | `cuda-oom`" in text and "## Machine" in text and "## Log excerpt" in text


# Snapshots show the log's path: run from the repository with relative paths, so that every
# checkout (a CI clone elsewhere) renders the same screen.
REL_LOG, REL_SNAP = "examples/logs/cuda-oom.log", "tests/fixtures/snapshots/base.json"


def settled(*keys: str):
    """A `run_before` that waits until the app is idle, so a loaded machine takes the same picture."""

    async def settle(pilot):
        app = pilot.app
        await wait_for(pilot, lambda: app.diagnoses)
        # The explanation is Markdown, rendered in the background: let every worker finish.
        await app.workers.wait_for_complete()
        app.query_one("#diag-table").focus()
        app.query_one("#diag-detail").scroll_home(animate=False)
        await pilot.press(*keys)
        await pilot.wait_for_scheduled_animations()
        await pilot.pause(1.0)

    return settle


def test_main_screen_snapshot(snap_compare, monkeypatch):
    monkeypatch.chdir(REPO)
    assert snap_compare(TroubleshootApp(log=REL_LOG, snapshot=REL_SNAP, probe=False), terminal_size=(100, 30),
                        run_before=settled())


def test_machine_screen_snapshot(snap_compare, monkeypatch):
    monkeypatch.chdir(REPO)
    assert snap_compare(TroubleshootApp(log=REL_LOG, snapshot=REL_SNAP, probe=False), terminal_size=(100, 30),
                        run_before=settled("m"))


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
