"""The admin loop's settings: the `admin:` section of the config file, then the command line.

    admin:
      max_drain: 2            # nodes drained by troubleshoot at once, cluster-wide
      max_drain_percent: 10   # of each partition
      fail_after: 1           # failing checks in a row before a drain
      pass_after: 3           # passing checks in a row before a resume
      cooldown_s: 900         # between repairs of one node
      breaker_failures: 3     # failed verifications within breaker_window_s open the breaker
      breaker_window_s: 86400
      max_reboots: 2          # reboots of one GPU's fault before service_required
      boot_grace_s: 300       # after a boot, failing checks are recorded, not drained on
      report_only: false      # the kill switch: every action only reported
      db: /var/lib/troubleshoot/events.db
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Mapping

from troubleshoot.admin.policy import Limits
from troubleshoot.errors import TroubleshootError

_INTS = ("max_drain", "fail_after", "pass_after", "breaker_failures", "max_reboots")
_FLOATS = ("max_drain_percent", "cooldown_s", "breaker_window_s", "boot_grace_s")


@dataclasses.dataclass(frozen=True)
class Settings:
    limits: Limits
    db: str | None  # the event store's file; None: the state folder's


def load(path: str | Path | None, overrides: Mapping[str, Any]) -> Settings:
    """Settings from the config file (`path`, or the user's config file when it exists) with
    the command line's `overrides` (None values are not given) on top."""
    from troubleshoot.engine.ruleset import config_path

    given = path is not None
    path = Path(path) if given else config_path()
    section: Mapping = {}
    if given or path.is_file():
        section = _section(path)
    values = {**{k: v for k, v in section.items() if k != "db"}, **{k: v for k, v in overrides.items() if v is not None}}
    limits = Limits(**{k: _value(path, k, v) for k, v in values.items() if k in _INTS + _FLOATS + ("report_only",)})
    unknown = sorted(set(section) - set(_INTS + _FLOATS + ("report_only", "db")))
    if unknown:
        raise TroubleshootError(f"{path}: admin: unknown setting {unknown[0]!r}")
    db = section.get("db")
    if db is not None and not isinstance(db, str):
        raise TroubleshootError(f"{path}: admin: db must be a file path")
    if db and not Path(db).is_absolute():
        db = str(path.parent / db)
    return Settings(limits, db)


def _section(path: Path) -> Mapping:
    import yaml

    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise TroubleshootError(f"{path}: cannot read the config: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark else ""
        raise TroubleshootError(f"{path}{where}: not valid YAML: {getattr(exc, 'problem', None) or exc}") from None
    section = doc.get("admin") if isinstance(doc, dict) else None
    if section is None:
        return {}
    if not isinstance(section, dict):
        raise TroubleshootError(f"{path}: admin: must be a mapping of settings")
    return section


def _value(path: Path, key: str, value: Any) -> Any:
    if key == "report_only":
        if not isinstance(value, bool):
            raise TroubleshootError(f"{path}: admin: report_only must be true or false")
        return value
    kind = int if key in _INTS else float
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and value != int(value)):
        raise TroubleshootError(f"{path}: admin: {key} must be a{'n integer' if kind is int else ' number'}, "
                                f"not {value!r}")
    least = 1 if key in ("fail_after", "pass_after", "breaker_failures") else 0
    if value < least:
        raise TroubleshootError(f"{path}: admin: {key} must be at least {least}")
    return kind(value)
