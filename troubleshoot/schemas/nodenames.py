"""Host and scheduler node names safe to hand to scontrol, srun or kubectl, as the snapshot
schema's `node.slurm_node` pattern states them."""

from __future__ import annotations

import functools
import re

from troubleshoot.schemas import schema


def valid_node_name(name: object) -> bool:
    """A host or scheduler node name that is safe as one argument of scontrol, srun or kubectl:
    letters, digits, '.', '_' and '-', not starting with '-' (no option, no host list)."""
    return isinstance(name, str) and re.fullmatch(_node_pattern(), name) is not None


@functools.lru_cache(maxsize=1)
def _node_pattern() -> str:
    return schema()["properties"]["node"]["properties"]["slurm_node"]["pattern"]
