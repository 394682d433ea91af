"""A pasted `troubleshoot run --format json` report read back into the run facts it carries.

The report (troubleshoot/cli_run.py) holds the watcher's `run` area as measured, under a top-level
`"run"` key (null when the job was not watched). A teammate who pastes it gives the same facts
the wrapper had, so the run rules diagnose the paste as they diagnosed the run.
"""

from __future__ import annotations

import json
import re

from troubleshoot.paste.dumps import Found

_RUN_KEY = re.compile(r'"run"\s*:\s*\{')
_DECODER = json.JSONDecoder()
# The watcher's values are numbers, booleans, short strings and lists of names; anything else
# under "run" is not what the wrapper writes.
_SCALAR = (int, float, bool, str, type(None))


def report(lines: list[str]) -> Found | None:
    for start, text in enumerate(lines):
        m = _RUN_KEY.search(text) if '"run"' in text else None
        if not m:
            continue
        # From the brace on; a pretty-printed report spans many lines, a compact one is one line.
        rest = "\n".join([text[m.end() - 1:], *lines[start + 1:start + 400]])
        try:
            run, _ = _DECODER.raw_decode(rest)
        except ValueError:
            continue
        if not isinstance(run, dict) or run.get("available") is not True:
            continue
        facts = {k: v for k, v in run.items() if isinstance(k, str) and
                 (isinstance(v, _SCALAR) or (isinstance(v, list) and all(isinstance(x, str) for x in v)))}
        found = Found(facts={"run": facts})
        for key in facts:
            at = next((j for j in range(start, min(len(lines), start + 400)) if f'"{key}"' in lines[j]), start)
            found.lines[f"run.{key}"] = at
        return found
    return None
