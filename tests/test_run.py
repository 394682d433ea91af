"""`troubleshoot run`: real jobs, real signals, real terminals."""

import json
import os
import pty
import signal
import subprocess
import sys

import pytest

from conftest import REPO, torch_build
from procwait import Output, read_pty as _read_pty, signal_when_ready

TORCH = torch_build()  # the examples' jobs import torch; this process need not
if TORCH is None:
    pytest.skip("needs torch", allow_module_level=True)

EXAMPLES = [
    ("cuda_on_cpu_build.py", "framework-cuda-unavailable", 1),
    # A job of a few seconds each, beside the one above that shows the wrapper's path end to end.
    pytest.param("too_many_open_files.py", "too-many-open-files", 1, marks=pytest.mark.slow),
    pytest.param("nan_loss_anomaly.py", "nan-loss", 1, marks=pytest.mark.slow),
    # About ten seconds on a loaded 2-core machine (it fills memory until the limit kills it).
    pytest.param("host_oom.py", "host-oom", 1, marks=pytest.mark.slow),
    # These two run for about ten seconds each, so that the watcher sees the trend. The leak
    # keeps CPU tensors: host memory that climbs, which ends in the OOM killer, not a GPU leak.
    pytest.param("io_stall.py", "io-stall", 0, marks=pytest.mark.slow),
    pytest.param("memory_leak.py", "host-oom", 0, marks=pytest.mark.slow),
]


def wrapped(*args, **kw):
    return subprocess.run([sys.executable, "-m", "troubleshoot", "run", *args], capture_output=True, cwd=REPO,
                          timeout=300, **kw)


@pytest.mark.parametrize("script, symptom, code", EXAMPLES)
def test_examples_are_diagnosed_from_what_really_happened(tmp_path, script, symptom, code):
    if script == "cuda_on_cpu_build.py" and TORCH["cuda"]:
        pytest.skip("needs a CPU-only torch")
    log, report = tmp_path / "job.log", tmp_path / "report.json"
    p = wrapped("--log-to", str(log), "--format", "json", "--report", str(report), "--no-probe", "--",
                sys.executable, str(REPO / "examples" / script))
    assert p.returncode == code, p.stderr.decode()[-2000:]
    doc = json.loads(report.read_text())
    assert doc["exit_code"] == code
    symptoms = [d["symptom"] for d in doc["diagnoses"]]
    assert symptoms and symptoms[0] == symptom, (symptoms, p.stderr.decode()[-1500:])
    assert log.stat().st_size > 0
    if script == "cuda_on_cpu_build.py":  # what torch itself says, kept in the log as the job printed it
        assert b"Torch not compiled with CUDA enabled" in log.read_bytes()
    if (doc.get("run") or {}).get("samples"):  # what the input-pipeline rules compare CPU use with
        assert doc["run"]["cpu_count"] == len(os.sched_getaffinity(0))


JOB = r"""
import sys, time
out = sys.stdout.buffer
for i in range(100000):
    out.write(b"step %d loss 0.%d\r" % (i, i % 97) if i % 10 else b"epoch line %d \xff\xfe\n" % i)
out.write(b"\x1b[31mred\x1b[0m done\n")
out.flush()
sys.stderr.write("warning: something on stderr\n")
sys.exit(3)
"""


def test_output_is_byte_identical_and_exit_code_kept(tmp_path):
    job = tmp_path / "job.py"
    job.write_text(JOB)
    direct = subprocess.run([sys.executable, str(job)], capture_output=True)
    log = tmp_path / "job.log"
    p = wrapped("--log-to", str(log), "--no-probe", "--no-watch", "--", sys.executable, str(job))
    assert p.returncode == direct.returncode == 3
    assert p.stdout == direct.stdout
    assert p.stderr.startswith(direct.stderr)  # our own messages come after the job's, on stderr only
    assert b"troubleshoot: job ended (exit 3)" in p.stderr
    assert sorted(log.read_bytes().splitlines()) == sorted((direct.stdout + direct.stderr).splitlines())


