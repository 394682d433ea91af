"""The snapshots of a fleet read one node at a time: each is loaded and checked, diagnosed
through the pipeline, the few values the comparison reads are kept (`compare.extract`), and the
snapshot is dropped before the next is read. Memory grows with the nodes' findings and
diagnoses, not with their snapshots (which are kept whole only when asked: the job's logs are
diagnosed with their node's facts)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from troubleshoot.errors import TroubleshootError
from troubleshoot.fleet.compare import NodeFacts, extract
from troubleshoot.model import Diagnosis
from troubleshoot.sources import FactsSource, Sources

# How many nodes this process reads between two looks at its helpers' pipes (forked.py).
DRAIN_EVERY = 16


@dataclass
class NodeRead:
    """What reading some snapshots leaves, node by node in the order they were read."""

    compared: dict[str, NodeFacts] = field(default_factory=dict)
    diagnosed: dict[str, list[Diagnosis]] = field(default_factory=dict)
    loaded: list[str] = field(default_factory=list)  # every node whose snapshot could be read
    facts: dict[str, dict] = field(default_factory=dict)  # whole snapshots: only when asked to keep them
    warnings: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (node, why its facts cannot be diagnosed)

    def extend(self, later: NodeRead) -> None:
        """The nodes of `later` after these, as if one reader had read both in turn."""
        self.compared.update(later.compared)
        self.diagnosed.update(later.diagnosed)
        self.loaded += later.loaded
        self.facts.update(later.facts)
        self.warnings += later.warnings
        self.failed += later.failed


def load(path: Path, warnings: list[str]):
    """One snapshot (snapshot.Loaded), or None with the reason in `warnings`."""
    from troubleshoot import snapshot

    try:
        return snapshot.load(path)
    except TroubleshootError as exc:
        warnings.append(f"{exc}; node {path.stem} left out")
    except Exception as exc:  # noqa: BLE001 - one node's file never stops the report on the others
        warnings.append(f"{path}: unreadable ({type(exc).__name__}: {str(exc)[:200]}); node {path.stem} left out")
    return None


def read_nodes(files: Sequence[Path], ruleset, keep_facts: bool = False,
               between: Callable[[], None] | None = None) -> NodeRead:
    """Each snapshot in turn: loaded, diagnosed, its comparison values extracted, dropped (kept
    whole with `keep_facts`). `between` is called every DRAIN_EVERY nodes."""
    read = NodeRead()
    for i, path in enumerate(files):
        if between is not None and i % DRAIN_EVERY == 0:
            between()
        loaded = load(path, read.warnings)
        if loaded is None:
            continue
        node = path.stem
        read.warnings += loaded.warnings
        read.loaded.append(node)
        found = node_diagnoses(node, loaded.facts, ruleset, read.failed)
        if found is None:
            continue  # facts that cannot be diagnosed are not compared either
        read.diagnosed[node] = found
        read.compared[node] = extract(loaded.facts)
        if keep_facts:
            read.facts[node] = loaded.facts
    return read


def node_diagnoses(node: str, facts: dict, ruleset, failed: list[tuple[str, str]]) -> list[Diagnosis] | None:
    """One node's diagnoses from its facts; None (and the reason in `failed`) when its facts
    cannot be diagnosed: that node is reported and left out, and the others go on."""
    from troubleshoot import pipeline

    try:
        return pipeline.diagnose_sources(Sources([], [FactsSource(facts, f"snapshot {node}", node)]), ruleset).diagnoses
    except Exception as exc:  # noqa: BLE001 - one node's facts never stop the report on the others
        failed.append((node, f"{type(exc).__name__}: {str(exc)[:200]}"))
        return None
