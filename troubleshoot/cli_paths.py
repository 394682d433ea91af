"""Path options checked once, before any work: a bad one is a one-line error naming the option
and the path, never a traceback from deep inside (and never seconds of probing first)."""

from __future__ import annotations

import os
from pathlib import Path

from troubleshoot.errors import TroubleshootError

# option attribute -> what it must name. Logs are checked where they are opened (a glob, a
# folder of ranks and '-' are all valid there).
KINDS = {
    "snapshot": "file",       # --snapshot FILE
    "rules": "exists",        # --rules DIR (a folder, or one rule file)
    "root": "folder-or-new",  # --root DIR (created when missing)
    "python": "interpreter",  # --python PATH (an interpreter, or a venv/conda folder)
    "save": "not-folder",     # probe --save FILE
}

_WANTED = {"file": "a file", "exists": "a folder or a rule file", "folder-or-new": "a folder",
           "interpreter": "an interpreter or a venv", "not-folder": "a file name"}


def check(args, skip: tuple[str, ...] = ()) -> None:
    for attr, kind in KINDS.items():
        value = None if attr in skip else getattr(args, attr, None)
        if value is None:
            continue
        for v in value if isinstance(value, list) else [value]:
            fixed = _check(f"--{attr}", v, kind)
            if fixed is not None:
                setattr(args, attr, fixed)


def _check(option: str, value: str, kind: str) -> str | None:
    """Raise for a path that cannot work; return a replacement value (a venv's interpreter, a
    root made absolute)."""
    if not value:  # '' would quietly mean the current folder
        raise TroubleshootError(f"{option}: an empty path; give {_WANTED[kind]}")
    p = Path(os.path.expanduser(value))
    if kind == "file":
        if not p.exists():
            raise TroubleshootError(f"{option} {value}: no such file")
        if not p.is_file():
            raise TroubleshootError(f"{option} {value}: not a file")
    elif kind == "exists":
        if not p.exists():
            raise TroubleshootError(f"{option} {value}: no such folder or rule file")
    elif kind == "folder-or-new":
        if p.exists() and not p.is_dir():
            raise TroubleshootError(f"{option} {value}: not a folder")
        return os.path.realpath(p)  # resolved once: what is previewed, written and journalled
    elif kind == "not-folder":
        if p.is_dir():
            raise TroubleshootError(f"{option} {value}: is a folder; give a file name")
    elif kind == "interpreter":
        if p.is_dir():
            for candidate in (p / "bin" / "python", p / "bin" / "python3", p / "python.exe"):
                if candidate.is_file():
                    return str(candidate)
            raise TroubleshootError(f"{option} {value}: a folder without bin/python (give the interpreter or a venv)")
        if not p.is_file():
            raise TroubleshootError(f"{option} {value}: no such interpreter")
        if not os.access(p, os.X_OK):
            raise TroubleshootError(f"{option} {value}: not executable")
    return None
