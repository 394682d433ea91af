"""`q` before the TUI is up (tui/early.py), in a real terminal: the real `troubleshoot tui` on a
pseudo-terminal, keys written to its master side. No timing is asserted (benchmarks/tui_quit.py
measures it); these check what an early `q` must and must not do."""

from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import sys
import termios
import textwrap
import threading
import time

import pytest

from conftest import REPO
from procwait import Output

ALT_SCREEN = b"\x1b[?1049h"  # Textual has taken the terminal


class Terminal:
    """A pty at 80x24; everything the program writes is read as it comes (a full pty would
    block its writes) and can be waited for."""

    def __init__(self):
        self.master, self.slave = os.openpty()
        fcntl.ioctl(self.slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
        self.modes = termios.tcgetattr(self.slave)  # a shell's cooked mode
        self.out = b""
        self._seen = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                chunk = b""
            with self._seen:
                self.out += chunk
                self._seen.notify_all()
            if not chunk:
                return

    def wait_for(self, text: bytes, timeout: float = 120) -> None:
        with self._seen:
            if not self._seen.wait_for(lambda: text in self.out, timeout):
                raise AssertionError(f"never saw {text!r}; got {self.out[-1500:]!r}")

    def restored(self) -> None:
        """The terminal is as the program found it: modes, and the main screen after any alt screen."""
        assert termios.tcgetattr(self.slave) == self.modes  # echo and line mode back as they were
        if ALT_SCREEN in self.out:
            self.wait_for(b"\x1b[?1049l")
            assert self.out.rindex(b"\x1b[?1049l") > self.out.rindex(ALT_SCREEN)

    def type(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def run(self, *args: str, cwd=REPO) -> subprocess.Popen:
        env = {**os.environ, "TERM": "xterm-256color"}
        for var in ("COLUMNS", "LINES", "TEXTUAL", "TEXTUAL_ALLOW_SIGNALS"):
            env.pop(var, None)
        # A session of its own: every process it leaves behind is found by its session id.
        return subprocess.Popen([sys.executable, "-m", "troubleshoot", "tui", *args], stdin=self.slave,
                                stdout=self.slave, stderr=self.slave, env=env, cwd=cwd, start_new_session=True)

    def close(self) -> None:
        os.close(self.slave)  # the reader sees EIO and ends
        self._reader.join(30)
        os.close(self.master)


@pytest.fixture
def term():
    t = Terminal()
    yield t
    t.close()


def session_processes(sid: int) -> list[int]:
    """Live processes of session `sid` (zombies are dead: their parent just has not reaped them)."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = open(f"/proc/{name}/stat").read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "
        if fields[0] != "Z" and int(fields[3]) == sid:
            out.append(int(name))
    return out


def assert_all_end(pids: list[int], timeout: float = 30) -> None:
    """Each process exits within `timeout` (waited on with a pidfd, not polled)."""
    deadline = time.monotonic() + timeout
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            left = max(0.0, deadline - time.monotonic())
            assert select.select([fd], [], [], left)[0], f"process {pid} still runs: " + \
                open(f"/proc/{pid}/cmdline").read().replace("\0", " ")[:200]
        finally:
            os.close(fd)


def child_probe_plugin(tmp_path) -> tuple[str, str]:
    """A plugin file whose probe starts a child interpreter that says its pid on a FIFO, then
    sleeps 600 s (as a slow `import torch` would): (plugin path, FIFO path)."""
    fifo = tmp_path / "child-started"
    os.mkfifo(fifo)
    plugin = tmp_path / "slowchild_plugin.py"
    plugin.write_text(textwrap.dedent(f'''
        import sys
        from troubleshoot.hookspecs import hookimpl
        from troubleshoot.probes.base import Probe

        CHILD = "import os, time; f = open({str(fifo)!r}, 'w'); f.write(str(os.getpid())); f.close(); time.sleep(600)"

        def run(ctx):
            return {{"available": ctx.run([sys.executable, "-c", CHILD], timeout=600).ok}}

        @hookimpl
        def troubleshoot_probes():
            return [Probe("slowchild", run, timeout=600)]
    '''))
    return str(plugin), str(fifo)


def read_fifo(path: str, timeout: float = 120) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # no writer yet: select waits for one
    try:
        data = b""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0 and select.select([fd], [], [], left)[0], "the probe's child never started"
            chunk = os.read(fd, 64)
            if not chunk and data:
                return data.decode()
            data += chunk
    finally:
        os.close(fd)


def test_q_typed_before_the_tui_started_ends_it_before_textual_takes_the_terminal(term):
    term.type(b"q")  # waiting in the terminal before the program even starts
    proc = term.run()  # probes on: none may start
    assert proc.wait(60) == 0
    assert ALT_SCREEN not in term.out  # it ended before Textual drew anything
    term.restored()
    assert_all_end(session_processes(proc.pid))


def test_another_key_typed_early_reaches_the_app_and_q_then_quits(term):
    term.type(b"m")  # the Machine tab, typed before the app exists
    proc = term.run("--no-probe")
    term.wait_for(b"Probes not run")  # only the Machine tab says so: the key was not lost
    term.type(b"q")
    assert proc.wait(60) == 0
    term.restored()


def test_q_while_the_screen_comes_up_with_probes_running_leaves_no_process(term):
    proc = term.run()
    term.wait_for(ALT_SCREEN)  # the driver has the terminal; the first frame may not be drawn yet
    term.type(b"q")
    assert proc.wait(60) == 0
    term.restored()
    assert_all_end(session_processes(proc.pid))  # the frameworks probe's child, if it had started


def test_q_once_a_probe_child_runs_kills_it_and_exits(term, tmp_path):
    plugin, fifo = child_probe_plugin(tmp_path)
    proc = term.run("-p", plugin)
    child = int(read_fifo(fifo))
    term.type(b"q")
    assert proc.wait(60) == 0
    term.restored()
    assert_all_end([child, *session_processes(proc.pid)])  # not left to sleep its 600 s


# The two windows of tui.early, driven directly in a child process on a real terminal (an early
# exit ends the process that runs it). Its stdin is the terminal; GO, a pipe, says "go" once the
# test has typed.
EARLY = """
import os, select, sys
from troubleshoot.tui.early import EarlyKeys

early = EarlyKeys.start(0)
print("started", flush=True)
os.read(int(os.environ["GO"]), 1)
def leave():
    print("left", flush=True)
def stop():
    print("jobs stopped", flush=True)
"""


def run_early(term, keys: bytes, body: str, go: bool = True) -> tuple[int, str]:
    go_r, go_w = os.pipe()
    proc = subprocess.Popen([sys.executable, "-c", EARLY + textwrap.dedent(body) + "\nprint('still here')\n"],
                            stdin=term.slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO,
                            pass_fds=(go_r,), env={**os.environ, "GO": str(go_r)}, start_new_session=True)
    os.close(go_r)
    try:
        Output(proc.stdout).wait_for(b"started")
        term.type(keys)
        if go:
            os.write(go_w, b"x")
        out, err = proc.communicate(timeout=60)
    finally:
        os.close(go_w)
        proc.kill()
    assert not err, err.decode()
    term.restored()  # whichever way it ended
    return proc.returncode, out.decode()


READ_ALL = """
typed = early.handover()
rest = b""
while len(typed) + len(rest) < 3:  # what the watcher did not read is still in the terminal
    assert select.select([0], [], [], 60)[0]
    rest += os.read(0, 16)
print(repr(typed + rest.decode()))
early.finish()
"""


def test_early_keys_other_than_q_are_not_lost_nor_reordered(term):
    code, out = run_early(term, b"mqx", READ_ALL)
    assert (code, out) == (0, "'mqx'\nstill here\n")  # m first: q is the app's to read, not a quit


def test_early_q_before_the_driver_ends_the_process(term):
    code, out = run_early(term, b"q", "", go=False)  # never told to go on: the watcher must end it
    assert (code, out) == (0, "")


@pytest.mark.parametrize("body, survives, said", [
    ("early.handover(); early.key('q', leave)", False, "left\n"),
    ("early.handover(); early.key('ctrl+q', leave)", False, "left\n"),
    ("early.handover(); early.mounted(stop); early.key('q', leave)", False, "jobs stopped\nleft\n"),
    ("early.handover(); early.key('x', leave); early.key('q', leave)", True, ""),  # not the first key
    ("early.handover(); early.key(None, leave); early.key('q', leave)", True, ""),  # a paste came first
    ("early.handover(); early.key('ctrl+c', leave)", True, ""),  # Textual's: a hint to press ctrl+q
    ("early.handover(); early.close(); early.key('q', leave)", True, ""),  # drawn: the app's binding
])
def test_the_drivers_first_key_before_the_first_frame(term, body, survives, said):
    code, out = run_early(term, b"", body + "\nearly.finish()")
    assert (code, out) == (0, said + ("still here\n" if survives else ""))
