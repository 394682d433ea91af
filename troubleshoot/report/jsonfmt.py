"""The JSON contract of `diagnose` (schema 1, documented in docs/json-output.md)."""

from __future__ import annotations

import json
from typing import Iterable

from troubleshoot.model import Diagnosis

SCHEMA = 1


def diagnosis_dict(d: Diagnosis) -> dict:
    evidence = []
    for e in d.evidence:
        if e.source == "log":
            evidence.append({"source": "log", "line": e.line, "text": e.text,
                             "span": list(e.span) if e.span else None, "file": e.file})
        else:
            evidence.append({"source": "fact", "path": e.path, "value": e.value, "text": e.text})
    return {
        "rule": d.rule.id,
        "symptom": d.symptom,
        "title": d.title,
        "severity": d.severity,
        "confidence": round(d.confidence, 3),
        "action": d.action,
        "xid": dict(d.xid) if d.xid else None,
        "count": d.count,
        "first_line": d.first_line,
        "last_line": d.last_line,
        "evidence": evidence,
        "captures": dict(d.captures),
        "explain": d.explain,
        "fixes": [{"fixer": f.fixer, "title": f.title, "params": dict(f.params)} for f in d.fixes],
        "references": list(d.rule.references),
        "notes": list(d.notes),
        "origin": {"path": d.rule.origin.path, "line": d.rule.origin.line, "pack": d.rule.origin.pack},
        "ranks": list(d.ranks),
        "nodes": list(d.nodes),
        "files": list(d.files),
        "first_seen": d.first_seen,
    }


def render(diagnoses: Iterable[Diagnosis], meta: dict | None = None) -> str:
    doc = {"schema": SCHEMA, "diagnoses": [diagnosis_dict(d) for d in diagnoses]}
    if meta:
        doc.update(meta)
    return json.dumps(doc, indent=2, default=str) + "\n"
