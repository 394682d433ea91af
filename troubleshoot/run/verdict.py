"""What `troubleshoot run` tells of its job, while it runs and once it has ended, from one place.

A warning said while the job runs and the diagnosis at its end come from the same rules, the
same facts (the machine's, where known, and the watcher's `run` area) and the same choice of
what to tell, each on the data seen so far: a live warning names the rule and symptom that the
final diagnosis would name on that data. Only the data differ. While the job runs it is the
log's new lines and the samples so far, and the machine is not probed (that waits for a
failure); at the end it is the whole log and every sample. A trend seen half-way can level off
by the end, so `Verdict.retracted` names what was said live and is no longer so.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Iterable, Mapping

    from troubleshoot.engine.ruleset import RuleSet
    from troubleshoot.model import Diagnosis
    from troubleshoot.pipeline import Scanned
    from troubleshoot.sources import LogSource, LogTail

ORIGIN = "machine facts"


def job_facts(run: Mapping | None, machine: Mapping | None) -> dict | None:
    """The facts a job is judged on: the machine's (None: not probed) and the watcher's `run`
    area (None: not watched)."""
    facts = dict(machine or {})
    if run:
        facts["run"] = run
    return facts or None


class Verdict:
    """One rule set's judgement of one job: `final` once it has ended, `so_far` while it runs."""

    def __init__(self, ruleset: RuleSet):
        from troubleshoot import pipeline

        self.ruleset = ruleset
        # The rules that read the watcher's samples alone: what a job that did not fail still
        # hears of, beside what its own output showed.
        self.watched = frozenset(r.id for r in pipeline.live_rules(ruleset).rules)

    def told(self, diagnoses: Iterable[Diagnosis], failed: bool) -> list[Diagnosis]:
        """What `run` tells: every diagnosis of a job that failed; of one that succeeded, or
        still runs, what its output or the watcher showed (a recovered OOM, data loading
        dominating steps, memory climbing). Findings about the machine alone need a failure."""
        return [d for d in diagnoses if failed or d.count or d.rule.id in self.watched]

    def final(self, scanned: Scanned, log: LogSource, facts: Mapping | None, failed: bool) -> list[Diagnosis]:
        """The diagnosis of the job's whole log (scanned while it ran) with `facts` (job_facts),
        as `diagnose --log LOG` gives it with those facts, told as `told` chooses."""
        from troubleshoot import pipeline
        from troubleshoot.sources import FactsSource, Sources

        sources = Sources([log], [FactsSource(facts, ORIGIN)] if facts is not None else [])
        return self.told(pipeline.diagnose_scanned(scanned, sources, self.ruleset).diagnoses, failed)

    def so_far(self, tail: LogTail | None, facts: Mapping | None) -> list[Diagnosis]:
        """While the job runs: the log's lines written since the last call (`tail`: None when
        the log cannot be read back) with the facts so far, judged as `final` judges a job that
        did not fail."""
        from troubleshoot import pipeline
        from troubleshoot.sources import FactsSource, Sources

        chunk = tail.new_lines() if tail is not None else b""
        if not chunk and facts is None:
            return []
        sources = Sources([tail.source] if chunk else [], [FactsSource(facts, ORIGIN)] if facts is not None else [])
        found = pipeline.diagnose_sources(sources, self.ruleset, opener=lambda _: io.BytesIO(chunk))
        return self.told(found.diagnoses, failed=False)

    @staticmethod
    def retracted(said: Iterable[Diagnosis], final: Iterable[Diagnosis]) -> list[Diagnosis]:
        """What was said while the job ran that the final diagnosis no longer holds (memory that
        climbed at the start and then levelled off)."""
        kept = {d.rule.id for d in final}
        return [d for d in said if d.rule.id not in kept]
