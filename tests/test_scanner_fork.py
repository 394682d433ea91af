"""A log file cut into ranges scanned by forked processes: the same results as one process, the
stream left where a plain read leaves it, and no child left behind, whatever happens."""

import io
import os
import subprocess
import sys
import textwrap
import threading

import pytest

from troubleshoot import scan
from troubleshoot.scan import ScanCancelled, ScanPattern, forked, reader, scan_stream, tally
from troubleshoot.scan import children as procs
from forcefork import forced_fork
from tests.test_scanner_threads import OOM, PATS, TB, broken_condition, mixed_log, summary

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")


@pytest.fixture
def children(monkeypatch):
    """Every child forked during the test, to check that each ran and was reaped."""
    made: list[procs.Child] = []
    real = procs.Child

    class Recorded(real):
        def __init__(self, work):
            super().__init__(work)
            made.append(self)
            self.first_pid = self.pid

    monkeypatch.setattr(procs, "Child", Recorded)
    return made


@pytest.fixture
def forking():
    """The test's scans of regular files fork, small as the files are (forcefork.forced_fork)."""
    with forced_fork():
        yield


def assert_reaped(made):
    for c in made:
        assert c.pid is None and c.fd is None
        with pytest.raises(ChildProcessError):
            os.waitpid(c.first_pid, os.WNOHANG)  # already waited for: no zombie left


def scan_file(path, backend="hyperscan", **kw):
    with open(path, "rb") as f:
        result = scan_stream(f, kw.pop("patterns", PATS), backend, **kw)
        assert f.read() == b""  # left at the end, as reading it through would
        return result


@pytest.mark.parametrize("backend", ["hyperscan", "re2", "re"])
@pytest.mark.parametrize("chunk", [61, 4096])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_forked_ranges_find_exactly_what_one_process_finds(tmp_path, backend, chunk, threads, children, monkeypatch,
                                                           forking):
    if backend == "hyperscan" and not scan.hyperscan_available():
        pytest.skip("hyperscan not installed")
    if backend == "re2" and not scan.re2_available():
        pytest.skip("re2 not installed")
    monkeypatch.setattr(tally, "HIT_CAP", 50)  # a capped group retires its patterns mid-scan
    log = tmp_path / "train.log"
    log.write_bytes(mixed_log(4000))
    want = summary(scan_stream(io.BytesIO(log.read_bytes()), PATS, backend, chunk_size=chunk, threads=0))
    got = summary(scan_file(log, backend, chunk_size=chunk, threads=threads))
    assert got == want
    assert len(children) == threads  # one range per helper, each in its own process
    assert_reaped(children)
    assert want[2][("loss", "log")][4]  # the cap was reached
    assert ("r", "with_log:0") in want[2]


def test_forked_ranges_agree_with_the_re_engine_on_every_shipped_pattern(tmp_path, children, forking):
    from troubleshoot.engine.diagnose import scan_patterns
    from troubleshoot.engine.ruleset import load_ruleset

    pats = scan_patterns(load_ruleset(use_config=False).rules)
    log = tmp_path / "train.log"
    log.write_bytes(mixed_log(3000, seed=9) + b"\nRuntimeError: CUDA error: an illegal memory access was encountered\n"
                    + mixed_log(3000, seed=4))
    want = summary(scan_stream(io.BytesIO(log.read_bytes()), pats, "re", chunk_size=8192))
    assert summary(scan_file(log, None, patterns=pats, chunk_size=8192, threads=1)) == want
    assert children


@pytest.mark.parametrize("tail", [b"", b"no newline at the end: CUDA out of memory. Tried to allocate 2.0 GiB",
                                  b"\r\n\r\n", b"x" * 5000 + b" Traceback (most recent call last)"])
