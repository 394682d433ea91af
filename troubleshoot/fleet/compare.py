"""Nodes that should match, compared: drift (versions that differ) and outliers (one node's GPU,
kernel or limits worse than its peers'). Pure functions over snapshot facts.

What is compared lives in the two tables below; a finding names the node, what differs, its
value and what most nodes have.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from statistics import median
from typing import Any, Callable, Mapping

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


@dataclass(frozen=True)
class Finding:
    node: str
    kind: str  # "drift" or "outlier"
    what: str  # a short label: "driver", "PCIe link", "Xid events"
    value: Any
    expected: Any  # what most nodes have
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


def compare(nodes: Mapping[str, Mapping]) -> list[Finding]:
    """Drift and outliers across nodes (nothing with fewer than two nodes)."""
    if len(nodes) < 2:
        return []
    out: list[Finding] = []
    for label, path in DRIFT:
        out += _drift(nodes, label, lambda f, p=path: _scalar(get(f, p)))
    libs = sorted({lib for f in nodes.values() for lib in _libraries(f)})
    for lib in libs:
        out += _drift(nodes, lib, lambda f, n=lib: _libraries(f).get(n))
    for check in (_pcie, _counters, _xids, _throttle, _shm, _nouveau, _nofile):
        out += check(nodes)
    return sorted(out, key=lambda x: (x.node, x.kind, x.what))


def _scalar(v):
    return ", ".join(map(str, v)) if isinstance(v, tuple) else v


def _libraries(facts: Mapping) -> dict[str, str]:
    libs = get(facts, "cuda.libraries") or []
    return {x["name"]: str(x["version"]) for x in libs if isinstance(x, Mapping) and x.get("name") and x.get("version")}


def _majority(values: Mapping[str, Any]) -> tuple[Any, int]:
    counts = Counter(v for v in values.values())
    (value, n), = counts.most_common(1)
    return value, n


def _drift(nodes: Mapping[str, Mapping], label: str, read: Callable[[Mapping], Any]) -> list[Finding]:
    values = {n: read(f) for n, f in nodes.items()}
    values = {n: v for n, v in values.items() if v is not None}
    if len(set(map(str, values.values()))) < 2:
        return []
    common, n = _majority(values)
    return [Finding(node, "drift", label, v, common, f"{label} {v} (others: {common} on {n} node{'s' if n != 1 else ''})")
            for node, v in values.items() if v != common]


def _gpus(facts: Mapping) -> list[Mapping]:
    gpus = get(facts, "nvml.gpus") or []
    return [g for g in gpus if isinstance(g, Mapping)]


def _pcie(nodes):
    """A GPU whose link runs narrower or slower than the same GPU on most nodes, or narrower
    than its own maximum (an idle GPU may lower its generation, never its width)."""
    out = []
    links: dict[str, dict[int, tuple]] = {}
    for node, f in nodes.items():
        for i, g in enumerate(_gpus(f)):
            w, wmax, gen = g.get("pcie_width_current"), g.get("pcie_width_max"), g.get("pcie_gen_current")
            if isinstance(w, int) and isinstance(gen, int):
                links.setdefault(node, {})[g.get("index", i)] = (w, gen, wmax)
    by_gpu: dict[int, dict[str, tuple]] = {}
    for node, gpus in links.items():
        for idx, link in gpus.items():
            by_gpu.setdefault(idx, {})[node] = link
    seen = set()
    for idx, per_node in sorted(by_gpu.items()):
        common, _ = _majority({n: (w, gen) for n, (w, gen, _) in per_node.items()})
        for node, (w, gen, wmax) in per_node.items():
            narrow = isinstance(wmax, int) and w < wmax
            if ((w, gen) != common and (w < common[0] or gen < common[1])) or narrow:
                of = f" of x{wmax}" if isinstance(wmax, int) else ""
                seen.add(node)
                out.append(Finding(node, "outlier", "PCIe link", f"GPU {idx}: gen{gen} x{w}{of}",
                                   f"gen{common[1]} x{common[0]}",
                                   f"GPU {idx} PCIe link at gen{gen} x{w}{of} (most nodes: gen{common[1]} x{common[0]})"))
    return out


def _counters(nodes):
    out = []
    for label, key in GPU_COUNTERS:
        totals = {n: sum(g.get(key) or 0 for g in _gpus(f) if isinstance(g.get(key) or 0, int)) for n, f in nodes.items()}
        out += _more_than_peers(totals, label)
    pending = {n: sum(1 for g in _gpus(f) if g.get("remapped_rows_pending") or g.get("remapped_rows_failure"))
               for n, f in nodes.items()}
    out += _more_than_peers(pending, "GPUs with pending or failed row remapping")
    return out


def _more_than_peers(totals: Mapping[str, int], label: str) -> list[Finding]:
    out = []
    for node, v in totals.items():
        others = [x for n, x in totals.items() if n != node]
        typical = median(others) if others else 0
        if v > typical:
            out.append(Finding(node, "outlier", label, v, typical, f"{v} {label} (others: {typical:g})"))
    return out


def _xids(nodes):
    out = []
    events = {n: [e for e in (get(f, "kernel.xid_events") or []) if isinstance(e, Mapping)] for n, f in nodes.items()}
    counts = {n: len(ev) for n, ev in events.items()}
    for finding in _more_than_peers(counts, "Xid events"):
        codes = sorted({e.get("code") for e in events[finding.node] if e.get("code") is not None})
        text = f"{finding.value} Xid event{'s' if finding.value != 1 else ''} (Xid {', '.join(map(str, codes))}; others: {finding.expected:g})"
        out.append(Finding(finding.node, "outlier", "Xid events", codes, finding.expected, text))
    return out


def _throttle(nodes):
    reasons = {n: {r for g in _gpus(f) for r in (g.get("throttle_reasons") or []) if r not in BENIGN_THROTTLE}
               for n, f in nodes.items()}
    out = []
    for node, rs in reasons.items():
        for r in sorted(rs):
            have = sum(1 for x in reasons.values() if r in x)
            if have * 2 < len(nodes) + (len(nodes) == 2):  # a minority (on two nodes: only one has it)
                out.append(Finding(node, "outlier", "throttle reason", r, None,
                                   f"GPU clocks throttled by {r} (on {have} of {len(nodes)} nodes)"))
    return out


def _shm(nodes):
    sizes = {n: get(f, "io.shm_size_mib") for n, f in nodes.items()}
    sizes = {n: v for n, v in sizes.items() if isinstance(v, (int, float))}
    out = []
    for node, v in sizes.items():
        others = [x for n, x in sizes.items() if n != node]
        if others and v < 0.5 * median(others):
            out.append(Finding(node, "outlier", "/dev/shm", v, median(others),
                               f"/dev/shm {v:g} MiB (others: {median(others):g} MiB)"))
    return out


def _nouveau(nodes):
    loaded = {n: get(f, "kernel.modules.nouveau") for n, f in nodes.items()}
    if sum(1 for v in loaded.values() if v is True) * 2 >= len(loaded):
        return []
    return [Finding(n, "outlier", "nouveau", True, False, "nouveau module loaded (not on the others)")
            for n, v in loaded.items() if v is True]


def _nofile(nodes):
    limits = {n: get(f, "io.nofile_soft") for n, f in nodes.items()}
    limits = {n: v for n, v in limits.items() if isinstance(v, int)}
    if len(limits) < 2:
        return []
    common, _ = _majority(limits)
    return [Finding(n, "outlier", "open files limit", v, common, f"open files limit {v} (most nodes: {common})")
            for n, v in limits.items() if v < common]
