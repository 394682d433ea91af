"""Snapshots of many nodes: `troubleshoot probe --format json` once per node through Slurm.

One job step per node (`srun --jobid J -w NODE -N1 -n1 --overlap`), all started at once, each
with its own deadline: a node that hangs is cut off (its step terminated) while the others
arrive. The allocation is the caller's (`--job`, or `$SLURM_JOB_ID` inside one) or a short one
made here with `salloc --no-shell` and cancelled at the end.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from troubleshoot.errors import TroubleshootError

GRACE = 5.0  # seconds a terminated step gets before it is killed
# What may reach Slurm's commands from the command line or from Slurm's own answers: never
# something that starts with '-' (an option), never spaces or shell or scontrol syntax.
_HOSTLIST = re.compile(r"[A-Za-z0-9][A-Za-z0-9._,\[\]-]{0,65535}")  # gpu[01-04,07],cpu1
_JOB = re.compile(r"[0-9]{1,20}(?:[_+][0-9]{1,10})?")  # 4242, an array task 4242_7, a het job 4242+1
_PARTITION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}(?:,[A-Za-z0-9][A-Za-z0-9._-]{0,127}){0,63}")
# `python -m` would put the working folder (on a node: the caller's, over a shared file system)
# first on sys.path, where a json.py or runpy.py would run; this drops it before any import.
BOOTSTRAP = ("import sys; sys.path[:] = [p for p in sys.path if p]; import runpy; "
             "runpy.run_module('troubleshoot', run_name='__main__', alter_sys=True)")


@dataclass
class NodeResult:
    node: str
    status: str  # "ok", "timeout", "failed"
    seconds: float
    path: str | None = None
    error: str | None = None

    def as_dict(self) -> dict:
        return {"node": self.node, "status": self.status, "seconds": round(self.seconds, 2),
                "path": self.path, "error": self.error}


@dataclass
class Selection:
    nodes: int | None = None
    nodelist: str | None = None
    partition: str | None = None
    job: str | None = None

    def check(self) -> None:
        """Refuse a node list, partition or job id that Slurm's commands could read as options."""
        for what, value, form in (("node list", self.nodelist, _HOSTLIST), ("partition", self.partition, _PARTITION),
                                  ("job id", self.job, _JOB)):
            if value is not None and not form.fullmatch(value):
                raise TroubleshootError(f"{value[:80]!r} is not a valid {what}")


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise TroubleshootError(f"{name} not found: `fleet probe --slurm` needs Slurm's client commands on PATH")
    return path


def _run(cmd: Sequence[str], timeout: float = 30) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise TroubleshootError(f"{Path(cmd[0]).name} did not answer within {timeout:g} s") from None
    except OSError as exc:
        raise TroubleshootError(f"cannot run {cmd[0]}: {exc.strerror or exc}") from None


def hostnames(nodelist: str) -> list[str]:
    """node[1-3],gpu07 -> [node1, node2, node3, gpu07], as Slurm expands it. The names are
    Slurm's answer: check them (valid_node_name) before they go into another command."""
    if not _HOSTLIST.fullmatch(nodelist):
        raise TroubleshootError(f"{nodelist[:80]!r} is not a valid node list")
    p = _run([_tool("scontrol"), "show", "hostnames", nodelist])
    if p.returncode != 0:
        raise TroubleshootError(f"scontrol cannot expand node list {nodelist!r}: {_last(p.stderr)}")
    return [n for n in p.stdout.split() if n]


def job_nodes(job: str) -> list[str]:
    p = _run([_tool("squeue"), "-h", f"--jobs={job}", "-o", "%N"])
    nodelist = p.stdout.strip()
    if p.returncode != 0 or not nodelist:
        raise TroubleshootError(f"job {job} is not running (squeue: {_last(p.stderr) or 'no nodes'})")
    return hostnames(nodelist)


def allocate(sel: Selection, wait: float = 60) -> str:
    """A short allocation of one task per node; its job id."""
    cmd = [_tool("salloc"), "--no-shell", "--ntasks-per-node=1", "--job-name=troubleshoot-probe",
           f"--immediate={max(1, int(wait))}"]
    if sel.nodelist:
        cmd += [f"--nodelist={sel.nodelist}", "-N", str(len(hostnames(sel.nodelist)))]
    elif sel.nodes:
        cmd += ["-N", str(sel.nodes)]
    if sel.partition:
        cmd += [f"--partition={sel.partition}"]
        if not (sel.nodes or sel.nodelist):
            names = _idle_nodes(sel.partition)
            cmd += [f"--nodelist={','.join(names)}", "-N", str(len(names))]
    p = _run(cmd, timeout=wait + 30)
    m = re.search(r"Granted job allocation (\d+)", p.stderr)
    if p.returncode != 0 or m is None:
        raise TroubleshootError(f"salloc failed: {_last(p.stderr) or f'exit {p.returncode}'}")
    return m.group(1)


def _idle_nodes(partition: str) -> list[str]:
    from troubleshoot.schemas.nodenames import valid_node_name

    up = _run([_tool("sinfo"), "-h", f"--partition={partition}", "-t", "idle,mixed", "-o", "%N"]).stdout.split()
    names = [n for part in up if _HOSTLIST.fullmatch(part) for n in hostnames(part) if valid_node_name(n)]
    if not names:
        raise TroubleshootError(f"partition {partition} has no idle or mixed nodes")
    return names