def test_the_last_line_and_the_file_position_are_as_one_process_sees_them(tmp_path, tail, children, forking):
    data = b"preamble read by someone else\n" + mixed_log(3000) + b"\n" + tail
    log = tmp_path / "train.log"
    log.write_bytes(data)
    skip = len(b"preamble read by someone else\n")
    want = summary(scan_stream(io.BytesIO(data[skip:]), PATS, "hyperscan", chunk_size=1024, threads=0))
    with open(log, "rb") as f:
        f.read(skip)  # a caller that has read the first line itself
        got = summary(scan_stream(f, PATS, "hyperscan", chunk_size=1024, threads=2))
        assert f.tell() == len(data)
    assert got == want
    assert len(children) == 2


def test_a_log_whose_head_was_peeked_is_scanned_from_where_the_peek_began(tmp_path, children, forking):
    from troubleshoot import logfiles

    data = mixed_log(3000)
    log = tmp_path / "train.log"
    log.write_bytes(data)
    want = summary(scan_stream(io.BytesIO(data), PATS, "hyperscan", chunk_size=1024, threads=0))
    with open(log, "rb") as f:
        peeked = logfiles.Peeked(f.read(700), f)
        peeked.read(10)  # part of the head already given out
        got = summary(scan_stream(peeked, PATS, "hyperscan", chunk_size=1024, threads=1))
        assert peeked.read() == b""
    assert got == summary(scan_stream(io.BytesIO(data[10:]), PATS, "hyperscan", chunk_size=1024, threads=0))
    assert got != want  # the ten bytes given out are not scanned again
    assert children


def test_a_child_that_dies_leaves_its_range_to_the_parent(tmp_path, children, monkeypatch, forking):
    def dies(send, **kw):
        send([(0, [])])
        os._exit(3)

    monkeypatch.setattr(forked, "child_scan", dies)
    log = tmp_path / "train.log"
    log.write_bytes(mixed_log(4000))
    want = summary(scan_stream(io.BytesIO(log.read_bytes()), PATS, "hyperscan", chunk_size=512, threads=0))
    assert summary(scan_file(log, chunk_size=512, threads=2)) == want
    assert len(children) == 2
    assert_reaped(children)


def test_a_child_stops_at_its_report_budget_and_the_parent_scans_the_rest(tmp_path, children, monkeypatch, forking):
    monkeypatch.setattr(forked, "REPORT_BYTES", 1)  # each child stops after its first chunk with a match
    log = tmp_path / "train.log"
    log.write_bytes(mixed_log(4000))
    want = summary(scan_stream(io.BytesIO(log.read_bytes()), PATS, "hyperscan", chunk_size=512, threads=0))
    assert summary(scan_file(log, chunk_size=512, threads=3)) == want
    assert_reaped(children)


def test_a_cancelled_scan_kills_and_reaps_its_children(tmp_path, children, forking):
    cancel = threading.Event()
    seen = []

    def progress(n):
        seen.append(n)
        if n > 8192:
            cancel.set()  # the user quits a few chunks in

    log = tmp_path / "train.log"
    log.write_bytes(mixed_log(20000))
    with open(log, "rb") as f, pytest.raises(ScanCancelled):
        scan_stream(f, PATS, "hyperscan", chunk_size=512, cancel=cancel, progress=progress, threads=2)
    assert len(children) == 2
    assert_reaped(children)
    assert seen == sorted(seen)


def test_a_failing_verifier_in_the_parent_reaches_the_caller_and_reaps_the_children(tmp_path, children, forking):
    log = tmp_path / "train.log"
    log.write_bytes(mixed_log(4000))
    bad = ScanPattern("oom", "log", OOM.regex, where=broken_condition())
    with pytest.raises(ValueError, match="broken rule condition"):
        scan_file(log, patterns=[bad, TB], chunk_size=512, threads=2)
    assert_reaped(children)


def test_progress_counts_every_byte_once_and_only_grows(tmp_path, children, forking):
    seen = []
    log = tmp_path / "train.log"
    log.write_bytes(mixed_log(20000))
    scan_file(log, chunk_size=4096, threads=2, progress=seen.append)
    assert seen == sorted(seen) and seen[-1] == log.stat().st_size


