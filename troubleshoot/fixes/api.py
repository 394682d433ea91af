"""The fixer API: a fixer has an id, a title, typed parameters and builds a Plan.

A plugin returns Fixer instances from the `troubleshoot_fixers` hook (see hookspecs.py and
docs/plugins.md). Parameters are validated before `plan()` is called, so a fixer receives
values of the declared types only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from troubleshoot.errors import TroubleshootError
from troubleshoot.fixes.plan import Plan


class FixerError(TroubleshootError):
    """A fixer cannot build a plan (bad parameter, nothing to do here): one line to the user."""


@dataclass(frozen=True)
class Param:
    name: str
    type: type = str  # str, int, float or bool
    required: bool = False
    default: Any = None
    help: str = ""
    choices: tuple = ()
    pattern: str | None = None  # the value (as text) must match this regex entirely

    def coerce(self, fixer_id: str, raw: Any) -> Any:
        where = f"fixer {fixer_id!r}: parameter {self.name!r}"
        if self.type is bool:
            if isinstance(raw, bool):
                value = raw
            elif str(raw).lower() in ("1", "true", "yes", "on"):
                value = True
            elif str(raw).lower() in ("0", "false", "no", "off"):
                value = False
            else:
                raise FixerError(f"{where}: expected true or false, got {raw!r}")
        elif self.type in (int, float):
            try:
                value = self.type(raw) if not isinstance(raw, bool) else None
            except (TypeError, ValueError):
                value = None
            if value is None:
                raise FixerError(f"{where}: expected {'a whole number' if self.type is int else 'a number'}, got {raw!r}")
        else:
            if not isinstance(raw, (str, int, float)) or isinstance(raw, bool):
                raise FixerError(f"{where}: expected text, got {type(raw).__name__}")
            value = str(raw)
            if "\x00" in value:
                raise FixerError(f"{where}: NUL bytes are not allowed")
        if self.choices and value not in self.choices:
            raise FixerError(f"{where}: must be one of {', '.join(map(str, self.choices))}, got {raw!r}")
        if self.pattern and not re.fullmatch(self.pattern, str(value)):
            raise FixerError(f"{where}: {raw!r} is not valid ({self.help or 'format ' + self.pattern})")
        return value


class Fixer:
    """Base class of fixers. Subclasses set `id`, `title`, `params` and implement `plan`."""

    id: str = ""
    title: str = ""
    params: tuple[Param, ...] = ()
    needs_snapshot: bool = False  # True when plan() reads machine facts

    def validate(self, raw: Mapping[str, Any]) -> dict:
        known = {p.name: p for p in self.params}
        for name in raw:
            if name not in known:
                names = ", ".join(known) or "none"
                raise FixerError(f"fixer {self.id!r}: unknown parameter {name!r} (parameters: {names})")
        out = {}
        for p in self.params:
            if p.name in raw and raw[p.name] is not None:
                out[p.name] = p.coerce(self.id, raw[p.name])
            elif p.required:
                raise FixerError(f"fixer {self.id!r}: parameter {p.name!r} is required ({p.help})")
            else:
                out[p.name] = p.default
        return out

    def plan(self, params: dict, snapshot: Mapping | None) -> Plan:  # pragma: no cover - abstract
        raise NotImplementedError