# The pump polls its own wake-up fd only, never the job's pipes (see run/pump.Pump); the job
# prints, goes quiet, then prints on both outputs, and every byte still comes through.
NEVER_POLLED = r"""
import selectors, sys
from pathlib import Path
from troubleshoot.run import wrapper
polled = []
register = selectors.PollSelector.register
def spy(self, fileobj, events, data=None):
    polled.append(fileobj)
    return register(self, fileobj, events, data)
selectors.PollSelector.register = spy
path = Path(sys.argv[1])
job = "import sys, time; print('a', flush=True); time.sleep(0.3); print('b'); print('c', file=sys.stderr)"
with open(path, "wb") as log:
    result = wrapper.run([sys.executable, "-c", job], log, path, use_pty=False)
print(result.returncode, len(polled), sorted(path.read_bytes().split()))
"""


def test_the_jobs_pipes_are_read_without_being_polled(tmp_path):
    p = subprocess.run([sys.executable, "-c", NEVER_POLLED, str(tmp_path / "job.log")], capture_output=True,
                       cwd=REPO, timeout=60)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    assert p.stdout.splitlines()[-1] == b"0 1 [b'a', b'b', b'c']"  # one fd polled: the wake-up one


def test_killed_job_exit_code_is_128_plus_signal(tmp_path):
    p = wrapped("--no-probe", "--no-watch", "--log-to", str(tmp_path / "l"), "--", sys.executable, "-c",
                "import os, signal; print('bye', flush=True); os.kill(os.getpid(), signal.SIGKILL)")
    assert p.returncode == 128 + 9 and p.stdout == b"bye\n"
    assert b"killed by signal 9" in p.stderr


def _start(args, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "troubleshoot", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=REPO, **kw)


def test_sigterm_is_forwarded(tmp_path):
    job = ("import signal, sys, time\n"
           "signal.signal(signal.SIGTERM, lambda s, f: (print('got SIGTERM', flush=True), sys.exit(7)))\n"
           "print('ready', flush=True)\n"
           "time.sleep(600)\n")
    log = tmp_path / "job.log"
    proc = _start(["run", "--no-probe", "--no-watch", "--log-to", str(log), "--", sys.executable, "-c", job])
    # "ready" reaches us through the wrapper's pump, which starts after its handlers are installed.
    out, err = signal_when_ready(proc, signal.SIGTERM)
    assert proc.returncode == 7 and b"got SIGTERM" in out, err
    assert b"got SIGTERM" in log.read_bytes()


def test_sigint_is_forwarded(tmp_path):
    # The job asks for KeyboardInterrupt itself: a job started in the background (or by a test
    # runner started with SIGINT ignored) would otherwise inherit SIG_IGN and never see it.
    job = ("import signal, time\n"
           "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
           "print('ready', flush=True)\n"
           "time.sleep(600)\n")
    log = tmp_path / "job.log"
    proc = _start(["run", "--no-probe", "--no-watch", "--log-to", str(log), "--", sys.executable, "-c", job])
    out, err = signal_when_ready(proc, signal.SIGINT)
    assert proc.returncode == 130, err
    assert b"KeyboardInterrupt" in log.read_bytes() and b"interrupted" in err


def test_ctrl_c_in_a_real_terminal_reaches_the_job_first(tmp_path):
    """Run under a pseudo-terminal like a user would; type Ctrl-C; the job handles it once."""
    log = tmp_path / "job.log"
    job = ("import sys, time\n"
           "try:\n"
           "    print('tty' if sys.stdout.isatty() else 'pipe', flush=True)\n"
           "    time.sleep(600)\n"
           "except KeyboardInterrupt:\n    print('job saw Ctrl-C', flush=True); sys.exit(42)\n")
    pid, fd = pty.fork()
    if pid == 0:  # the child: a shell-like session with our terminal
        try:
            os.chdir(REPO)
            # An interactive shell gives its foreground job the default SIGINT, even when the
            # shell itself was started with SIGINT ignored (a background test run).
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.execv(sys.executable, [sys.executable, "-m", "troubleshoot", "run", "--no-probe", "--no-watch",
                                      "--log-to", str(log), "--", sys.executable, "-c", job])
        finally:
            os._exit(127)
    try:
        out = _read_pty(fd, until=b"tty\r\n")  # printed inside the job's `try`: Ctrl-C now lands in it
        os.write(fd, b"\x03")  # Ctrl-C, turned into SIGINT for the foreground process group by the terminal
        out += _read_pty(fd)
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 42, out
    assert out.count(b"job saw Ctrl-C") == 1  # once: not forwarded a second time
    assert b"tty\r\n" in out  # the job saw a terminal on stdout
    assert b"job saw Ctrl-C" in log.read_bytes()


