"""Pasted facts laid over the probed ones (they describe the log's machine), with the pasted line
that showed each fact kept beside them for the diagnosis's evidence."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Mapping

    from troubleshoot.paste.reader import Pasted

# Where merged facts keep, per fact path (lists as `[]`), the pasted line that showed it.
LINES_KEY = "_pasted_lines"
# Areas where facts measured for this very log (the watcher's run facts) are kept over pasted ones.
MEASURED_WINS = ("run",)


def merge(facts: Mapping | None, pasted: Pasted) -> dict | None:
    """`facts` with the pasted facts laid over them (they describe the log's machine)."""
    if not pasted:
        return dict(facts) if facts is not None else None
    import copy  # here: most logs paste nothing, and copy brings weakref with it

    out = copy.deepcopy(dict(facts or {}))
    lines = dict(pasted.lines)
    for area, values in pasted.facts.items():
        if area in MEASURED_WINS and isinstance(out.get(area), dict) and out[area].get("available"):
            # `troubleshoot run` watched this job: its averages beat a snapshot the job printed.
            lines = {p: v for p, v in lines.items() if not p.startswith(area + ".")}
            continue
        if not isinstance(out.get(area), dict) or out[area].get("available") is False:
            out[area] = {}
        out[area].update(copy.deepcopy(values))
    out[LINES_KEY] = lines
    return out
