"""The JSON contract of `diagnose` (schema 1, documented in docs/json-output.md)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Iterable

from troubleshoot.report.views import diagnosis_record

if TYPE_CHECKING:
    from troubleshoot.model import Diagnosis
    from troubleshoot.pipeline import Result
    from troubleshoot.sources import Skipped

SCHEMA = 1


def diagnosis_dict(d: Diagnosis) -> dict:
    """One diagnosis as the document holds it: its view's record (report.views), values as found;
    the rest of the view (terminal-safe text, evidence cut for people) is not built for JSON."""
    return diagnosis_record(d)


def document(diagnoses: Iterable[Diagnosis], meta: dict | None = None) -> dict:
    """The document as a mapping (values not yet made JSON: `render` writes them as strings)."""
    doc = {"schema": SCHEMA, "diagnoses": [diagnosis_dict(d) for d in diagnoses]}
    if meta:
        doc.update(meta)
    return doc


def render(diagnoses: Iterable[Diagnosis], meta: dict | None = None) -> str:
    return json.dumps(document(diagnoses, meta), indent=2, default=str) + "\n"


def skipped_list(skipped: Iterable[Skipped]) -> list[dict]:
    """The inputs left out as no text logs: `file` (as named), `why` (what it is instead)."""
    return [{"file": s.name, "why": s.why} for s in skipped]


def input_keys(skipped: Iterable[Skipped], empty: Iterable[str]) -> dict:
    """The keys of the document that say what of the input was not diagnosed: `skipped`
    (skipped_list) and `empty` (the logs read that held nothing)."""
    return {"skipped": skipped_list(skipped), "empty": list(empty)}


def result_meta(result: Result, facts_origin: str | None, facts_note: str | None = None) -> dict:
    """The document's keys besides the diagnoses, for a pipeline result whose machine facts came
    from `facts_origin` ("this machine", "snapshot FILE", None): what `diagnose` prints and a
    support bundle packs. `facts_source` says whose facts judged the logs (the log's own, the
    machine's, both), `log_facts` what the log said of its machine, `facts_note` why this
    machine's were left out."""
    from troubleshoot.report.factsview import facts_source

    return {"source": result.source, "lines": result.lines, "facts": facts_origin, "logs": result.logs,
            "summary": result.headline, "facts_source": facts_source(facts_origin, result.log_facts),
            "log_facts": dict(result.log_facts), "facts_note": facts_note,
            **input_keys(result.skipped, result.empty)}
