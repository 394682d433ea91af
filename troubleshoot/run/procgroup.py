"""The job's process group after the job itself has exited: who is still in it, and stopping
them (SIGTERM, then SIGKILL after a grace period), as a shell's job control would.

Read from /proc: the wrapper is not the parent of a job's background children (they are
reparented when the job exits), so it cannot wait for them; it polls their state instead.
"""

from __future__ import annotations

import os
import signal
import time
from typing import NamedTuple

from troubleshoot.textsafe import terminal_safe

POLL = 0.02  # seconds between two looks at the group while it is being stopped
CMDLINE_MAX = 200


class Leftover(NamedTuple):  # not a dataclass: `dataclasses` (and `inspect`) would delay the job's start
    pid: int
    command: str


def _stat(pid: str) -> tuple[str, int] | None:
    """(state, process group) of a process, None when it is gone or unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        fields = stat[stat.rfind(b")") + 2:].split()
        return fields[0].decode("ascii", "replace"), int(fields[2])
    except (OSError, IndexError, ValueError):
        return None


def command_of(pid: int) -> str:
    """The command line of a process, terminal-safe, shortened; its name when it has none."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read(4096)
        text = raw.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace")
        if not text:
            with open(f"/proc/{pid}/comm", "rb") as f:
                text = "[" + f.read(64).strip().decode("utf-8", "replace") + "]"
    except OSError:
        text = "?"
    text = terminal_safe(text, keep_newlines=False)
    return text if len(text) <= CMDLINE_MAX else text[:CMDLINE_MAX - 3] + "..."


def members(pgid: int) -> list[Leftover]:
    """Live processes (zombies excluded: they hold nothing and only wait to be reaped) of a group."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        st = _stat(name)
        if st and st[1] == pgid and st[0] not in ("Z", "X"):
            out.append(Leftover(int(name), command_of(int(name))))
    return sorted(out, key=lambda x: x.pid)


def _signal_group(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def stop_group(pgid: int, grace: float, on_wait=None) -> bool:
    """SIGTERM to the group; SIGKILL when someone is still there after `grace` seconds.
    `on_wait(timeout)` is called between looks (the wrapper keeps reading output there).
    True when SIGKILL was needed."""
    _signal_group(pgid, signal.SIGTERM)
    # A stopped process (Ctrl-Z, SIGSTOP) acts on SIGTERM only once it runs again.
    _signal_group(pgid, signal.SIGCONT)
    deadline = time.monotonic() + grace
    while members(pgid):
        left = deadline - time.monotonic()
        if left <= 0:
            _signal_group(pgid, signal.SIGKILL)
            _wait_empty(pgid, on_wait)
            return True
        _pause(min(POLL, left), on_wait)
    return False


def _wait_empty(pgid: int, on_wait, limit: float = 5.0) -> None:
    """SIGKILL is not refused, but the kernel takes a moment (longer for a process in D state)."""
    deadline = time.monotonic() + limit
    while members(pgid) and time.monotonic() < deadline:
        _pause(POLL, on_wait)


def _pause(seconds: float, on_wait) -> None:
    if on_wait:
        on_wait(seconds)
    else:
        time.sleep(seconds)


def holders(names: set[str]) -> list[Leftover]:
    """Processes (of any group) with one of `names` open, as /proc/PID/fd links read: the
    ones that left the job's group (setsid, a daemon) and still hold its output open."""
    out = []
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            fds = os.listdir(f"/proc/{name}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{name}/fd/{fd}") in names:
                    out.append(Leftover(int(name), command_of(int(name))))
                    break
            except OSError:
                continue
    return sorted(out, key=lambda x: x.pid)
