"""Work the TUI starts can be stopped: probes stop waiting and their children are killed, a scan
stops between two chunks, and new facts are diagnosed over the scan already made."""

import sys
import threading
import time

import pytest

from conftest import REPO
from troubleshoot import pipeline
from troubleshoot.scan import ScanCancelled
from troubleshoot.probes.base import ChildRunner, Probe, ProbeContext, run_probes
from troubleshoot.sources import FactsSource, LogSource, Sources

OOM_LOG = str(REPO / "examples" / "logs" / "cuda-oom.log")


def wait_until(predicate, timeout=60.0):
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError("timed out waiting")
        time.sleep(0.01)


def test_cancelled_probes_return_and_their_children_are_killed():
    runner = ChildRunner()
    ctx = ProbeContext(runner=runner)
    results = {}

    def slow(ctx):
        r = ctx.run([sys.executable, "-c", "import time; time.sleep(600)"], timeout=600)
        results["slow"] = r
        return {"available": r.ok}

    probes = [Probe("quick", lambda ctx: {"available": True}), Probe("slow", slow, timeout=600)]
    cancel = threading.Event()
    out = {}
    collected = []
    t = threading.Thread(target=lambda: out.update(
        snap=run_probes(probes, ctx, on_result=lambda o: collected.append(o.name), cancel=cancel)))
    t.start()
    wait_until(lambda: runner._children)  # the child interpreter is running
    wait_until(lambda: "quick" in collected)  # under load the quick probe may not be in yet
    child = next(iter(runner._children))
    cancel.set()
    runner.kill()
    t.join(60)
    assert not t.is_alive()
    assert child.wait(60) == -9  # killed, not left to run out its 600 s
    assert out["snap"]["quick"] == {"available": True}  # what finished is kept
    wait_until(lambda: "slow" in results)
    assert results["slow"].error.endswith("cancelled")
    assert runner([sys.executable, "-c", "pass"], 5).error.endswith("cancelled")  # nothing new starts


def test_a_cancelled_scan_stops_between_chunks(tmp_path):
    ruleset = pipeline.load_rules()
    log = tmp_path / "big.log"
    log.write_bytes(b"step 1 loss 0.5\n" * 400_000)  # several 1 MiB chunks
    cancel = threading.Event()
    seen = []

    def progress(done):
        seen.append(done)
        cancel.set()  # the user quits while the first chunk is scanned

    with pytest.raises(ScanCancelled):
        pipeline.read_sources([LogSource(str(log), str(log))], ruleset, cancel=cancel, progress=progress)
    assert len(seen) == 1 and seen[0] < log.stat().st_size


def test_facts_after_the_scan_reuse_it(monkeypatch):
    ruleset = pipeline.load_rules()
    snap = __import__("json").loads((REPO / "tests" / "fixtures" / "snapshots" / "base.json").read_text())
    logs = [LogSource(OOM_LOG, OOM_LOG)]
    with pipeline.read_sources(logs, ruleset) as scanned:
        before = pipeline.diagnose_scanned(scanned, Sources(logs, []), ruleset)

        def no_second_scan(*a, **k):
            raise AssertionError("the log was scanned again")

        monkeypatch.setattr(pipeline, "scan_stream", no_second_scan)
        after = pipeline.diagnose_scanned(scanned, Sources(logs, [FactsSource(snap, "snapshot")]), ruleset)
    monkeypatch.undo()
    full = pipeline.diagnose_sources(Sources(logs, [FactsSource(snap, "snapshot")]), ruleset)
    assert [d.rule.id for d in after.diagnoses] == [d.rule.id for d in full.diagnoses]
    assert before.diagnoses and before.diagnoses[0].symptom == "cuda-oom"
    assert after.scan is not None and after.scan.total_lines == full.scan.total_lines


def test_a_bug_in_a_tui_job_reaches_the_app_as_itself():
    # The app's thread re-raises what a job raised (so the TUI ends non-zero and prints it): the
    # exception must be the job's own, not a NameError from a name unset after its except block.
    import threading

    import pytest

    from troubleshoot.tui.background import Background

    posted, arrived = [], threading.Event()

    class FakeApp:
        def call_from_thread(self, call_later, fn):
            posted.append(fn)
            arrived.set()

        def call_later(self, fn):
            pass

    def job(cancel):
        raise RuntimeError("boom in a job")

    Background(FakeApp()).start("scan", job, on_done=lambda result: None)
    assert arrived.wait(60), "the job's failure was never posted to the app"
    with pytest.raises(RuntimeError, match="boom in a job"):
        posted[0]()