def test_missing_command_is_a_one_line_error(tmp_path):
    p = wrapped("--no-probe", "--log-to", str(tmp_path / "l"), "--", "no-such-command-xyz")
    assert p.returncode == 127 and p.stderr.decode().strip() == "troubleshoot: error: no-such-command-xyz: command not found"


def test_follow_a_growing_log_prints_new_diagnoses(tmp_path):
    log = tmp_path / "growing.log"
    log.write_text("epoch 1 loss 0.5\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB\n")
    # SIGINT at its default, as for a command typed at a terminal (the test runner may ignore it).
    proc = _start(["diagnose", "--follow", str(log)],
                  preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        # The first diagnosis proves the log was read once; only then does it grow.
        out = Output(proc.stdout)
        first = out.wait_for(b"new:")
        assert b"cuda-oom" in first
        with open(log, "a") as f:
            f.write("RuntimeError: CUDA error: an illegal memory access was encountered\n")
        line = out.wait_for(b"new:").splitlines()[-1]
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert b"new: [error]" in line and b"illegal-memory-access" in line
    assert proc.returncode == 0, err
    assert b"1. [ERROR]" in rest and b"illegal-memory-access" in rest  # the full diagnosis at the end


def test_follow_in_json_prints_one_line_per_new_diagnosis_then_the_end(tmp_path):
    log = tmp_path / "growing.log"
    log.write_text("epoch 1 loss 0.5\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB\n")
    proc = _start(["diagnose", "--follow", str(log), "--no-probe", "--format", "json"],
                  preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        out = Output(proc.stdout)
        first = json.loads(out.wait_for(b'"event": "new"').splitlines()[-1])
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert first["diagnosis"]["symptom"] == "cuda-oom"
    end = json.loads(rest.decode().strip().splitlines()[-1])
    assert end["event"] == "end" and end["schema"] == 1 and end["diagnoses"][0]["symptom"] == "cuda-oom"


@pytest.mark.slow
def test_pid_watches_a_running_job(tmp_path):
    job = subprocess.Popen([sys.executable, str(REPO / "examples" / "memory_leak.py")], stdout=subprocess.DEVNULL)
    p = subprocess.run([sys.executable, "-m", "troubleshoot", "diagnose", "--pid", str(job.pid)], capture_output=True,
                       cwd=REPO, timeout=120)
    job.wait()
    assert p.returncode == 0
    assert b"run-host-memory-climbing" in p.stdout and b"host-oom" in p.stdout  # host memory: no GPU leak
    assert b"gpu-memory-leak" not in p.stdout


def test_watcher_reads_throughput_cheaply_and_at_most_every_quarter_second(monkeypatch):
    import os

    from troubleshoot.run import watch

    clock = [100.0]
    monkeypatch.setattr(watch.time, "monotonic", lambda: clock[0])
    w = watch.Watcher(os.getpid())
    for i in range(1000):  # a chatty job without rates: nothing to read
        w.feed(f"step {i} loss 0.{i}\n".encode())
    assert not w.throughput
    w.feed(b"Epoch 1: 10%|#| 37/370 [00:05<00:45, 7.25it/s]\rEpoch 1: 11%|#| 41/370 [00:05<00:44, 7.31it/s]")
    w.feed(b"Epoch 1: 12%|#| 45/370 [00:05<00:44, 9.99it/s]")  # same instant: skipped
    clock[0] += watch.READING_GAP
    w.feed(b"{'train_runtime': 3.1, 'train_samples_per_second': 1.0} 812.5 samples/sec\n")
    assert [v for _, v in w.throughput] == [7.31, 812.5]


def test_run_logs_are_kept_beside_the_fix_journal_in_the_state_folder(tmp_path):
    from troubleshoot.fixes import journal
    from troubleshoot.run import logfile
    from troubleshoot.userstate import state_dir

    runs = logfile.state_runs_folder()
    assert runs == tmp_path / "xdg-state" / "troubleshoot" / "runs" and runs.is_dir()
    assert state_dir("journal") == journal.state_dir() and journal.state_dir().parent == runs.parent
