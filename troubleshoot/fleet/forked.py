"""A fleet's snapshots read by forked processes beside this one: the list of files cut into
slices in name order, the first read here, each other by a forked child (scan.children) that
sends back what `nodes.read_nodes` made of it. This process joins the slices in order, so the
result is the one a single reader would have made; a child that fails leaves its slice to this
process. Each snapshot costs milliseconds of CPU (checking it, running the rules over it), so
where cores are free the reading is shared between them.

A child has this process's rule set (fork), so only the results travel: a diagnosis names its
rule by its place in the rule set, never as a pickled copy of the rule.
"""

from __future__ import annotations

import functools
import io
import os
import pickle
from collections.abc import Callable, Sequence
from pathlib import Path

from troubleshoot.fleet.nodes import NodeRead, read_nodes
from troubleshoot.model import Rule

# Processes reading at once, this one included. A cap: each child holds its own copy of the pages
# of the rules it touches, and this process joins, compares and renders alone whatever their number.
MAX_JOBS = 8
# Snapshots per process at least: 250 take about half a second of CPU, far more than a fork and
# its report.
MIN_PER_JOB = 250
BATCH = 64  # nodes per message of a child: a few dozen kB, so no pipe waits long on this process


def default_jobs() -> int:
    """One process per core this process may run on, MAX_JOBS at most."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_JOBS))


def jobs_for(nodes: int, jobs: int) -> int:
    """How many processes read `nodes` snapshots when `jobs` may: each gets MIN_PER_JOB at least."""
    return max(1, min(jobs, nodes // MIN_PER_JOB))


def read(files: Sequence[Path], ruleset, keep_facts: bool, jobs: int) -> NodeRead:
    """`nodes.read_nodes(files, ...)` by up to `jobs` processes; all in this one where forking is
    not safe (children.forkable: another thread runs) or not worth it."""
    from troubleshoot.scan import children as procs

    parts = jobs_for(len(files), jobs)
    if parts < 2 or not procs.forkable():
        return read_nodes(files, ruleset, keep_facts)
    bounds = [len(files) * k // parts for k in range(parts + 1)]
    slices = [files[bounds[k]:bounds[k + 1]] for k in range(parts)]
    helpers: list = []
    try:
        for part in slices[1:]:
            try:
                procs.start(functools.partial(_child, files=part, ruleset=ruleset, keep_facts=keep_facts), helpers)
            except OSError:  # no more processes or memory for one: its slice is read here
                break

        def between() -> None:
            for c in helpers:
                c.drain()

        out = read_nodes(slices[0], ruleset, keep_facts, between)
        for k, part in enumerate(slices[1:]):
            got = _collect(helpers[k], len(part), ruleset.rules) if k < len(helpers) else None
            out.extend(got if got is not None else read_nodes(part, ruleset, keep_facts))
    finally:
        for c in helpers:
            c.kill()
    return out


def _child(send: Callable[[object], int], files: Sequence[Path], ruleset, keep_facts: bool) -> None:  # pragma: no cover - runs in a forked child
    """A slice read in batches, each sent as it is done; then how many nodes were read, which
    tells the parent the slice is complete."""
    places = {id(r): i for i, r in enumerate(ruleset.rules)}
    for at in range(0, len(files), BATCH):
        send(_dumps(read_nodes(files[at:at + BATCH], ruleset, keep_facts), places))
    send(("read", len(files)))


def _collect(child, expected: int, rules: Sequence[Rule]) -> NodeRead | None:
    """A child's slice once it has ended; None when it failed or stopped short."""
    from troubleshoot.scan import children as procs

    got = child.messages()
    out = NodeRead()
    try:
        if not got or procs.load(got[-1]) != ("read", expected):
            return None
        for message in got[:-1]:
            out.extend(_loads(procs.load(message), rules))
    except Exception:  # noqa: BLE001 - pickle's errors vary; a damaged report is a child that failed
        return None
    return out


class _Pickler(pickle.Pickler):
    """Pickles a rule of the rule set as its place in it."""

    def __init__(self, file: io.BytesIO, places: dict[int, int]):
        super().__init__(file, pickle.HIGHEST_PROTOCOL)
        self.places = places

    def persistent_id(self, obj: object) -> int | None:
        return self.places.get(id(obj)) if isinstance(obj, Rule) else None


class _Unpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, rules: Sequence[Rule]):
        super().__init__(file)
        self.rules = rules

    def persistent_load(self, pid: int) -> Rule:
        return self.rules[pid]


def _dumps(read: NodeRead, places: dict[int, int]) -> bytes:
    buf = io.BytesIO()
    _Pickler(buf, places).dump(read)
    return buf.getvalue()


def _loads(data: bytes, rules: Sequence[Rule]) -> NodeRead:
    return _Unpickler(io.BytesIO(data), rules).load()
