"""Bandwidth matrices pasted into a log, read as facts of the `p2p` area: which GPU is slower
than its peers, and whether peer-to-peer copies are slower than copies through host memory.

Two emitters print them, one header line above a row of column indexes and one row per GPU:

- the CUDA sample `p2pBandwidthLatencyTest`: "Unidirectional P2P=Disabled Bandwidth Matrix
  (GB/s)", "Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)", "Bidirectional
  P2P=Enabled Bandwidth Matrix (GB/s)"... over "   D\\D     0      1" and rows "     0 919.64
  51.23" (`printf("%6d ")`, `printf("%6.02f ")`); the diagonal is the GPU's own memory;
- NVIDIA's `nvbandwidth`: "memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)" over "   0   1"
  and rows "0   N/A   51.23" (no copy to itself), and "memcpy CE CPU(row) -> GPU(column)
  bandwidth (GB/s)" with one row for the host.

A GPU is slow when the best it reaches (its fastest peer, both directions averaged; or its copy
from or to the host) is at most SLOW_RATIO of the median of the others' best. The best, not the
average: on NVLink or PCIe-switch systems pairs differ by topology (an NVLink pair, a pair across
sockets), but every healthy GPU has a fast peer, while a GPU on a degraded link (x4 instead of
x16, a riser, a slot behind the chipset) is slow to all of them.
"""

from __future__ import annotations

import re
import statistics

from troubleshoot.paste.dumps import Found

AREA = "p2p"
# A GPU reaching at most this share of the others' median best is slow: a link at half its
# width or generation (x8 for x16, Gen3 for Gen4) reads about 0.5; a GPU on the far socket
# about 0.7-0.85 of the near ones, which is topology, not a fault.
SLOW_RATIO = 0.55
# Unidirectional P2P=Enabled below this share of P2P=Disabled: peer copies take a slower path
# than staging through host memory (ACS or the IOMMU redirecting peer traffic to the root complex).
P2P_SLOWER_RATIO = 0.5
MAX_GPUS = 256

_HEADER = re.compile(
    r"(?P<title>(?:Unidirectional|Bidirectional) P2P=(?:Enabled|Disabled) Bandwidth (?:\(P2P (?:Writes|Reads)\) )?"
    r"Matrix \(GB/s\)|memcpy (?:CE|SM) (?P<row>CPU|GPU)\(row\) (?:->|<-|<->) (?P<col>CPU|GPU)\(column\) "
    r"(?:total )?bandwidth \(GB/s\))")
_COLUMNS = re.compile(r"^[>|\s]*(?:D\\D)?\s*(?P<cols>\d+(?:\s+\d+)*)\s*\|?\s*$")
_ROW = re.compile(r"^[>|\s]*(?P<index>\d+)\s+(?P<values>(?:\d+(?:\.\d+)?|N/A)(?:\s+(?:\d+(?:\.\d+)?|N/A))*)\s*\|?\s*$")


class Matrix:
    """One printed matrix: its title, the line it starts on, and its rows (None where N/A)."""

    def __init__(self, title: str, line: int, columns: list[int], peer: bool):
        self.title, self.line, self.columns, self.peer = title, line, columns, peer
        self.rows: dict[int, list[float | None]] = {}

    def best(self) -> dict[int, float]:
        """The best each GPU reaches: its fastest peer, the two directions averaged (a peer
        matrix), or its own column (a host matrix)."""
        if not self.peer:
            values = list(zip(*self.rows.values()))
            return {gpu: max(v for v in values[k] if v is not None) for k, gpu in enumerate(self.columns)
                    if any(v is not None for v in values[k])}
        index = {gpu: k for k, gpu in enumerate(self.columns)}
        out: dict[int, float] = {}
        for i in self.columns:
            pairs = [_pair(self.rows[i][index[j]], self.rows[j][index[i]]) for j in self.columns if j != i]
            pairs = [p for p in pairs if p is not None]
            if pairs:
                out[i] = max(pairs)
        return out

    def off_diagonal(self) -> list[float]:
        index = {gpu: k for k, gpu in enumerate(self.columns)}
        return [v for i in self.columns for j in self.columns if i != j
                for v in (self.rows[i][index[j]],) if v is not None]


