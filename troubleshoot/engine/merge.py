"""Many sources' diagnoses -> one ranked list: the first failure above its consequences.

Pure functions. Each log (a rank's file, one rank of a merged log, a node's snapshot) is
diagnosed on its own; here the same rule's diagnoses are merged into one that says on which
ranks, nodes and files it was seen and when it was first seen, then related across sources (an
OOM on rank 17 makes the NCCL timeouts of the other ranks its consequences) and ranked: causes
first, then severity, then the earliest first seen.
"""

from __future__ import annotations

import statistics
from typing import Sequence

from troubleshoot.engine.diagnose import relate
from troubleshoot.engine.timestamps import Stamp
from troubleshoot.model import SEVERITIES, Diagnosis
from troubleshoot.records import record, replace

_LATE = (99, 99, 0.0)  # sorts after every real timestamp


@record(frozen=True)
class Occurrence:
    """One source's diagnosis, with where and when it was seen there."""

    diagnosis: Diagnosis
    file: str | None = None
    node: str | None = None
    rank: int | None = None
    stamp: Stamp | None = None
    order: int = 0  # the source's position, for ties

    @property
    def rank_seen(self) -> int | None:
        if self.rank is not None:
            return self.rank
        value = self.diagnosis.captures.get("rank")  # NCCL lines say "[Rank 3]"
        return int(value) if isinstance(value, str) and value.isdigit() else None

    def key(self):
        return (self.stamp.key if self.stamp else _LATE, self.diagnosis.first_line or 0, self.order)


def merge(occurrences: Sequence[Occurrence]) -> list[Diagnosis]:
    """One diagnosis per rule, related and ranked across every source."""
    by_rule: dict[tuple, list[Occurrence]] = {}
    for o in occurrences:  # an Xid rule gives one diagnosis per Xid code: kept apart
        by_rule.setdefault((o.diagnosis.rule.id, (o.diagnosis.xid or {}).get("code"),
                            (o.diagnosis.entry or {}).get("key")), []).append(o)
    merged: list[tuple[Diagnosis, tuple]] = []
    for occ in by_rule.values():
        occ.sort(key=Occurrence.key)
        if occ[0].diagnosis.rule.compare:
            d = compared(occ)
            if d is not None:
                merged.append((d, occ[0].key()[:1]))
            continue
        first = occ[0]
        d = first.diagnosis
        ranks = tuple(sorted({r for r in (o.rank_seen for o in occ) if r is not None}))
        nodes = tuple(dict.fromkeys(o.node for o in occ if o.node))
        files = tuple(dict.fromkeys(o.file for o in occ if o.file))
        notes = tuple(n for n in d.notes if not n.startswith("matched "))
        if len(occ) > 1:
            notes += (f"seen in {len(occ)} sources ({_where(ranks, nodes, files)}); the first is shown",)
            notes += _waited_on(occ)
        evidence = tuple(replace(e, file=first.file) if e.source == "log" else e for e in d.evidence)
        d = replace(d, count=sum(o.diagnosis.count for o in occ), evidence=evidence, notes=notes,
                    confidence=max(o.diagnosis.confidence for o in occ), ranks=ranks, nodes=nodes,
                    files=files, first_seen=str(first.stamp) if first.stamp else None)
        merged.append((d, first.key()[:1]))
    related = relate([d for d, _ in merged], where="the logs read together")
    when = [k for _, k in merged]  # relate keeps the order

    def key(pair):
        d, first = pair
        return (1 if d.downstream_of_found else 0, SEVERITIES.index(d.severity), first, -d.confidence, d.rule.id)

    return [d for d, _ in sorted(zip(related, when), key=key)]


def _where(ranks, nodes, files) -> str:
    parts = []
    if ranks:
        parts.append(f"{len(ranks)} rank{'s' if len(ranks) != 1 else ''}")
    if nodes:
        parts.append(f"{len(nodes)} node{'s' if len(nodes) != 1 else ''}")
    if files and not ranks:
        parts.append(f"{len(files)} file{'s' if len(files) != 1 else ''}")
    return ", ".join(parts) or "several sources"


_CONSEQUENCE_VERB = {
    "nccl-timeout": "timed out in NCCL",
    "nccl-error": "reported NCCL errors",
    "dist-rendezvous": "lost the rendezvous",
}


def who(d: Diagnosis) -> str:
    """'rank 17 on node gpu-07', 'node gpu-07', 'rank 3' or the file, for the first sighting."""
    rank = f"rank {d.ranks[0]}" if len(d.ranks) == 1 else (f"ranks {_span(d.ranks)}" if d.ranks else "")
    node = f"node {d.nodes[0]}" if len(d.nodes) == 1 else (f"{len(d.nodes)} nodes" if d.nodes else "")
    if rank and node:
        return f"{rank} on {node}"
    return rank or node or (d.files[0] if d.files else "the log")


# What a rank reports when another rank failed: never the cause when it is all the logs show.
CONSEQUENCES = ("nccl-timeout",)


def _waited_on(occ: Sequence[Occurrence]) -> tuple[str, ...]:
    """Which sequence number each rank's collective waited on, when they differ: the ranks at the
    lowest number are behind the others, and the hang is theirs to explain."""
    by_seq: dict[int, set[int]] = {}
    for o in occ:
        seq, rank = o.diagnosis.captures.get("seq"), o.rank_seen
        if isinstance(seq, str) and seq.isdigit() and rank is not None:
            by_seq.setdefault(int(seq), set()).add(rank)
    if len(by_seq) < 2:
        return ()
    parts = [f"SeqNum {seq}: rank{'s' if len(r) > 1 else ''} {_span(sorted(r))}" for seq, r in sorted(by_seq.items())]
    return (f"the ranks waited on different collectives ({'; '.join(parts)}): the ranks at the lowest "
            f"sequence number fell behind",)