def _last(text: str) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def probe_command(python: str | None = None) -> list[str]:
    """What each node runs: this same troubleshoot (a shared install, as on a cluster), as
    `python -m troubleshoot probe --format json` would, without the working folder on sys.path."""
    return [python or sys.executable, "-c", BOOTSTRAP, "probe", "--format", "json"]


def probe_slurm(out_dir: Path, sel: Selection, timeout: float = 60, command: Sequence[str] | None = None,
                on_result: Callable[[NodeResult], None] | None = None) -> list[NodeResult]:
    """One snapshot per node of the selection, written to out_dir/<node>.json."""
    sel.check()
    _tool("srun")
    out_dir.mkdir(parents=True, exist_ok=True)
    own = None
    job = sel.job
    if job is None and not (sel.nodes or sel.nodelist or sel.partition):
        job = os.environ.get("SLURM_JOB_ID")
        if job is None:
            raise TroubleshootError("say which nodes: --nodes N, --nodelist LIST, --partition P or --job JOBID "
                                    "(or run inside an allocation)")
        Selection(job=job).check()
    try:
        if job is None:
            job = own = allocate(sel)
        nodes = job_nodes(job)
        results: list[NodeResult] = []
        lock = threading.Lock()

        def one(node: str) -> None:
            r = _probe_node(job, node, out_dir, timeout, list(command or probe_command()))
            with lock:
                results.append(r)
            if on_result:
                on_result(r)

        threads = [threading.Thread(target=one, args=(n,), daemon=True) for n in nodes]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return sorted(results, key=lambda r: r.node)
    finally:
        if own is not None:
            subprocess.run([shutil.which("scancel") or "scancel", own], capture_output=True, timeout=30)


def _probe_node(job: str, node: str, out_dir: Path, timeout: float, command: list[str]) -> NodeResult:
    from troubleshoot import snapshot
    from troubleshoot.schemas.nodenames import valid_node_name

    if not valid_node_name(node):
        return NodeResult(node, "failed", 0.0, error=f"not a valid node name: {node[:80]!r}; not probed")
    started = time.monotonic()
    # `--name=value` and `--`: nothing of the node's name or the command can be read as srun's option.
    cmd = [shutil.which("srun") or "srun", f"--jobid={job}", f"--nodelist={node}", "-N1", "-n1", "--overlap", "-Q",
           "--export=ALL", "--", *command]
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    except OSError as exc:
        return NodeResult(node, "failed", 0.0, error=f"cannot run srun: {exc.strerror or exc}")
    output = _output(proc, timeout, snapshot.MAX_SNAPSHOT_BYTES + 1)
    if output is None:
        _stop(proc)
        return NodeResult(node, "timeout", time.monotonic() - started,
                          error=f"no snapshot within {timeout:g} s; its job step was terminated")
    out, err = output
    seconds = time.monotonic() - started
    if proc.returncode != 0:
        return NodeResult(node, "failed", seconds, error=_last(err.decode("utf-8", "replace")) or f"exit {proc.returncode}")
    label = f"snapshot of {node}"
    try:
        if len(out) > snapshot.MAX_SNAPSHOT_BYTES:
            raise TroubleshootError(f"{label}: larger than {snapshot.MAX_SNAPSHOT_BYTES >> 20} MiB")
        facts = snapshot.check(snapshot.parse(out, label), label).facts
    except TroubleshootError as exc:
        return NodeResult(node, "failed", seconds, error=f"not a snapshot: {str(exc)[:200]}")
    path = out_dir / f"{node}.json"  # a valid node name is a safe file name as it is
    snapshot.save(facts, path)
    return NodeResult(node, "ok", seconds, path=str(path))


STDERR_TAIL = 64 << 10


def _output(proc: subprocess.Popen, timeout: float, most: int) -> tuple[bytes, bytes] | None:
    """The step's stdout (its first `most` bytes) and the end of its stderr, or None when it ran
    past the deadline. The rest is read and dropped: a node that prints gigabytes costs no
    memory here, and never blocks on a full pipe."""
    got: dict[str, bytes] = {}
    readers = [threading.Thread(target=_read, args=(proc.stdout, most, False, got, "out"), daemon=True),
               threading.Thread(target=_read, args=(proc.stderr, STDERR_TAIL, True, got, "err"), daemon=True)]
    for r in readers:
        r.start()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    for r in readers:
        r.join(GRACE)
    return got.get("out", b""), got.get("err", b"")


def _read(stream, most: int, tail: bool, into: dict[str, bytes], key: str) -> None:
    kept = b""
    try:
        while chunk := stream.read1(1 << 16):
            kept = (kept + chunk)[-most:] if tail else kept + chunk[:max(0, most - len(kept))]
    except (OSError, ValueError):
        pass  # the pipe closed under us: what was read is the answer
    into[key] = kept


def _stop(proc: subprocess.Popen) -> None:
    """srun forwards SIGTERM to the step and ends it; kill it if it does not."""
    proc.terminate()
    try:
        proc.wait(timeout=GRACE)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
