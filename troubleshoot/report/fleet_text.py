"""Fleet reports: a text table (node x finding) and the JSON document (schema 1)."""

from __future__ import annotations

import json

from troubleshoot.report.jsonfmt import SCHEMA, diagnosis_dict, skipped_list
from troubleshoot.report.views import diagnosis_view
from troubleshoot.textsafe import terminal_safe


def render_text(res, colour: bool = False) -> str:
    out: list[str] = []
    if res.headline:
        out += [terminal_safe(res.headline), ""]
    rows = []
    by_node = res.findings_by_node()
    for node in res.nodes:
        items = [f"{f.kind}: {f.text}" for f in by_node.get(node, [])]
        items += [f"{v.severity}: {v.symptom} ({v.rule})" for v in map(diagnosis_view, res.per_node.get(node, []))]
        rows.append((node, items or ["ok"]))
    width = max([len("NODE")] + [len(n) for n, _ in rows])
    out.append(f"{'NODE':<{width}}  FINDINGS")
    for node, items in rows:
        for i, item in enumerate(items):
            out.append(f"{terminal_safe(node, False) if i == 0 else '':<{width}}  {terminal_safe(item, False)}")
    groups = [g for g in res.groups()]
    if groups:
        out += ["", "Diagnoses by node:"]
        for rule, symptom, nodes in groups:
            out.append(f"  {len(nodes)} node{'s' if len(nodes) != 1 else ''}: {symptom} ({rule}): "
                       + terminal_safe(", ".join(nodes), False))
    if res.job:
        out += ["", "The job's logs, first failure first:"]
        for v in map(diagnosis_view, res.job[:8]):
            tag = "consequence" if v.consequence else "cause"
            out.append(f"  [{v.severity}] {v.symptom} ({v.rule}) on {v.who} ({tag})")
    clean = sum(1 for node, items in rows if items == ["ok"])
    out += ["", f"{len(res.nodes)} nodes, {clean} without findings"]
    return "\n".join(out) + "\n"


def render_json(res) -> str:
    doc = {
        "schema": SCHEMA,
        "nodes": res.nodes,
        "findings": [f.as_dict() for f in res.findings],
        "per_node": {n: [diagnosis_dict(d) for d in ds] for n, ds in res.per_node.items()},
        "groups": [{"rule": r, "symptom": s, "nodes": ns} for r, s, ns in res.groups()],
        "diagnoses": [diagnosis_dict(d) for d in res.job],
        "summary": res.headline,
        "logs": res.logs,
        "warnings": res.warnings,
        "left_out": res.left_out,
        "skipped": skipped_list(res.skipped),
    }
    return json.dumps(doc, indent=2, default=str) + "\n"
