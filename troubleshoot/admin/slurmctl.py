"""Slurm's view of nodes, and the two changes this tool makes to it: drain with a reason, resume.

A node this tool drained carries a reason starting with `troubleshoot:`; it resumes only those.
Every command is an argv (no shell), with a node name checked to be one plain host name: one
name must never be a hostlist that drains 512 nodes."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Sequence

from troubleshoot.errors import TroubleshootError
from troubleshoot.schemas.nodenames import valid_node_name

PREFIX = "troubleshoot:"
# What scontrol appends to a reason: ` [user@2026-12-06T11:03:42]`.
_STAMP = re.compile(r"\s*\[[^\[\]@]*@[^\[\]]*\]\s*$")


@dataclass(frozen=True)
class NodeState:
    name: str
    state: str  # as scontrol prints it: IDLE, MIXED+DRAIN, DOWN*+DRAIN ...
    reason: str = ""  # without scontrol's [user@time]
    partitions: tuple[str, ...] = ()

    @property
    def drained(self) -> bool:
        """Draining or drained: Slurm schedules nothing new there."""
        return "DRAIN" in self.state.upper()

    @property
    def ours(self) -> bool:
        return self.drained and self.reason.startswith(PREFIX)


def check_name(name: str) -> str:
    if not valid_node_name(name):
        raise TroubleshootError(f"{name!r} is not one node name (letters, digits, '-', '_' and '.'); a hostlist "
                                f"or an option is refused")
    return name


def parse_nodes(text: str) -> dict[str, NodeState]:
    """`scontrol show node -o` (one node per line) into states by node name."""
    out = {}
    for line in text.splitlines():
        head, _, reason = line.partition(" Reason=")
        name = re.search(r"(?:^|\s)NodeName=(\S+)", head)
        if not name:
            continue
        state = re.search(r"\sState=(\S+)", head)
        parts = re.search(r"\sPartitions=(\S+)", head)
        reason = _STAMP.sub("", reason).strip()
        out[name.group(1)] = NodeState(name.group(1), state.group(1) if state else "UNKNOWN",
                                       "" if reason in ("(null)", "none") else reason,
                                       tuple(parts.group(1).split(",")) if parts else ())
    return out


class Slurm:
    """scontrol through `runner(argv, timeout) -> CmdResult` (probes.base.run_command)."""

    def __init__(self, runner: Callable | None = None, timeout: float = 15.0):
        if runner is None:
            from troubleshoot.probes.base import run_command

            runner = run_command
        self.runner, self.timeout = runner, timeout

    def _run(self, argv: Sequence[str]) -> str:
        r = self.runner(list(argv), self.timeout)
        if not r.ok:
            # scontrol says some failures on stdout ("Node node9 not found")
            said = (r.stderr.strip() or r.stdout.strip()).splitlines()
            why = r.error or (said or [f"exit status {r.returncode}"])[-1]
            raise TroubleshootError(f"{' '.join(argv[:3])}: {why}")
        return r.stdout

    def nodes(self) -> dict[str, NodeState]:
        return parse_nodes(self._run(["scontrol", "show", "node", "-o"]))

    def node(self, name: str) -> NodeState:
        found = parse_nodes(self._run(["scontrol", "show", "node", "-o", check_name(name)]))
        if name not in found:
            raise TroubleshootError(f"Slurm knows no node {name!r}")
        return found[name]

    def drain(self, name: str, reason: str) -> None:
        # scontrol takes key=value words, no `--`: the name's check keeps it one node
        self._run(["scontrol", "update", f"nodename={check_name(name)}", "state=drain", f"reason={reason}"])

    def resume(self, name: str) -> None:
        self._run(["scontrol", "update", f"nodename={check_name(name)}", "state=resume"])
