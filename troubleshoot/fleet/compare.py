"""Nodes that should match, compared: drift (versions that differ) and outliers (one node's GPU,
kernel or limits worse than its peers'). Pure functions over snapshot facts.

What is compared lives in the two tables below; a finding names the node, what differs, its
value and what most nodes have. Where no value is the most frequent (two nodes that differ, or
as many nodes on each side), no node is singled out by the order of their names: each drifted
version's finding goes to every node and names each value with its nodes; a PCIe link or an
open-files limit is held against the best of the most frequent values.

The comparison reads a few values of each snapshot (`extract`: a `NodeFacts`), so a fleet is
compared without holding its snapshots. Each check is one pass over the nodes per fact: a
Counter for the majority, or one sort for "the median of the other nodes" of every node, so
the comparison of ten thousand nodes costs about ten times that of a thousand.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from troubleshoot.console import plural

# Versions that must agree across the nodes of one job: (label, dotted fact path).
DRIFT = (
    ("driver", "nvml.driver_version"),
    ("CUDA driver version", "nvml.cuda_driver_version"),
    ("kernel module", "kernel.nvidia_module_version"),
    ("kernel", "host.kernel_release"),
    ("torch", "frameworks.torch.version"),
    ("torch CUDA", "frameworks.torch.cuda"),
    ("torch cuDNN", "frameworks.torch.cudnn"),
    ("NCCL", "frameworks.torch.nccl"),
    ("TensorFlow", "frameworks.tensorflow.version"),
    ("JAX", "frameworks.jax.version"),
    ("nvcc", "cuda.nvcc_version"),
    ("Fabric Manager", "fabric_manager.version"),
    ("nvidia-container-toolkit", "docker.nvidia_ctk_version"),
    ("GPU model", "nvml.gpus[].name"),
    ("GPU count", "nvml.gpus#"),
)
# Per-GPU counters where more is worse.
GPU_COUNTERS = (
    ("uncorrectable ECC errors", "ecc_uncorrected_volatile"),
    ("uncorrectable remapped rows", "remapped_rows_uncorrectable"),
)
# Throttle reasons that are not a problem on their own.
BENIGN_THROTTLE = frozenset({"gpu_idle", "applications_clocks_setting", "none"})
# Where versions differ with no majority: the values named (most frequent first), and the nodes
# named for each; the others are counted.
SPLIT_VALUES = 4
SPLIT_NODES = 3


@dataclass(frozen=True)
class Finding:
    node: str
    kind: str  # "drift" or "outlier"
    what: str  # a short label: "driver", "PCIe link", "Xid events"
    value: Any
    expected: Any  # what most nodes have (None: a version with no majority)
    text: str  # one line for people

    def as_dict(self) -> dict:
        return {"node": self.node, "kind": self.kind, "what": self.what, "value": self.value,
                "expected": self.expected, "text": self.text}


def get(facts: Mapping, path: str) -> Any:
    """A dotted path; `a.b[].c` lists c of every item, `a.b#` counts the items."""
    count = path.endswith("#")
    path = path.rstrip("#")
    cur: Any = facts
    parts = path.split(".")
    for i, part in enumerate(parts):
        many = part.endswith("[]")
        key = part[:-2] if many else part
        if not isinstance(cur, Mapping) or cur.get(key) is None:
            return None
        cur = cur[key]
        if many:
            if not isinstance(cur, list):
                return None
            rest = ".".join(parts[i + 1:])
            values = [get(x, rest) if rest else x for x in cur if isinstance(x, Mapping)]
            return tuple(v for v in values if v is not None) or None
    if count:
        return len(cur) if isinstance(cur, list) else None
    return cur


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What the comparison reads of one node's snapshot: a few values, not the snapshot."""

    versions: tuple[Any, ...]  # one per DRIFT entry, None where unknown
    libraries: Mapping[str, str]  # CUDA library -> version
    links: Mapping[Any, tuple[int, int, Any]]  # GPU index -> (PCIe width, generation, maximum width)
    counters: tuple[int, ...]  # a total per GPU_COUNTERS, then the GPUs with pending or failed remapping
    xid_events: int
    xid_codes: tuple[Any, ...]
    throttle: frozenset  # throttle reasons of any GPU, the benign ones left out
    shm: int | float | None  # /dev/shm MiB
    nouveau: bool
    nofile: int | None  # soft open-files limit


def extract(facts: Mapping) -> NodeFacts:
    """The values of one node's facts that `compare_nodes` reads."""
    gpus = _gpus(facts)
    events = [e for e in (get(facts, "kernel.xid_events") or []) if isinstance(e, Mapping)]
    shm, nofile = get(facts, "io.shm_size_mib"), get(facts, "io.nofile_soft")
    return NodeFacts(
        versions=tuple(_scalar(get(facts, path)) for _, path in DRIFT),
        libraries=_libraries(facts),
        links=_links(gpus),
        counters=_counter_totals(gpus),
        xid_events=len(events),
        xid_codes=tuple(e.get("code") for e in events if e.get("code") is not None),
        throttle=frozenset(r for g in gpus for r in (g.get("throttle_reasons") or []) if r not in BENIGN_THROTTLE),
        shm=shm if isinstance(shm, (int, float)) else None,
        nouveau=get(facts, "kernel.modules.nouveau") is True,
        nofile=nofile if isinstance(nofile, int) else None,
    )