def _pair(a: float | None, b: float | None) -> float | None:
    both = [v for v in (a, b) if v is not None]
    return sum(both) / len(both) if both else None


def matrices(lines: list[str]) -> list[Matrix]:
    """Every whole bandwidth matrix in `lines`."""
    out = []
    for i, text in enumerate(lines):
        m = _HEADER.search(text) if "GB/s" in text else None
        if m is None or i + 1 >= len(lines):
            continue
        cols = _COLUMNS.match(lines[i + 1])
        if cols is None:
            continue
        columns = [int(c) for c in cols.group("cols").split()]
        peer = m.group("row") != "CPU" and m.group("col") != "CPU"
        found = _rows(Matrix(m.group("title"), i, columns, peer), lines, i + 2)
        if found is not None:
            out.append(found)
    return out


def _rows(matrix: Matrix, lines: list[str], start: int) -> Matrix | None:
    n = len(matrix.columns)
    if not 2 <= n <= MAX_GPUS or matrix.columns != sorted(set(matrix.columns)):
        return None
    for text in lines[start:start + MAX_GPUS + 1]:
        row = _ROW.match(text)
        if row is None:
            break
        values = row.group("values").split()
        if len(values) != n:
            return None  # cut or wrapped: not read rather than misread
        matrix.rows[int(row.group("index"))] = [None if v == "N/A" else float(v) for v in values]
    if matrix.peer and sorted(matrix.rows) != matrix.columns:
        return None
    return matrix if matrix.rows else None


def slow_gpus(matrix: Matrix) -> tuple[list[int], float, float] | None:
    """The GPUs at most SLOW_RATIO of the others' median best, the best of them and that
    median; None when no GPU is (or there are too few to compare: two GPUs' peer copies say
    nothing about which of the two is slow)."""
    best = matrix.best()
    if len(best) < (3 if matrix.peer else 2):
        return None
    slow = []
    for gpu, value in best.items():
        others = statistics.median(v for g, v in best.items() if g != gpu)
        if others > 0 and value <= SLOW_RATIO * others:
            slow.append(gpu)
    if not slow or (len(best) > 2 and len(slow) * 2 >= len(best)):
        return None  # half of them slow is not one odd GPU: the system's paths differ
    rest = [v for g, v in best.items() if g not in slow]
    return slow, max(best[g] for g in slow), statistics.median(rest)


def p2p(lines: list[str]) -> Found | None:
    found = Found()
    read = matrices(lines)
    for m in read:
        hit = slow_gpus(m)
        if hit is not None:
            slow, worst, others = hit
            found.put(AREA, "matrix", m.title, m.line)
            found.put(AREA, "gpus", len(m.columns), m.line)
            found.put(AREA, "slow_gpus", slow, m.line)
            found.put(AREA, "best_of", "its fastest peer GPU" if m.peer else "the host", m.line)
            found.put(AREA, "slow_best_gbps", round(worst, 2), m.line)
            found.put(AREA, "others_best_gbps", round(others, 2), m.line)
            break
    _enabled_vs_disabled(found, read)
    if read and f"{AREA}.matrix" not in found.lines:
        found.put(AREA, "matrix", read[0].title, read[0].line)
        found.put(AREA, "gpus", len(read[0].columns), read[0].line)
    return found if found.facts else None


def _enabled_vs_disabled(found: Found, read: list[Matrix]) -> None:
    """Unidirectional P2P=Enabled against P2P=Disabled (p2pBandwidthLatencyTest prints both)."""
    def median_of(prefix: str) -> tuple[float, Matrix] | None:
        m = next((m for m in read if m.title.startswith(prefix) and m.peer), None)
        values = m.off_diagonal() if m is not None else []
        return (statistics.median(values), m) if values else None

    enabled = median_of("Unidirectional P2P=Enabled")
    disabled = median_of("Unidirectional P2P=Disabled")
    if enabled is None or disabled is None:
        return
    found.put(AREA, "p2p_enabled_gbps", round(enabled[0], 2), enabled[1].line)
    found.put(AREA, "p2p_disabled_gbps", round(disabled[0], 2), disabled[1].line)
    found.put(AREA, "p2p_slower_than_host", enabled[0] < P2P_SLOWER_RATIO * disabled[0], enabled[1].line)
