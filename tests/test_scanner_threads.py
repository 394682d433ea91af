"""The hyperscan pass in worker threads: the same results as in one thread, and no thread left
running once scan_stream has returned or raised."""

import io
import random
import re
import threading

import pytest

from troubleshoot import scan
from troubleshoot.scan import ScanCancelled, ScanPattern, hyperscan, pool, reader, scan_stream, tally, threaded

pytestmark = pytest.mark.skipif(not scan.hyperscan_available(), reason="hyperscan not installed")

OOM = ScanPattern("oom", "log", re.compile(r"CUDA out of memory\. Tried to allocate (?P<req>[\d.]+ [KMG]iB)", re.ASCII))
TB = ScanPattern("tb", "log", re.compile(r"^Traceback \(most recent call last\)", re.ASCII))
CTX = ScanPattern("r", "with_log:0", r"^\s*NCCL version (?P<v>[\d.]+)$")
LOSS = ScanPattern("loss", "log", r"loss=(?P<loss>\d+\.\d+)")
PATS = [OOM, TB, CTX, LOSS, ScanPattern("w", "log", r"Watchdog caught collective operation timeout")]


def mixed_log(lines: int = 4000, seed: int = 3) -> bytes:
    rnd = random.Random(seed)
    pieces = ["step {} ok", "\x1b[32mRuntimeError: CUDA \x1b[1mout of memory\x1b[0m. Tried to allocate {}.0 MiB",
              "x NCCL version 2.{}.3", "\x1b[2K\rNCCL \x1b[33mversion\x1b[0m 2.{}.1", "  NCCL version 2.{}.7",
              "\x1b[1mWatchdog caught\x1b[0m collective operation timeout", "Traceback (most recent call last):",
              "epoch {} loss=0.{}5", "plain \x1b[0m{}", "Epoch 1: {}%|#\rEpoch 1: 99%|####", "\xff\xfe {} bytes"]
    text = "\n".join(rnd.choice(pieces).format(i, i % 97) for i in range(lines))
    return text.encode("utf-8", "surrogateescape")


def summary(result):
    return (result.total_lines, result.total_bytes,
            {k: (v.count, [(h.line, h.text, h.start, h.end) for h in v.lines], sorted(v.captures.items()),
                 sorted(v.patterns_hit), v.capped, {n: s.as_dict() for n, s in v.series.items()})
             for k, v in sorted(result.hits.items())})


def scan_threads_alive() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "troubleshoot-scan"]


@pytest.mark.parametrize("chunk", [61, 4096, 1 << 20])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_threads_find_exactly_what_one_thread_finds(chunk, threads, monkeypatch):
    monkeypatch.setattr(tally, "HIT_CAP", 50)  # a capped group retires its patterns mid-scan
    data = mixed_log()
    want = summary(scan_stream(io.BytesIO(data), PATS, "hyperscan", chunk_size=chunk, threads=0))
    got = summary(scan_stream(io.BytesIO(data), PATS, "hyperscan", chunk_size=chunk, threads=threads))
    assert got == want
    assert want[2][("oom", "log")][0] > 0 and ("r", "with_log:0") in want[2]
    assert want[2][("loss", "log")][4]  # the cap was reached


def test_threads_agree_with_the_re_engine_on_every_shipped_pattern():
    from troubleshoot.engine.diagnose import scan_patterns
    from troubleshoot.engine.ruleset import load_ruleset

    pats = scan_patterns(load_ruleset(use_config=False).rules)
    data = mixed_log(3000, seed=9) + b"\nRuntimeError: CUDA error: an illegal memory access was encountered\n"
    want = summary(scan_stream(io.BytesIO(data), pats, "re", chunk_size=8192))
    assert summary(scan_stream(io.BytesIO(data), pats, "hyperscan", chunk_size=8192, threads=2)) == want


def test_no_thread_outlives_a_scan_that_returns():
    scan_stream(io.BytesIO(mixed_log()), PATS, "hyperscan", chunk_size=512, threads=3)
    assert scan_threads_alive() == []


def test_no_thread_outlives_a_cancelled_scan():
    cancel = threading.Event()

    def progress(n):
        if n > 4096:
            cancel.set()  # the user quits a few chunks in

    with pytest.raises(ScanCancelled):
        scan_stream(io.BytesIO(mixed_log()), PATS, "hyperscan", chunk_size=512, cancel=cancel, progress=progress,
                    threads=2)
    assert scan_threads_alive() == []


def broken_condition(fails_at: int = 3):
    """A rule's `where` that raises on its third call, as a broken condition would."""
    calls = []

    def where(captures):
        calls.append(captures)
        if len(calls) == fails_at:
            raise ValueError("a broken rule condition")
        return True
    return where