def compare(nodes: Mapping[str, Mapping]) -> list[Finding]:
    """Drift and outliers across nodes (nothing with fewer than two nodes)."""
    return compare_nodes({node: extract(facts) for node, facts in nodes.items()})


def compare_nodes(nodes: Mapping[str, NodeFacts]) -> list[Finding]:
    """`compare` over the values `extract` read of each node."""
    if len(nodes) < 2:
        return []
    out: list[Finding] = []
    for k, (label, _) in enumerate(DRIFT):
        out += _drift(((n, f.versions[k]) for n, f in nodes.items()), label)
    for lib in sorted({lib for f in nodes.values() for lib in f.libraries}):
        out += _drift(((n, f.libraries.get(lib)) for n, f in nodes.items()), lib)
    for check in (_pcie, _counters, _xids, _throttle, _shm, _nouveau, _nofile):
        out += check(nodes)
    return sorted(out, key=lambda x: (x.node, x.kind, x.what))


def _scalar(v):
    return ", ".join(map(str, v)) if isinstance(v, tuple) else v


def _libraries(facts: Mapping) -> dict[str, str]:
    libs = get(facts, "cuda.libraries") or []
    return {x["name"]: str(x["version"]) for x in libs if isinstance(x, Mapping) and x.get("name") and x.get("version")}


def _gpus(facts: Mapping) -> list[Mapping]:
    gpus = get(facts, "nvml.gpus") or []
    return [g for g in gpus if isinstance(g, Mapping)]


def _links(gpus: list[Mapping]) -> dict[Any, tuple[int, int, Any]]:
    links = {}
    for i, g in enumerate(gpus):
        w, wmax, gen = g.get("pcie_width_current"), g.get("pcie_width_max"), g.get("pcie_gen_current")
        if isinstance(w, int) and isinstance(gen, int):
            links[g.get("index", i)] = (w, gen, wmax)
    return links


def _counter_totals(gpus: list[Mapping]) -> tuple[int, ...]:
    totals = [sum(g.get(key) or 0 for g in gpus if isinstance(g.get(key) or 0, int)) for _, key in GPU_COUNTERS]
    pending = sum(1 for g in gpus if g.get("remapped_rows_pending") or g.get("remapped_rows_failure"))
    return (*totals, pending)


def _majority(values: Iterable[Any]) -> tuple[Any, int, bool]:
    """The most frequent value, how often it occurs, and whether another occurs as often (then
    the value is the greatest of those: never the first seen, which only the names decide)."""
    counts = Counter(values)
    (value, n), *second = counts.most_common(2)
    if not second or second[0][1] < n:
        return value, n, False
    return max(v for v, k in counts.items() if k == n), n, True


def _drift(read: Iterable[tuple[str, Any]], label: str) -> list[Finding]:
    values = [(node, v) for node, v in read if v is not None]
    if len({str(v) for _, v in values}) < 2:
        return []
    counts = Counter(v for _, v in values)
    (common, n), *second = counts.most_common(2)
    if second and second[0][1] == n:  # no majority: no node is the drifted one
        text = f"nodes differ, no majority: {_split(values, counts)}"
        return [Finding(node, "drift", label, v, None, f"{label} {v} ({text})") for node, v in values]
    return [Finding(node, "drift", label, v, common, f"{label} {v} (others: {common} on {plural(n, 'node')})")
            for node, v in values if v != common]


def _split(values: list[tuple[str, Any]], counts: Counter) -> str:
    """Each value and its nodes, most frequent first: '535 on gpu-01; 555 on gpu-02'. One pass;
    a few nodes are named per value, the others counted."""
    shown = [v for v, _ in counts.most_common(SPLIT_VALUES)]
    named: dict[Any, list[str]] = {v: [] for v in shown}
    for node, v in values:
        names = named.get(v)
        if names is not None and len(names) < SPLIT_NODES:
            names.append(node)
    parts = []
    for v in shown:
        names, k = named[v], counts[v]
        more = f" and {k - len(names)} more" if k > len(names) else ""
        parts.append(f"{v} on {', '.join(names)}{more}")
    if len(counts) > len(shown):
        parts.append(f"{plural(len(counts) - len(shown), 'other value')}")
    return "; ".join(parts)


