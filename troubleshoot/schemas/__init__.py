"""The snapshot's JSON schema (snapshot.schema.json), shipped as data, and what is read from it.

The schema is the one description of every fact: snapshot checking, rule linting and the probes'
own checks of names they record all read it from here, below the modules that use it.
"""

from __future__ import annotations

import functools
import json
from importlib import resources

SCHEMA_FILE = "snapshot.schema.json"


@functools.lru_cache(maxsize=1)
def schema() -> dict:
    text = resources.files(__name__).joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    return json.loads(text)
