"""`troubleshoot run` by shell conventions: exit codes 127/126, the job's process group (a
background child neither holds the wrapper nor outlives it silently), job control on a real
terminal, and closed outputs. Real processes, real terminals; every wait is on an event."""

import json
import os
import pty
import re
import signal
import subprocess
import sys
import time

import pytest

from conftest import REPO
from procwait import read_pty, signal_when_ready

RUN = [sys.executable, "-m", "troubleshoot", "run", "--no-probe", "--no-watch"]


def wrapped(tmp_path, *cmd, extra=(), **kw):
    return subprocess.run([*RUN, *extra, "--log-to", str(tmp_path / "job.log"), "--", *cmd], capture_output=True,
                          cwd=REPO, timeout=300, **kw)


def gone(pid: int) -> bool:
    """Exited: no such process, or a zombie waiting for its new parent to reap it."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except FileNotFoundError:
        return True
    return stat[stat.rfind(b")") + 2:].split()[0] in (b"Z", b"X")


def _files(tmp_path):
    missing_interp = tmp_path / "bad-interpreter"
    missing_interp.write_text("#!/no/such/interpreter\necho hi\n")
    no_shebang = tmp_path / "no-shebang"
    no_shebang.write_text("echo hi\n")
    not_exec = tmp_path / "not-executable"
    not_exec.write_text("#!/bin/sh\necho hi\n")
    for f in (missing_interp, no_shebang):
        f.chmod(0o755)
    not_exec.chmod(0o644)
    return {"bad-interpreter": str(missing_interp), "no-shebang": str(no_shebang), "not-executable": str(not_exec),
            "directory": str(tmp_path), "missing-path": str(tmp_path / "nope")}


@pytest.mark.parametrize("case, code, says", [
    ("no-such-command-xyz", 127, "command not found"),
    ("missing-path", 127, "no such file"),
    ("not-executable", 126, "permission denied"),
    ("no-shebang", 126, "not a valid executable (no #! line"),
    ("bad-interpreter", 126, "bad interpreter"),
    ("directory", 126, "is a directory"),
])
def test_a_command_that_cannot_run_exits_like_a_shell(tmp_path, case, code, says):
    argv0 = _files(tmp_path).get(case, case)
    p = wrapped(tmp_path, argv0)
    err = p.stderr.decode()
    assert p.returncode == code, err
    assert err.count("\n") == 1 and err == f"troubleshoot: error: {argv0}: {err.split(': ', 3)[3]}"
    assert says in err and "Traceback" not in err


def test_a_background_child_does_not_hold_the_wrapper_and_is_stopped(tmp_path):
    pidfile = tmp_path / "child.pid"
    started = time.monotonic()
    report = tmp_path / "report.json"
    p = wrapped(tmp_path, "sh", "-c", f'sleep 40 & echo $! > {pidfile}; echo started; exit 3',
                extra=("--format", "json", "--report", str(report)))
    took = time.monotonic() - started
    err = p.stderr.decode()
    assert p.returncode == 3, err
    assert took < 30, f"the wrapper waited for the background sleep ({took:.1f}s)"
    child = int(pidfile.read_text())
    assert gone(child)
    assert "still running in the job's process group when it exited, stopped with SIGTERM:" in err
    # Its command line: `sleep 40`, or still the forked shell's when it had not yet exec'd.
    assert re.search(rf"^  pid {child}: (sleep 40|sh -c .*sleep 40.*)$", err, re.M), err
    assert p.stdout == b"started\n"
    assert "job ended (exit 3)" in err
    doc = json.loads(report.read_text())
    assert doc["exit_code"] == 3 and [x["pid"] for x in doc["leftovers"]] == [child]


def test_a_child_ignoring_sigterm_gets_sigkill_after_the_grace_period(tmp_path):
    pidfile = tmp_path / "child.pid"
    # `trap '' TERM` is inherited through exec: the sleep ignores SIGTERM. The job exits only
    # once the child has written its pid (so its trap is set) and exec'd the sleep (so the
    # wrapper lists it as `sleep 40`, not as the shell it was a moment before).
    child_sh = f'trap "" TERM; echo $$ > {pidfile}; exec sleep 40'
    wait = (f'while [ ! -s {pidfile} ] || [ "$(cat /proc/$(cat {pidfile})/comm 2>/dev/null)" != sleep ]; '
            f'do :; done')
    p = wrapped(tmp_path, "sh", "-c", f"sh -c '{child_sh}' & {wait}; exit 0", extra=("--grace", "0.5"))
    err = p.stderr.decode()
    assert p.returncode == 0, err
    child = int(pidfile.read_text())
    assert gone(child)
    assert "stopped with SIGTERM, then SIGKILL (still there after the grace period)" in err
    assert f"  pid {child}: sleep 40\n" in err  # it had exec'd: it wrote its pid after its trap


def test_a_child_holding_the_terminal_is_stopped_too(tmp_path):
    """Under a real terminal the job writes into the wrapper's pseudo-terminals; a background
    child holding them (and our terminal, its stdin) must not keep either open."""
    pidfile = tmp_path / "child.pid"
    pid, fd = pty.fork()
    if pid == 0:
        try:
            os.chdir(REPO)
            os.execv(sys.executable, [*RUN, "--log-to", str(tmp_path / "job.log"), "--", "sh", "-c",
                                      f"sleep 40 & echo $! > {pidfile}; echo tty-job; exit 5"])
        finally:
            os._exit(127)
    try:
        out = read_pty(fd)  # returns once every process on the terminal has closed it
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 5, out
    child = int(pidfile.read_text())
    assert gone(child)
    assert b"tty-job" in out and re.search(rf"pid {child}: (sleep 40|sh -c .*)\r?$".encode(), out, re.M), out


def test_sigterm_to_the_wrapper_kills_a_job_that_ignores_it_after_the_grace_period(tmp_path):
    job = ("import signal, time\n"
           "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
           "print('ready', flush=True)\n"
           "time.sleep(600)\n")
    proc = subprocess.Popen([*RUN, "--grace", "0.5", "--log-to", str(tmp_path / "job.log"), "--", sys.executable,
                             "-c", job], stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            cwd=REPO)
    _, err = signal_when_ready(proc, signal.SIGTERM)
    assert proc.returncode == 128 + 9, err
    assert b"killed by signal 9" in err and b"did not exit within the grace period after SIGTERM" in err


def test_ctrl_z_stops_job_and_wrapper_and_fg_resumes_both_with_the_terminal(tmp_path):
    """The job is the terminal's foreground group: it reads the terminal, Ctrl-Z stops it (and
    the wrapper, so that a shell would get its prompt back), SIGCONT (`fg`) resumes both."""
    job = ("import sys\n"
           "print('ready', flush=True)\n"
           "line = sys.stdin.readline()\n"
           "print('got', line.strip(), flush=True)\n"
           "sys.exit(5)\n")
    pid, fd = pty.fork()
    if pid == 0:
        try:
            os.chdir(REPO)
            signal.signal(signal.SIGTSTP, signal.SIG_DFL)
            os.execv(sys.executable, [*RUN, "--log-to", str(tmp_path / "job.log"), "--", sys.executable, "-c", job])
        finally:
            os._exit(127)
    try:
        out = read_pty(fd, until=b"ready\r\n")
        os.write(fd, b"\x1a")  # Ctrl-Z: SIGTSTP for the terminal's foreground group, the job's
        _, status = os.waitpid(pid, os.WUNTRACED)
        assert os.WIFSTOPPED(status), status  # the wrapper stopped itself once the job stopped
        os.kill(pid, signal.SIGCONT)  # what a shell's `fg` sends (the session leader owns the terminal)
        os.write(fd, b"go\n")
        out += read_pty(fd)
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 5, out
    assert b"got go" in out


def _closed_outputs(*fds):
    def close():
        for fd in fds:
            os.close(fd)
    return close


@pytest.mark.parametrize("closed", [(1,), (2,), (1, 2)], ids=["stdout", "stderr", "both"])
def test_closed_outputs_keep_the_exit_code(tmp_path, closed):
    """`troubleshoot run -- job >&-` (and 2>&-): no traceback, the job's code, its bytes in the log."""
    p = subprocess.run([*RUN, "--log-to", str(tmp_path / "job.log"), "--", "sh", "-c", "echo out; echo err >&2; exit 4"],
                       stdout=None if 1 in closed else subprocess.PIPE, stderr=None if 2 in closed else subprocess.PIPE,
                       preexec_fn=_closed_outputs(*closed), cwd=REPO, timeout=300)
    assert p.returncode == 4
    if 2 not in closed:
        assert b"Traceback" not in p.stderr and b"job ended (exit 4)" in p.stderr
    if 1 not in closed:
        assert p.stdout == b"out\n"
    assert sorted((tmp_path / "job.log").read_bytes().splitlines()) == [b"err", b"out"]


def test_a_reader_that_left_keeps_the_exit_code(tmp_path):
    """`troubleshoot run -- job 2>&1 | head -0`: stdout and stderr are a pipe nobody reads."""
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run([*RUN, "--log-to", str(tmp_path / "job.log"), "--", "sh", "-c",
                            "seq 20000; echo err >&2; exit 6"], stdout=w, stderr=w, cwd=REPO, timeout=300)
    finally:
        os.close(w)
    assert p.returncode == 6
    log = (tmp_path / "job.log").read_bytes()
    assert b"20000\n" in log and b"err\n" in log