def test_no_fork_while_another_thread_runs_or_for_a_stream_that_is_not_a_file(tmp_path, children, monkeypatch):
    monkeypatch.setattr(forked, "FORK_MIN_BYTES", 1024)
    log = tmp_path / "train.log"
    log.write_bytes(mixed_log(4000))
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert not procs.forkable()
        scan_file(log, chunk_size=512, threads=1)
    finally:
        stop.set()
        other.join()
    assert children == []
    import gzip

    packed = tmp_path / "train.log.gz"
    packed.write_bytes(gzip.compress(log.read_bytes()))
    with forced_fork():  # a stream that is not a file is never cut, even where a file would be
        scan_stream(io.BytesIO(log.read_bytes()), PATS, "hyperscan", chunk_size=512, threads=1)
        with gzip.open(packed, "rb") as f:  # its fileno() is the compressed file's: never read by offset
            assert summary(scan_stream(f, PATS, "hyperscan", chunk_size=512, threads=1)) == summary(
                scan_stream(io.BytesIO(log.read_bytes()), PATS, "hyperscan", chunk_size=512, threads=0))
    assert children == []


def test_a_child_never_writes_what_the_parent_had_buffered(tmp_path):
    """A child leaves with os._exit: output the parent had not flushed yet is written once."""
    log = tmp_path / "train.log"
    log.write_bytes(mixed_log(4000))
    script = textwrap.dedent(f"""
        import sys
        from troubleshoot.scan import forked, scan_stream
        from tests.test_scanner_threads import PATS
        forked.FORK_MIN_BYTES = 0  # a small file is cut into forked ranges too
        assert forked.forkable()
        sys.stdout.write("written once")  # still in the buffer when the children are forked
        with open({str(log)!r}, "rb") as f:
            r = scan_stream(f, PATS, None, chunk_size=512, threads=2)
        sys.stdout.write(" %d" % r.total_lines)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         cwd=os.path.dirname(os.path.dirname(__file__)))
    assert out.returncode == 0, out.stderr
    assert out.stdout == "written once 4000" and out.stderr == ""


def context_log(tmp_path, chunk: int):
    """Two context patterns of one group around where the file is cut: the first line of one of
    them fails its `where`, so its real match is found by the second look of hyperscan."""
    pats = [ScanPattern("ctx", "with_log", r"alpha (?P<n>\d+)", where=lambda c: c.get("n") == "7"),
            ScanPattern("ctx", "with_log", r"beta (?P<m>\d+)"), ScanPattern("err", "log", r"ERROR \d+")]
    body = [f"info step {i}".ljust(31).encode() + b"\n" for i in range(4000)]
    log = tmp_path / "ctx.log"
    log.write_bytes(b"".join(body))
    with open(log, "rb") as f:
        k = forked.cuts(f.fileno(), 0, 2, chunk)[1] // 32  # the first line of the child's range
    return pats, body, log, k


@pytest.mark.parametrize("layout", ["apart", "same line"])
def test_a_context_group_is_counted_in_line_order_by_every_engine_and_every_cut(tmp_path, layout, children, forking):
    pats, body, log, k = context_log(tmp_path, 4096)
    if layout == "apart":
        body[k - 3], body[k - 2], body[k + 1] = b"alpha 1\n", b"alpha 7\n", b"beta 2\n"
    else:  # alpha's first line fails its `where`; the next one holds both patterns
        body[k - 1], body[k] = b"alpha 1\n", b"alpha 7 beta 2\n"
    data = b"".join(body)
    log.write_bytes(data)
    want = summary(scan_stream(io.BytesIO(data), pats, "re", chunk_size=4096))
    for engine in ("re2", "hyperscan"):
        for chunk in (61, 4096):
            assert summary(scan_stream(io.BytesIO(data), pats, engine, chunk_size=chunk, threads=0)) == want, (engine, chunk)
    assert summary(scan_file(log, "hyperscan", patterns=pats, chunk_size=4096, threads=1)) == want
    assert children
    lines = [h[0] for h in want[2][("ctx", "with_log")][1]]
    assert lines == sorted(lines) and len(lines) == (2 if layout == "apart" else 1)


def test_a_line_longer_than_long_line_is_cut_into_the_same_windows_wherever_the_scan_starts(tmp_path, children,
                                                                                         monkeypatch, forking):
    monkeypatch.setattr(reader, "LONG_LINE", 2048)
    long_line = b"".join(b"x" * 500 + b" ERROR %d " % k for k in range(40))  # a match across some window edges
    data = b"".join(b"short line %d\n" % i for i in range(3000)) + long_line + b"\n" + b"tail\n" * 500
    log = tmp_path / "long.log"
    log.write_bytes(data)
    pats = [ScanPattern("err", "log", r"ERROR (?P<k>\d+)")]
    want = summary(scan_stream(io.BytesIO(data), pats, "hyperscan", chunk_size=512, threads=0))
    for skip in (0, 1, 7, 333):  # the one-process scan reads from elsewhere: the same windows
        got = summary(scan_stream(io.BytesIO(b"\n" * skip + data), pats, "hyperscan", chunk_size=512, threads=0))
        assert got[2] == {k: (v[0], [(h[0] + skip, *h[1:]) for h in v[1]], *v[2:]) for k, v in want[2].items()}
    assert summary(scan_file(log, patterns=pats, chunk_size=512, threads=1)) == want
    assert children


def test_a_fork_that_fails_leaves_the_scan_to_this_process_with_nothing_left_open(tmp_path, monkeypatch, forking):
    real_fork, calls = os.fork, []

    def fork():
        calls.append(1)
        if len(calls) == 2:
            raise BlockingIOError(11, "Resource temporarily unavailable")  # RLIMIT_NPROC reached
        return real_fork()

    monkeypatch.setattr(procs.os, "fork", fork)
    log = tmp_path / "train.log"
    log.write_bytes(mixed_log(4000))
    fds = len(os.listdir("/proc/self/fd"))
    want = summary(scan_stream(io.BytesIO(log.read_bytes()), PATS, "hyperscan", chunk_size=512, threads=0))
    assert summary(scan_file(log, chunk_size=512, threads=2)) == want
    assert len(calls) == 2 and len(os.listdir("/proc/self/fd")) == fds


def test_children_reaped_by_someone_else_still_give_their_ranges(tmp_path, children, forking):
    """A process started with SIGCHLD ignored (it is inherited across exec) has its children
    reaped by the kernel: waitpid finds none, and the scan trusts what they sent."""
    import signal

    log = tmp_path / "train.log"
    log.write_bytes(mixed_log(4000))
    want = summary(scan_stream(io.BytesIO(log.read_bytes()), PATS, "hyperscan", chunk_size=512, threads=0))
    old = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        got = summary(scan_file(log, chunk_size=512, threads=2))
    finally:
        signal.signal(signal.SIGCHLD, old)
    assert got == want and len(children) == 2


CTRL_C_AT_FORK = r"""
import os, signal, sys
from troubleshoot.scan import children as procs

real_fork = os.fork


def fork_then_ctrl_c():
    pid = real_fork()
    if pid:
        os.kill(os.getpid(), signal.SIGINT)  # held: it arrives once start() lets it
    return pid


# Ctrl-C as a terminal's user has it: a shell that starts a command in the background without
# job control (`pytest &` in a script) starts it with SIGINT ignored, and that is inherited
signal.signal(signal.SIGINT, signal.default_int_handler)
procs.os.fork = fork_then_ctrl_c
started = []
r, w = os.pipe()  # the child waits on it: it is still running when Ctrl-C arrives
try:
    procs.start(lambda send: os.read(r, 1), started)
    print("no KeyboardInterrupt")
except KeyboardInterrupt:
    pid = started[0].pid if started else None
    print("held until kept:", len(started), pid is not None)
    started[0].kill()
    try:
        os.waitpid(pid, os.WNOHANG)
        print("child not reaped")
    except ChildProcessError:
        print("reaped:", started[0].fd is None)
"""


def test_ctrl_c_at_the_fork_never_loses_the_child():
    """Ctrl-C between fork() and the caller keeping the child is held until the child is in
    the caller's list, which then kills and reaps it. In a process of its own, with Ctrl-C's
    default handler: a test worker's threads and signal dispositions are not a user's."""
    p = subprocess.run([sys.executable, "-c", CTRL_C_AT_FORK], capture_output=True, text=True, timeout=60)
    assert p.stdout.splitlines() == ["held until kept: 1 True", "reaped: True"], p.stdout + p.stderr


def test_a_report_cut_short_is_a_child_that_failed():
    """A child killed while it wrote (and reaped by someone else, so no exit status tells) leaves
    half a message: only whole ones come back, and the last is not the end of its range."""
    import signal

    old = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        r, w = os.pipe()

        def work(send):
            send(["first batch"])
            os.write(w, b"x")  # the parent may kill it now
            send([b"y" * (4 << 20)])  # far more than the pipe holds: it blocks here

        started: list = []
        procs.start(work, started)
        child = started[0]
        os.read(r, 1)
        import select

        while len(child.data) < (512 << 10):  # part of the big batch is in; the child waits on the pipe
            select.select([child.fd], [], [], 5)
            child.data += os.read(child.fd, 64 << 10)  # no more: the rest of the 4 MiB cannot be in yet
        os.kill(child.pid, signal.SIGKILL)
        got = child.messages()
        assert [procs.load(m) for m in got] == [["first batch"]]
    finally:
        signal.signal(signal.SIGCHLD, old)
        os.close(r)
        os.close(w)


@pytest.mark.parametrize("role", ["log", "with_log:0"])
@pytest.mark.parametrize("source", [r"^$", r"^\s*$", r"(?:foo)?", r"\d*"])
def test_patterns_that_match_empty_text_find_the_same_lines_in_every_engine(tmp_path, role, source, children, forking):
    pats = [ScanPattern("g", role, source), ScanPattern("h", "log", "foo")]
    data = b"abc\nfoo 1\n\nbar\n\n  \nlast"
    results = {}
    for engine in ("re", "re2", "hyperscan"):
        for chunk in (3, 7, 1 << 20):
            results[engine, chunk] = summary(scan_stream(io.BytesIO(data), pats, engine, chunk_size=chunk, threads=0))
    log = tmp_path / "empty-lines.log"
    log.write_bytes(data * 200)
    results["fork"] = summary(scan_file(log, patterns=pats, chunk_size=64, threads=1))
    want = summary(scan_stream(io.BytesIO(data * 200), pats, "re", chunk_size=64))
    assert results.pop("fork") == want
    assert all(got == results["re", 3] for got in results.values()), results
    if source == r"^$":
        assert [h[0] for h in results["re", 3][2][("g", role)][1]] == ([3] if role != "log" else [3, 5])


def test_the_pure_python_engine_stops_looking_for_what_it_retired_within_a_chunk(monkeypatch):
    monkeypatch.setattr(tally, "HIT_CAP", 2)
    pats = [ScanPattern("c", "with_log:0", r"version (?P<v>\d)"), ScanPattern("l", "log", r"step (?P<s>\d)")]
    data = b"version 1\nversion 2\nstep 1\nstep 2\nstep 3\nversion 3\nstep 4\n"
    got = {e: summary(scan_stream(io.BytesIO(data), pats, e, chunk_size=1 << 20, threads=0)) for e in ("re", "re2")}
    assert got["re"] == got["re2"]
    assert got["re"][2][("c", "with_log:0")][0] == 1 and got["re"][2][("l", "log")][0] == 2