def _source_of(o: Occurrence) -> str:
    rank = o.rank_seen
    if rank is not None:
        return f"rank {rank}" + (f" on node {o.node}" if o.node else "")
    return f"node {o.node}" if o.node else (o.file or "a log")


def _num(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.3g}"


def compared(occ: Sequence[Occurrence]) -> Diagnosis | None:
    """A rule that compares ranks (Rule.compare): its diagnosis on the sources whose followed
    number is worse than the median of the others by more than the rule's margin, or None when
    fewer than three sources followed it or none stands out."""
    name, worse, by = occ[0].diagnosis.rule.compare
    values = [(o, o.diagnosis.series[name]["steady_mean"]) for o in occ if name in o.diagnosis.series]
    if len(values) < 3:
        return None
    out = []
    for i, (o, v) in enumerate(values):
        median = statistics.median(x for j, (_, x) in enumerate(values) if j != i)
        if median <= 0 or v <= 0:
            continue
        ratio = v / median if worse == "higher" else median / v
        if ratio > 1 + by:
            out.append((ratio, o, v, median))
    if not out:
        return None
    out.sort(key=lambda t: -t[0])
    notes = tuple(f"{_source_of(o)} is the slowest: {name.replace('_', ' ')} {_num(v)} on average against {_num(m)}, the "
                  f"median of the other {len(values) - 1} (+{100 * (r - 1):.0f} %)" for r, o, v, m in out)
    worst = out[0][1]
    ranks = tuple(sorted(o.rank_seen for _, o, _, _ in out if o.rank_seen is not None))
    nodes = tuple(dict.fromkeys(o.node for _, o, _, _ in out if o.node))
    files = tuple(dict.fromkeys(o.file for _, o, _, _ in out if o.file))
    evidence = tuple(replace(e, file=worst.file) if e.source == "log" else e for e in worst.diagnosis.evidence)
    return replace(worst.diagnosis, ranks=ranks, nodes=nodes, files=files, evidence=evidence, notes=notes,
                   count=sum(o.diagnosis.count for _, o, _, _ in out),
                   first_seen=str(worst.stamp) if worst.stamp else None)


def headline(diagnoses: Sequence[Diagnosis]) -> str | None:
    """'rank 17 on node gpu-07 failed first with cuda-oom (at ...); 63 ranks then timed out in
    NCCL'; 'no rank shows a cause: ...' when the logs hold only consequences; or None when no
    log diagnosis stands out."""
    causes = [d for d in diagnoses if d.count and not d.downstream_of_found and not d.rule.compare]
    if not causes:
        slow = next((d for d in diagnoses if d.rule.compare), None)
        return slow.notes[0] if slow is not None and slow.notes else None
    top = causes[0]
    if top.symptom in CONSEQUENCES and all(d.symptom in CONSEQUENCES for d in causes):
        return _no_cause(top)
    text = f"{who(top)} failed first with {top.symptom} ({top.rule.id})"
    if top.first_seen:
        text += f" at {top.first_seen}"
    by_symptom: dict[str, set] = {}
    for d in diagnoses:
        if d.downstream_of_found and top.symptom in d.downstream_of_found:
            by_symptom.setdefault(d.symptom, set()).update(d.ranks or d.nodes or d.files)
    parts = []
    for symptom, seen in by_symptom.items():
        others = seen - set(top.ranks or top.nodes or top.files)
        unit = "ranks" if any(isinstance(x, int) for x in seen) else "sources"
        n = len(others) or len(seen)
        if unit == "ranks" and n == 1:
            unit = "rank"
        parts.append(f"{n} {unit} then {_CONSEQUENCE_VERB.get(symptom, 'reported ' + symptom)}")
    return text + ("; " + "; ".join(parts) if parts else "")


def _span(ranks: Sequence[int]) -> str:
    """'3', '0,1,2', '0..63', '0..63 except 17', '0..63 (40)'."""
    if len(ranks) <= 6:
        return ",".join(map(str, ranks))
    gaps = sorted(set(range(ranks[0], ranks[-1] + 1)) - set(ranks))
    if not gaps:
        return f"{ranks[0]}..{ranks[-1]}"
    if len(gaps) <= 3:
        return f"{ranks[0]}..{ranks[-1]} except {','.join(map(str, gaps))}"
    return f"{ranks[0]}..{ranks[-1]} ({len(ranks)})"


def _no_cause(d: Diagnosis) -> str:
    """Only timeouts: say so, name who timed out on what, and which ranks never said anything."""
    op, seq = d.captures.get("op"), d.captures.get("seq")
    what = f" waiting on {op}" + (f" SeqNum={seq}" if seq else "") if op else ""
    text = f"no rank shows a cause: {who(d)} timed out in NCCL{what}"
    silent = [r for r in range(max(d.ranks) + 1) if r not in d.ranks] if len(d.ranks) > 1 else []
    if silent:
        text += (f"; rank{'s' if len(silent) > 1 else ''} {_span(silent)} logged no timeout: look there first "
                 f"(its own log, py-spy dump, the kernel log of its node)")
    return text
