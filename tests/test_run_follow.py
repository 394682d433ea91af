"""`troubleshoot run` scans the log while the job writes it: the reader blocks as a finished file
would not, and the diagnosis is the one `troubleshoot diagnose --log` gives on the saved log."""

import json
import os
import subprocess
import sys
import threading

import pytest

from conftest import REPO
from troubleshoot.sources import LogTail

TIMEOUT = 60


class Writer:
    """The pump's side: appends to the log (unbuffered, as `run` opens it), tells the follower."""

    def __init__(self, path):
        self.f = open(path, "wb", buffering=0)
        self.follower = LogTail(str(path), stream=True)

    def append(self, data: bytes):
        self.f.write(data)
        self.follower.appended(len(data))

    def end(self):
        self.f.close()
        self.follower.end()


def reading(follower, n):
    """follower.read(n) in a thread: (done event, result list)."""
    done, out = threading.Event(), []

    def go():
        out.append(follower.read(n))
        done.set()

    threading.Thread(target=go, daemon=True).start()
    return done, out


def test_a_read_waits_for_all_it_asked_for_and_is_short_only_at_the_end(tmp_path):
    w = Writer(tmp_path / "job.log")
    done, out = reading(w.follower, 100)
    w.append(b"a" * 40)
    w.append(b"b" * 60)  # the read asked for 100: it gets them in one piece, not 40 then 60
    assert done.wait(TIMEOUT)
    assert out == [b"a" * 40 + b"b" * 60]
    w.append(b"c" * 30)
    done, out = reading(w.follower, 100)
    w.end()
    assert done.wait(TIMEOUT)
    assert out == [b"c" * 30]  # the job ended: the rest, then the end of the file
    assert w.follower.read(100) == b""


def test_a_reader_that_asked_late_gets_what_was_already_written(tmp_path):
    w = Writer(tmp_path / "job.log")
    for _ in range(1000):
        w.append(b"line\n")  # nobody waits yet: these wake nobody
    done, out = reading(w.follower, 5000)
    assert done.wait(TIMEOUT)
    assert out == [b"line\n" * 1000]
    done, out = reading(w.follower, 10)
    w.append(b"0123456789")
    assert done.wait(TIMEOUT) and out == [b"0123456789"]
    w.end()


def test_readinto_fills_the_buffer_as_a_file_would(tmp_path):
    w = Writer(tmp_path / "job.log")
    buf = bytearray(10)
    got = []
    t = threading.Thread(target=lambda: got.append(w.follower.readinto(buf)), daemon=True)
    t.start()
    for piece in (b"12", b"345", b"67890xyz"):
        w.append(piece)
    t.join(TIMEOUT)
    assert got == [10] and bytes(buf) == b"1234567890"
    w.end()
    assert w.follower.read() == b"xyz"


# A job whose log the scan follows for several of its chunks: an nvidia-smi table in the head
# (facts pasted in the log), errors before, across and after the first 4 MiB, output in bursts
# of every size on stdout and stderr. LABELLED: every line carries a rank, as torchrun prints.
JOB = r"""
import os, sys
label = sys.argv[1] == "labelled"
def out(fd, text):
    lines = text.splitlines(keepends=True)
    if label:
        lines = [f"[rank{i % 2}]: {ln}" for i, ln in enumerate(lines)]
    os.write(fd, "".join(lines).encode())
out(1, "| NVIDIA-SMI 535.54.03    Driver Version: 535.54.03    CUDA Version: 12.2 |\n")
out(2, "RuntimeError: CUDA error: an illegal memory access was encountered\n")
noise = "".join(f"step {i} loss {i % 97 / 97:.4f} 3.2it/s\n" for i in range(4000))
for burst in range(400):
    out(1 + burst % 2, noise[: 1000 * (1 + burst % 37)] + noise[-200:])
    if burst == 250:
        out(1, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
out(1, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n")
out(2, "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).\n")
sys.exit(1)
"""


@pytest.mark.parametrize("kind", ["plain", "labelled"])
def test_the_diagnosis_at_the_end_is_the_saved_logs(tmp_path, kind):
    job = tmp_path / "job.py"
    job.write_text(JOB)
    log, report = tmp_path / "job.log", tmp_path / "report.json"
    run = subprocess.run([sys.executable, "-m", "troubleshoot", "run", "--no-probe", "--no-watch", "--format", "json",
                          "--report", str(report), "--log-to", str(log), "--", sys.executable, str(job), kind],
                         capture_output=True, cwd=REPO, timeout=300)
    assert run.returncode == 1, run.stderr.decode()[-2000:]
    assert log.stat().st_size > 4 << 20  # past the head read ahead, over several scan chunks
    after = subprocess.run([sys.executable, "-m", "troubleshoot", "diagnose", "--no-probe", "--format", "json",
                            "--log", str(log)], capture_output=True, cwd=REPO, timeout=300)
    assert after.returncode == 0, after.stderr.decode()[-2000:]
    during, saved = json.loads(report.read_text())["diagnoses"], json.loads(after.stdout)["diagnoses"]
    assert during == saved
    rules = {d["rule"] for d in during}
    assert {"cuda-illegal-memory-access", "torch-cuda-oom", "nvidia-xid-79-fallen-off-bus",
            "dataloader-shm-bus-error"} <= rules, rules


