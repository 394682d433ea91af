"""Where the shipped rule folder is: the rule set, the symptom taxonomy and the Xid catalog all
live there."""

from __future__ import annotations

from pathlib import Path


def shipped_rules_dir() -> Path:
    try:
        import troubleshoot_rules  # installed layout (wheel or editable)

        return Path(troubleshoot_rules.__file__).parent
    except ImportError:  # running from a source checkout without installing
        return Path(__file__).resolve().parents[2] / "rules"
