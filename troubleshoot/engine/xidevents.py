"""The Xid events of a machine's facts given the engine's verdicts, with the verdict modules
(engine.gpufaults and the Xid catalog) loaded only for facts that hold events: most facts have
none, and those modules cost a small command a tenth of its start-up."""

from __future__ import annotations

from typing import Mapping


def has_events(facts: Mapping | None) -> bool:
    kernel = facts.get("kernel") if isinstance(facts, Mapping) else None
    return isinstance(kernel, Mapping) and bool(kernel.get("xid_events"))


def with_verdicts(facts: Mapping | None) -> Mapping | None:
    """gpufaults.with_verdicts, for facts that hold Xid events; `facts` itself otherwise."""
    if not has_events(facts):
        return facts
    from troubleshoot.engine import gpufaults

    return gpufaults.with_verdicts(facts)