def _pcie(nodes: Mapping[str, NodeFacts]) -> list[Finding]:
    """A GPU whose link runs narrower or slower than the same GPU on most nodes, or narrower
    than its own maximum (an idle GPU may lower its generation, never its width)."""
    out = []
    by_gpu: dict[Any, dict[str, tuple]] = {}
    for node, f in nodes.items():
        for idx, link in f.links.items():
            by_gpu.setdefault(idx, {})[node] = link
    for idx, per_node in sorted(by_gpu.items()):
        common, _, tied = _majority((w, gen) for w, gen, _ in per_node.values())
        link = f"gen{common[1]} x{common[0]}"
        peers = f"no majority; as many nodes at {link}" if tied else f"most nodes: {link}"
        for node, (w, gen, wmax) in per_node.items():
            narrow = isinstance(wmax, int) and w < wmax
            if ((w, gen) != common and (w < common[0] or gen < common[1])) or narrow:
                of = f" of x{wmax}" if isinstance(wmax, int) else ""
                out.append(Finding(node, "outlier", "PCIe link", f"GPU {idx}: gen{gen} x{w}{of}", link,
                                   f"GPU {idx} PCIe link at gen{gen} x{w}{of} ({peers})"))
    return out


def medians_of_others(values: Sequence[Any]) -> list[Any]:
    """For each value, statistics.median of all the other values (0 where there is none),
    from one sort: the others of value i are the sorted values without i's own place, so
    their median is one or two reads either side of that place."""
    n = len(values)
    if n < 2:
        return [0] * n
    order = sorted(range(n), key=values.__getitem__)  # stable: as sorted() orders the others
    ranked = [values[i] for i in order]
    place = [0] * n
    for k, i in enumerate(order):
        place[i] = k
    half, odd = divmod(n - 1, 2)
    out = []
    for p in place:
        hi = ranked[half] if half < p else ranked[half + 1]
        if odd:
            out.append(hi)
        else:
            lo = ranked[half - 1] if half - 1 < p else ranked[half]
            out.append((lo + hi) / 2)
    return out


def _more_than_peers(totals: Sequence[tuple[str, int]], label: str) -> list[Finding]:
    typical = medians_of_others([v for _, v in totals])
    return [Finding(node, "outlier", label, v, t, f"{v} {label} (others: {t:g})")
            for (node, v), t in zip(totals, typical) if v > t]


def _counters(nodes: Mapping[str, NodeFacts]) -> list[Finding]:
    out = []
    labels = [label for label, _ in GPU_COUNTERS] + ["GPUs with pending or failed row remapping"]
    for k, label in enumerate(labels):
        out += _more_than_peers([(n, f.counters[k]) for n, f in nodes.items()], label)
    return out


def _xids(nodes: Mapping[str, NodeFacts]) -> list[Finding]:
    out = []
    for finding in _more_than_peers([(n, f.xid_events) for n, f in nodes.items()], "Xid events"):
        codes = sorted(set(nodes[finding.node].xid_codes))
        text = f"{finding.value} Xid event{'s' if finding.value != 1 else ''} (Xid {', '.join(map(str, codes))}; others: {finding.expected:g})"
        out.append(Finding(finding.node, "outlier", "Xid events", codes, finding.expected, text))
    return out


def _throttle(nodes: Mapping[str, NodeFacts]) -> list[Finding]:
    have = Counter(r for f in nodes.values() for r in f.throttle)
    total = len(nodes)
    out = []
    for node, f in nodes.items():
        for r in sorted(f.throttle):
            if have[r] * 2 < total + (total == 2):  # a minority (on two nodes: only one has it)
                out.append(Finding(node, "outlier", "throttle reason", r, None,
                                   f"GPU clocks throttled by {r} (on {have[r]} of {total} nodes)"))
    return out


def _shm(nodes: Mapping[str, NodeFacts]) -> list[Finding]:
    sizes = [(n, f.shm) for n, f in nodes.items() if f.shm is not None]
    if len(sizes) < 2:
        return []
    return [Finding(node, "outlier", "/dev/shm", v, m, f"/dev/shm {v:g} MiB (others: {m:g} MiB)")
            for (node, v), m in zip(sizes, medians_of_others([v for _, v in sizes])) if v < 0.5 * m]


def _nouveau(nodes: Mapping[str, NodeFacts]) -> list[Finding]:
    if sum(1 for f in nodes.values() if f.nouveau) * 2 >= len(nodes):
        return []
    return [Finding(n, "outlier", "nouveau", True, False, "nouveau module loaded (not on the others)")
            for n, f in nodes.items() if f.nouveau]


def _nofile(nodes: Mapping[str, NodeFacts]) -> list[Finding]:
    limits = [(n, f.nofile) for n, f in nodes.items() if f.nofile is not None]
    if len(limits) < 2:
        return []
    common, _, tied = _majority(v for _, v in limits)
    peers = f"no majority; as many nodes at {common}" if tied else f"most nodes: {common}"
    return [Finding(n, "outlier", "open files limit", v, common, f"open files limit {v} ({peers})")
            for n, v in limits if v < common]
