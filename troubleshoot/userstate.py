"""Where troubleshoot keeps this user's state: $XDG_STATE_HOME/troubleshoot (by default
~/.local/state/troubleshoot), one folder per kind (runs: the logs `troubleshoot run` keeps;
journal: the fixes applied)."""

from __future__ import annotations

import os
from pathlib import Path


def state_dir(name: str) -> Path:
    """<state>/troubleshoot/<name>; nothing is made here."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "troubleshoot" / name
