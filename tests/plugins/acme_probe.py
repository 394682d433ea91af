"""A team's local plugin, loaded with `-p acme_probe`: adds a probe and a rule folder."""

from pathlib import Path

from troubleshoot.hookspecs import hookimpl
from troubleshoot.probes.base import Probe


def _scratch(ctx):
    return {"available": True, "scratch_free_gib": 3, "mount": "/scratch"}


@hookimpl
def troubleshoot_probes():
    return [Probe("acme", _scratch, timeout=2, title="ACME scratch disk")]


@hookimpl
def troubleshoot_rule_dirs():
    return [Path(__file__).parent / "acme_rules"]
