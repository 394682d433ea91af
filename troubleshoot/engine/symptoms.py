"""Symptom ids and their descriptions: the shipped taxonomy (rules/symptoms.yaml) and the
`symptoms.yaml` a team folder adds to it."""

from __future__ import annotations

from pathlib import Path

from troubleshoot.engine import yamldoc
from troubleshoot.engine.documents import load_data_file
from troubleshoot.engine.loader import ID_RE, did_you_mean
from troubleshoot.errors import Problem


def load_taxonomy(path: Path) -> dict[str, str]:
    """Symptom ids and descriptions; a broken taxonomy is a hard error (nothing can be checked)."""
    from troubleshoot.errors import TroubleshootError

    data = load_data_file(path, "symptom taxonomy")
    if not isinstance(data, dict) or not isinstance(data.get("symptoms"), dict):
        raise TroubleshootError(f"{path}: expected a mapping with a 'symptoms:' mapping")
    return {str(k): str(v) for k, v in data["symptoms"].items()}


def load_team_symptoms(path: Path, known: dict[str, str]) -> tuple[dict[str, tuple[str, int]], list[Problem]]:
    """A team folder's `symptoms.yaml` (`symptoms: {id: description}`, like the shipped one):
    {id: (description, line)} of the new ids. Unlike the shipped taxonomy, a broken team file is
    a problem that skips it, and an id the taxonomy already has is a warning (it keeps its meaning)."""
    problems: list[Problem] = []
    try:
        data, _ = yamldoc.load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        return {}, [Problem(path, None, f"cannot read symptoms: {getattr(exc, 'strerror', None) or exc}")]
    except yamldoc.YamlError as exc:
        return {}, [Problem(path, exc.line, exc.message)]
    symptoms = data.get("symptoms") if isinstance(data, yamldoc.LDict) else None
    if not isinstance(symptoms, yamldoc.LDict):
        return {}, [Problem(path, getattr(data, "line", None) or 1,
                            "expected a mapping with a 'symptoms:' mapping of id: description")]
    for key in data:
        if key != "symptoms":
            problems.append(Problem(path, data.line_of(key), f"unknown top-level key {key!r}{did_you_mean(key, {'symptoms'})}"
                                                              " (expected: symptoms)"))
    out: dict[str, tuple[str, int]] = {}
    for sid, desc in symptoms.items():
        line = symptoms.line_of(sid)
        if not isinstance(sid, str) or not ID_RE.match(sid):
            problems.append(Problem(path, line, f"symptom id {sid!r} is not kebab-case (a-z, 0-9, '-')"))
        elif not isinstance(desc, str) or not desc.strip():
            problems.append(Problem(path, line, f"symptom {sid!r} needs a one-line description (a string)"))
        elif sid in known:
            problems.append(Problem(path, line, f"symptom {sid!r} is already defined; this definition is ignored",
                                    level="warning"))
        else:
            out[sid] = (desc.strip(), line)
    return out, problems