def test_no_thread_outlives_a_failing_verifier():
    bad = ScanPattern("oom", "log", OOM.regex, where=broken_condition())
    with pytest.raises(ValueError, match="broken rule condition"):
        scan_stream(io.BytesIO(mixed_log()), [bad, TB], "hyperscan", chunk_size=512, threads=2)
    assert scan_threads_alive() == []


def test_no_thread_outlives_a_failing_reader():
    class Broken(io.BytesIO):
        reads = 0

        def readinto(self, b):
            self.reads += 1
            if self.reads == 5:
                raise OSError(5, "Input/output error")
            return super().readinto(b)

    with pytest.raises(OSError):
        scan_stream(Broken(mixed_log()), PATS, "hyperscan", chunk_size=512, threads=2)
    assert scan_threads_alive() == []


def test_an_error_in_a_worker_reaches_the_caller():
    class Fails:
        def scan(self, data, match_event_handler=None, scratch=None):
            raise RuntimeError("hyperscan failed")

    with pool.Pool(Fails(), 2, lambda db: None, hyperscan.reports) as workers:
        job = workers.submit(memoryview(b"some bytes\n"))
        with pytest.raises(RuntimeError, match="hyperscan failed"):
            job.result()
    assert scan_threads_alive() == []


def test_thread_count_follows_the_cores_and_the_input(monkeypatch):
    monkeypatch.delenv("TROUBLESHOOT_SCAN_THREADS", raising=False)
    monkeypatch.setattr(threaded.os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert threaded.scan_threads(1 << 30, 4 << 20) == 0  # one core: the scan stays in this thread
    monkeypatch.setattr(threaded.os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    assert threaded.scan_threads(1 << 30, 4 << 20) == threaded.MAX_THREADS - 1  # and this thread
    assert threaded.scan_threads(None, 4 << 20) == threaded.MAX_THREADS - 1  # a pipe: size unknown
    monkeypatch.setattr(threaded.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert threaded.scan_threads(1 << 30, 4 << 20) == 1
    assert threaded.scan_threads(1 << 20, 4 << 20) == 0  # a small log
    monkeypatch.setenv("TROUBLESHOOT_SCAN_THREADS", "0")
    assert threaded.scan_threads(1 << 30, 4 << 20) == 0


def test_the_size_of_what_is_left_decides(tmp_path, monkeypatch):
    """The pipeline reads a log's head ahead (logfiles.Peeked): the scanner still learns how
    much is left, so a small log is scanned in one thread and a large one with workers."""
    from troubleshoot import logfiles, pipeline
    from troubleshoot.engine.ruleset import load_ruleset

    b = io.BytesIO(b"x\n" * 5000)
    b.read(10)
    assert reader.stream_size(b) == 9990
    log = tmp_path / "train.log"
    log.write_bytes(mixed_log(2000))
    with open(log, "rb") as f:
        peeked = logfiles.Peeked(f.read(100), f)
        assert reader.stream_size(peeked) == log.stat().st_size
    r, w = __import__("os").pipe()
    with open(r, "rb") as pipe, open(w, "wb"):
        assert reader.stream_size(logfiles.Peeked(b"abc", pipe)) is None

    started = []
    real_pool = pool.Pool

    def recording_pool(*a, **k):
        started.append(a[1])
        return real_pool(*a, **k)

    monkeypatch.setattr(pool, "Pool", recording_pool)
    monkeypatch.delenv("TROUBLESHOOT_SCAN_THREADS", raising=False)
    monkeypatch.setattr(threaded.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    ruleset = load_ruleset(use_config=False)
    monkeypatch.setenv("TROUBLESHOOT_SCAN_ENGINE", "hyperscan")
    pipeline.run(str(log), ruleset=ruleset)
    assert started == []  # below PARALLEL_MIN_BYTES
    monkeypatch.setattr(threaded, "PARALLEL_MIN_BYTES", 1024)
    pipeline.run(str(log), ruleset=ruleset)
    assert started == [1]  # one worker beside the scanner's own thread on two cores
    assert scan_threads_alive() == []


def test_a_chunk_that_is_only_escape_sequences_once_stripped():
    """Found by the fuzzer: in a log coloured throughout, whole chunks are stripped, and the
    last one (an unfinished line holding only a colour code) became empty."""
    data = b"\n\n\n\n\n\n\x1b[31m\n\x1b[31m"
    want = summary(scan_stream(io.BytesIO(data), PATS, "hyperscan", chunk_size=7, threads=0))
    assert summary(scan_stream(io.BytesIO(data), PATS, "hyperscan", chunk_size=7, threads=2)) == want
    assert want[0] == 8
