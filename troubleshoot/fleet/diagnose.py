"""`fleet diagnose DIR`: every node's snapshot (and the job's logs) through the one pipeline,
then the nodes compared. Builds sources and calls `pipeline.diagnose_sources`; no rules here.

Snapshots are read one at a time (nodes.py), by several processes at once (forked.py): each is
checked, diagnosed, and the few values the comparison reads are kept; the snapshot itself is
dropped before the next is read, so memory grows with the nodes' findings, not with their
snapshots. Only when there are logs are the snapshots kept, since the job's diagnosis reads each
log with its node's facts. A file in the folder that is neither a snapshot nor a text log (a
README beside the snapshots, a binary) is left out and named in a warning.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from troubleshoot.errors import TroubleshootError
from troubleshoot.fleet import forked
from troubleshoot.fleet.compare import Finding, compare_nodes
from troubleshoot.model import Diagnosis
from troubleshoot.sources import FactsSource, FoundLogs, LogSource, Skipped, Sources, find_logs, folder_logs, skipped_note


@dataclass
class FleetResult:
    nodes: list[str]
    findings: list[Finding]
    per_node: dict[str, list[Diagnosis]]  # each node's diagnoses, from its facts and its logs
    job: list[Diagnosis]  # the logs of all nodes read together, first failure first
    headline: str | None
    warnings: list[str] = field(default_factory=list)
    logs: int = 0
    left_out: int = 0  # snapshots not read: past --max-nodes
    skipped: list[Skipped] = field(default_factory=list)  # files neither snapshots nor text logs

    def groups(self) -> list[tuple[str, str, list[str]]]:
        """(rule id, symptom, nodes) for each diagnosis, most nodes first: "3 nodes: docker-gpu-missing"."""
        seen: dict[str, tuple[str, list[str]]] = {}
        for node in self.nodes:
            for d in self.per_node.get(node, []):
                seen.setdefault(d.rule.id, (d.symptom, []))[1].append(node)
        return sorted(((r, s, ns) for r, (s, ns) in seen.items()), key=lambda g: (-len(g[2]), g[0]))

    def findings_by_node(self) -> dict[str, list[Finding]]:
        """Each node's findings, in the order of `findings`: one pass, for views that list them by node."""
        out: dict[str, list[Finding]] = {}
        for f in self.findings:
            out.setdefault(f.node, []).append(f)
        return out


def snapshot_files(folder: Path) -> list[Path]:
    """The <node>.json files of a folder, in name order."""
    if not folder.is_dir():
        raise TroubleshootError(f"cannot read snapshots {folder}: not a folder")
    try:
        with os.scandir(folder) as entries:
            # not a dot file (a temporary file of an interrupted save) nor a `run --format json` report
            names = sorted(e.name for e in entries if e.name.endswith(".json") and not e.name.startswith(".")
                           and not e.name.endswith(".log.json"))
    except OSError as exc:
        raise TroubleshootError(f"cannot read snapshots {folder}: {exc.strerror or exc}") from None
    return [folder / n for n in names]


def node_logs(folder: Path, nodes: Sequence[str], extra: Sequence[str], found: FoundLogs) -> FoundLogs:
    """Logs in the folder (`found`, listed by the caller) and --log: a file in a node's
    subfolder belongs to that node; the files that are no text logs, left out."""
    known = set(nodes)
    logs = []
    for src in found.logs:
        rel = Path(src.path).relative_to(folder).parts
        if src.node is None and len(rel) > 1 and rel[0] in known:
            src = replace(src, node=rel[0])
        logs.append(src)
    more = find_logs(extra) if extra else FoundLogs()
    return FoundLogs(logs + more.logs, found.skipped + more.skipped)


def diagnose_fleet(folder: Path, ruleset, extra_logs: Sequence[str] = (), max_nodes: int | None = None,
                   jobs: int = 1) -> FleetResult:
    """The fleet's report: every node diagnosed and compared, the job's logs read together.
    `max_nodes`: read at most this many snapshots (in name order); the others are counted in
    `left_out` and named in a warning. `jobs`: processes that read the snapshots (forked.py)."""
    files = snapshot_files(folder)
    rest = files[max_nodes:] if max_nodes is not None else []
    files = files[:len(files) - len(rest)]
    in_folder = folder_logs(folder)
    read = forked.read(files, ruleset, bool(in_folder.logs) or bool(extra_logs), jobs)
    found = node_logs(folder, read.loaded, extra_logs, in_folder)
    logs = found.logs
    if not read.loaded and not logs:
        raise TroubleshootError(f"no snapshots (<node>.json) or logs in {folder}"
                                + (f"; {_skipped_note(found.skipped)}" if found.skipped else ""))
    warnings = [_left_out(rest, max_nodes)] if rest else []
    warnings += read.warnings + [f"snapshot {n}: cannot be diagnosed ({why}); left out" for n, why in sorted(read.failed)]
    log_nodes = {s.node for s in logs if s.node}
    per_node = {node: read.diagnosed.get(node, []) for node in sorted(set(read.diagnosed) | log_nodes)}
    job, headline, skipped = _job(logs, read.facts, ruleset, per_node, found.skipped)
    if skipped:
        warnings.append(_skipped_note(skipped))
    return FleetResult(list(per_node), compare_nodes(read.compared), per_node, job, headline, warnings, len(logs),
                       len(rest), skipped)


def _skipped_note(skipped: list[Skipped]) -> str:
    return skipped_note(skipped, "a snapshot or a text log", "snapshots or text logs")


def _left_out(rest: list[Path], max_nodes: int | None) -> str:
    return (f"--max-nodes {max_nodes}: {len(rest)} more snapshot{'s' if len(rest) != 1 else ''} left out "
            f"({rest[0].name} and after it, in name order)")


def _job(logs: list[LogSource], facts: dict[str, dict], ruleset, per_node: dict[str, list[Diagnosis]],
         skipped: list[Skipped]) -> tuple[list[Diagnosis], str | None, list[Skipped]]:
    """The job's logs diagnosed together with every node's facts; each log diagnosis also joins
    the list of every node it was seen on. `skipped`: the files left out so far, and with them
    those the reading leaves out (a FIFO of no text)."""
    from troubleshoot import pipeline

    if not logs:
        return [], None, skipped
    result = pipeline.diagnose_sources(
        Sources(logs, [FactsSource(f, f"snapshot {n}", n) for n, f in facts.items()], skipped), ruleset)
    for d in result.diagnoses:
        for node in d.nodes:
            if d.count and node in per_node:
                per_node[node] = _ranked_in(per_node[node], d)
    return result.diagnoses, result.headline, result.skipped


def _ranked_in(current: list[Diagnosis], d: Diagnosis) -> list[Diagnosis]:
    """The job's ranking decides: its log diagnoses go first, in the job's order."""
    logged = [x for x in current if x.count]
    return logged + [d] + [x for x in current if not x.count and x.rule.id != d.rule.id]
