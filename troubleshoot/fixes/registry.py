"""The fixers that plugins (the shipped ones included) register."""

from __future__ import annotations

import re

from troubleshoot.fixes.api import Fixer

ID_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


def load_fixers(plugins) -> dict[str, Fixer]:
    out: dict[str, Fixer] = {}
    for f in plugins.collect("troubleshoot_fixers"):
        fid = getattr(f, "id", None)
        if not isinstance(f, Fixer) or not isinstance(fid, str) or not ID_RE.match(fid):
            plugins.problems.append(f"ignored a fixer that is not a troubleshoot Fixer with a kebab-case id: {f!r}")
            continue
        if fid in out:
            plugins.problems.append(f"two fixers are named {fid!r}; the later plugin's wins")
        out[fid] = f
    return out