# The wrapper's threads (scan, watcher) wait while the job runs, and the kernel may hand SIGCHLD
# to any of them. Here the main thread blocks it, and the job exits only once the wrapper has
# seen its output end (so the main thread then waits in poll() with nothing else to wake it).
ANOTHER_THREAD_TAKES_SIGCHLD = r"""
import signal, sys, threading
from pathlib import Path
from troubleshoot.run import pump, wrapper
path, fifo = Path(sys.argv[1]), sys.argv[2]
output_ended = threading.Event()
step = pump.Pump.step
def step_and_tell(self, timeout):
    out = step(self, timeout)
    if not self.open:
        output_ended.set()
    return out
pump.Pump.step = step_and_tell
def release():
    output_ended.wait()
    open(fifo, "w").close()  # the job's `read` returns: it exits
threading.Thread(target=release, daemon=True).start()
threading.Thread(target=threading.Event().wait, daemon=True).start()  # as the scan's thread waits
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
with open(path, "wb") as log:
    result = wrapper.run(["sh", "-c", f"echo done; exec >&- 2>&-; read x < {fifo}; exit 3"], log, path)
print("returncode", result.returncode)
"""


def test_the_jobs_end_is_seen_when_another_thread_takes_the_signal(tmp_path):
    fifo = tmp_path / "release"
    os.mkfifo(fifo)
    p = subprocess.run([sys.executable, "-c", ANOTHER_THREAD_TAKES_SIGCHLD, str(tmp_path / "job.log"), str(fifo)],
                       capture_output=True, cwd=REPO, timeout=60)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    assert p.stdout == b"done\nreturncode 3\n"


# Seconds of output as fast as the job can print, with the live diagnoses every second: the live
# scan of new lines and the scan of the whole log share the scanner (one hyperscan scratch). The
# DataLoader's fd-sharing tracebacks (as examples/too_many_open_files.py prints them when it
# spins) keep the scan of the whole log busy verifying matches.
BUSY_JOB = r"""
import sys, time
tb = ('Traceback (most recent call last):\n'
      '  File "/usr/lib/python3.11/multiprocessing/resource_sharer.py", line 48, in __init__\n'
      'OSError: [Errno 24] Too many open files\n'
      'RuntimeError: unable to open shared memory object </torch_2576_1976482295_47> in read-write mode: '
      'Too many open files (24)\n')
block = tb * 200 + "RuntimeError: CUDA error: an illegal memory access was encountered\n"
end = time.monotonic() + 3
for _ in range(2000):  # at most ~110 MB
    sys.stdout.write(block)
    if time.monotonic() > end:
        break
sys.exit(1)
"""


@pytest.mark.slow
def test_live_diagnoses_and_the_scan_of_the_whole_log_do_not_collide(tmp_path):
    """Before the two took turns, one in a few such runs ended in hyperscan's ScratchInUseError
    (a traceback after the job); the timing that needs cannot be forced from here."""
    log, report = tmp_path / "job.log", tmp_path / "report.json"
    p = subprocess.run([sys.executable, "-m", "troubleshoot", "run", "--no-probe", "--interval", "0.2", "--format",
                        "json", "--report", str(report), "--log-to", str(log), "--", sys.executable, "-c", BUSY_JOB],
                       capture_output=True, cwd=REPO, timeout=300)
    err = p.stderr.decode()
    assert p.returncode == 1 and "Traceback" not in err, err[-3000:]
    after = subprocess.run([sys.executable, "-m", "troubleshoot", "diagnose", "--no-probe", "--format", "json",
                            "--log", str(log)], capture_output=True, cwd=REPO, timeout=300)
    def from_log(doc):  # the watcher's facts (3 s of samples) may add findings of their own
        return {d["rule"]: (d["count"], d["first_line"], d["last_line"]) for d in doc["diagnoses"] if d["count"]}

    during = from_log(json.loads(report.read_text()))
    assert during == from_log(json.loads(after.stdout))
    assert {"cuda-illegal-memory-access", "dataloader-fd-sharing"} <= set(during)
