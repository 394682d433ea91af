"""`fleet diagnose DIR`: every node's snapshot (and the job's logs) through the one pipeline,
then the nodes compared. Builds sources and calls `pipeline.diagnose_sources`; no rules here."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Sequence

from troubleshoot.errors import TroubleshootError
from troubleshoot.fleet.compare import Finding, compare
from troubleshoot.model import Diagnosis
from troubleshoot.sources import FactsSource, LogSource, Sources, log_sources

MAX_NODES = 10_000


@dataclass
class FleetResult:
    nodes: list[str]
    findings: list[Finding]
    per_node: dict[str, list[Diagnosis]]  # each node's diagnoses, from its facts and its logs
    job: list[Diagnosis]  # the logs of all nodes read together, first failure first
    headline: str | None
    warnings: list[str] = field(default_factory=list)
    logs: int = 0

    def groups(self) -> list[tuple[str, str, list[str]]]:
        """(rule id, symptom, nodes) for each diagnosis, most nodes first: "3 nodes: docker-gpu-missing"."""
        seen: dict[str, tuple[str, list[str]]] = {}
        for node in self.nodes:
            for d in self.per_node.get(node, []):
                seen.setdefault(d.rule.id, (d.symptom, []))[1].append(node)
        return sorted(((r, s, ns) for r, (s, ns) in seen.items()), key=lambda g: (-len(g[2]), g[0]))


def load_snapshots(folder: Path) -> tuple[dict[str, dict], list[str]]:
    """<node>.json files of a folder (however they were collected): {node: facts}, warnings."""
    from troubleshoot import snapshot

    if not folder.is_dir():
        raise TroubleshootError(f"cannot read snapshots {folder}: not a folder")
    facts: dict[str, dict] = {}
    warnings: list[str] = []
    for path in sorted(folder.glob("*.json"))[:MAX_NODES]:
        if path.name.startswith(".") or path.name.endswith(".log.json"):
            continue  # a temporary file of an interrupted save; a `run --format json` report
        try:
            loaded = snapshot.load(path)
        except TroubleshootError as exc:
            warnings.append(f"{exc}; node {path.stem} left out")
            continue
        except Exception as exc:  # one node's file never stops the report on the others
            warnings.append(f"{path}: unreadable ({type(exc).__name__}: {str(exc)[:200]}); node {path.stem} left out")
            continue
        warnings += loaded.warnings
        facts[path.stem] = loaded.facts
    return facts, warnings


def node_logs(folder: Path, nodes: Sequence[str], extra: Sequence[str]) -> list[LogSource]:
    """Logs in the folder (and --log): a file in a node's subfolder belongs to that node."""
    logs = []
    if any(p.is_file() and not p.name.endswith(".json") for p in folder.rglob("*")):
        for src in log_sources([str(folder)]):
            rel = Path(src.path).relative_to(folder).parts
            if src.node is None and len(rel) > 1 and rel[0] in nodes:
                src = replace(src, node=rel[0])
            logs.append(src)
    return logs + (log_sources(extra) if extra else [])


def diagnose_fleet(folder: Path, ruleset, extra_logs: Sequence[str] = ()) -> FleetResult:
    from troubleshoot import pipeline

    facts, warnings = load_snapshots(folder)
    logs = node_logs(folder, list(facts), extra_logs)
    if not facts and not logs:
        raise TroubleshootError(f"no snapshots (<node>.json) or logs in {folder}")
    log_nodes = {s.node for s in logs if s.node}
    per_node: dict[str, list[Diagnosis]] = {}
    for node in sorted(set(facts) | log_nodes):
        found = _node_diagnoses(node, facts, ruleset, warnings)
        if node in facts or node in log_nodes:  # facts that could not be diagnosed leave the node out
            per_node[node] = found
    nodes = list(per_node)
    job: list[Diagnosis] = []
    headline = None
    if logs:
        result = pipeline.diagnose_sources(
            Sources(logs, [FactsSource(f, f"snapshot {n}", n) for n, f in facts.items()]), ruleset)
        job, headline = result.diagnoses, result.headline
        for d in job:  # a log diagnosis joins the list of every node it was seen on
            for node in d.nodes:
                if d.count and node in per_node:
                    per_node[node] = _ranked_in(per_node[node], d)
    return FleetResult(nodes, compare(facts), per_node, job, headline, warnings, len(logs))


def _node_diagnoses(node: str, facts: dict[str, dict], ruleset, warnings: list[str]) -> list[Diagnosis]:
    """One node's diagnoses from its facts; a node whose facts cannot be diagnosed is reported
    and left out of the comparison, and the others go on."""
    from troubleshoot import pipeline

    if node not in facts:
        return []
    try:
        return pipeline.diagnose_sources(Sources([], [FactsSource(facts[node], f"snapshot {node}", node)]),
                                         ruleset).diagnoses
    except Exception as exc:
        warnings.append(f"snapshot {node}: cannot be diagnosed ({type(exc).__name__}: {str(exc)[:200]}); left out")
        del facts[node]
        return []


def _ranked_in(current: list[Diagnosis], d: Diagnosis) -> list[Diagnosis]:
    """The job's ranking decides: its log diagnoses go first, in the job's order."""
    logged = [x for x in current if x.count]
    return logged + [d] + [x for x in current if not x.count and x.rule.id != d.rule.id]
