"""Probe plumbing: the context probes read the machine through, and the concurrent runner.

Probes read files through `ctx.path()` and run commands through `ctx.run()`, so that tests can
replay recorded outputs of real machines (a fixture tree as `root`, recorded command output as
`runner`, recorded NVML values as `nvml`) without any mocking inside the probes.
"""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

SNAPSHOT_SCHEMA = 1
MAX_READ = 4 << 20


@dataclass(frozen=True)
class CmdResult:
    argv: tuple[str, ...]
    returncode: int | None
    stdout: str = ""
    stderr: str = ""
    error: str | None = None  # not found, timed out, permission denied...

    @property
    def ok(self) -> bool:
        return self.error is None and self.returncode == 0


def run_command(argv: Sequence[str], timeout: float) -> CmdResult:
    """Run a command without a shell; every failure is a result, never an exception."""
    argv = tuple(argv)
    try:
        p = subprocess.run(argv, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        return CmdResult(argv, None, error=f"{argv[0]}: command not found")
    except PermissionError as exc:
        return CmdResult(argv, None, error=f"{argv[0]}: {exc.strerror}")
    except subprocess.TimeoutExpired:
        return CmdResult(argv, None, error=f"{argv[0]}: timed out after {timeout:g}s")
    except OSError as exc:
        return CmdResult(argv, None, error=f"{argv[0]}: {exc.strerror or exc}")
    return CmdResult(argv, p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace"))


class ChildRunner:
    """`run_command` that remembers its running children, so that `kill()` (the user quit)
    ends them at once instead of leaving a slow `import torch` running to its timeout."""

    def __init__(self):
        self._lock = threading.Lock()
        self._children: set[subprocess.Popen] = set()
        self.killed = False

    def __call__(self, argv: Sequence[str], timeout: float) -> CmdResult:
        argv = tuple(argv)
        try:
            with self._lock:
                if self.killed:
                    return CmdResult(argv, None, error=f"{argv[0]}: cancelled")
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE)
                self._children.add(proc)
        except FileNotFoundError:
            return CmdResult(argv, None, error=f"{argv[0]}: command not found")
        except PermissionError as exc:
            return CmdResult(argv, None, error=f"{argv[0]}: {exc.strerror}")
        except OSError as exc:
            return CmdResult(argv, None, error=f"{argv[0]}: {exc.strerror or exc}")
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            return CmdResult(argv, None, error=f"{argv[0]}: timed out after {timeout:g}s")
        finally:
            with self._lock:
                self._children.discard(proc)
        if self.killed:
            return CmdResult(argv, None, error=f"{argv[0]}: cancelled")
        return CmdResult(argv, proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))

    def kill(self) -> None:
        with self._lock:
            self.killed = True
            for proc in self._children:
                try:
                    proc.kill()
                except OSError:
                    pass


@dataclass
class ProbeContext:
    root: Path = Path("/")
    python: str = sys.executable
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    runner: Callable[[Sequence[str], float], CmdResult] = run_command
    which: Callable[[str], str | None] = shutil.which
    nvml: Any = None  # a pynvml-compatible module; None imports pynvml
    sample_seconds: float = 0.5
    sleep: Callable[[float], None] = time.sleep

    def path(self, p: str | os.PathLike) -> Path:
        return self.root / str(p).lstrip("/")

    def read(self, p: str, limit: int = MAX_READ) -> str | None:
        """Text of a file under root, or None when it cannot be read (missing, denied)."""
        try:
            with open(self.path(p), "rb") as f:
                return f.read(limit).decode("utf-8", "replace")
        except OSError:
            return None

    def run(self, argv: Sequence[str], timeout: float = 5.0) -> CmdResult:
        return self.runner(argv, timeout)


@dataclass(frozen=True)
class Probe:
    """One area of the machine. `run(ctx)` returns JSON-able facts stored under `name`."""

    name: str
    run: Callable[[ProbeContext], dict]
    timeout: float = 5.0
    title: str = ""


@dataclass(frozen=True)
class ProbeOutcome:
    name: str
    facts: dict
    seconds: float
    status: str  # "ok", "unavailable", "error", "timeout"
    error: str | None = None


def _status(facts: dict) -> str:
    return "unavailable" if facts.get("available") is False else "ok"


def run_probes(probes: Sequence[Probe], ctx: ProbeContext | None = None,
               on_result: Callable[[ProbeOutcome], None] | None = None, cancel=None) -> dict:
    """Run every probe concurrently, each bounded by its own timeout; return the snapshot.

    Probes run in daemon threads: a probe stuck in a C call (a hung NVML init) cannot be
    killed, but it is reported as timed out and never keeps the process from exiting.
    `cancel` (a threading.Event): when set, stop waiting and return what has been collected.
    """
    ctx = ctx or ProbeContext()
    results: "queue.Queue[ProbeOutcome]" = queue.Queue()
    started = time.monotonic()

    def work(p: Probe) -> None:
        t0 = time.monotonic()
        try:
            facts = p.run(ctx)
            if not isinstance(facts, dict):
                raise TypeError(f"probe returned {type(facts).__name__}, not a dict")
            outcome = ProbeOutcome(p.name, facts, time.monotonic() - t0, _status(facts), facts.get("error"))
        except Exception as exc:  # a probe never takes the others down
            msg = f"{type(exc).__name__}: {exc}"
            outcome = ProbeOutcome(p.name, {"available": False, "error": f"probe failed: {msg}"},
                                   time.monotonic() - t0, "error", msg)
        results.put(outcome)

    deadlines = {}
    for p in probes:
        threading.Thread(target=work, args=(p,), name=f"probe-{p.name}", daemon=True).start()
        deadlines[p.name] = started + p.timeout
    outcomes: dict[str, ProbeOutcome] = {}
    # Counted by name, as facts are stored: two probes of one name (the caller keeps one, see
    # context.CommandContext.probes) would otherwise leave a wait for an outcome that never comes.
    while len(outcomes) < len(deadlines):
        if cancel is not None and cancel.is_set():
            break
        pending = [n for n in deadlines if n not in outcomes]
        wait = max(0.0, min(deadlines[n] for n in pending) - time.monotonic())
        if cancel is not None:
            wait = min(wait, 0.05)  # how soon a cancelled wait notices
        try:
            o = results.get(timeout=wait)
        except queue.Empty:
            now = time.monotonic()
            for n in pending:
                if deadlines[n] <= now:
                    timeout = next(p.timeout for p in probes if p.name == n)
                    o = ProbeOutcome(n, {"available": False, "error": f"timed out after {timeout:g}s"},
                                     timeout, "timeout", f"timed out after {timeout:g}s")
                    outcomes[n] = o
                    if on_result:
                        on_result(o)
            continue
        if o.name in outcomes:  # finished after its deadline: already reported as timed out
            continue
        outcomes[o.name] = o
        if on_result:
            on_result(o)
    return build_snapshot(outcomes.values())


def build_snapshot(outcomes) -> dict:
    snap: dict[str, Any] = {"schema": SNAPSHOT_SCHEMA,
                            "collected_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    status = {}
    for o in sorted(outcomes, key=lambda o: o.name):
        snap[o.name] = o.facts
        status[o.name] = {"status": o.status, "seconds": round(o.seconds, 3), "error": o.error}
    snap["probes"] = status
    return snap
