"""Seven hundred thousand rule files, rule folders, conditions and snapshots, each a seeded
mutation of a real one (the shipped rules, the snapshot fixture; tests/fuzzkit.py): loaded,
then used as the tool uses them (snapshots redacted, printed, diagnosed from). Passes only with
no traceback (an exception other than the one-line errors the tool prints), no hang (an input
past its deadline), and every rule problem naming its file. With tests/test_fuzz_logs.py:
1,010,000 inputs in all.

    python -m pytest -m slow tests/test_fuzz_files.py -q -s           the counts and times
    TROUBLESHOOT_FUZZ_SCALE=0.01 ...                                   a hundredth of the inputs
    TROUBLESHOOT_FUZZ_SEED=7 ...                                       other inputs
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import REPO
from fuzzkit import INPUT_SECONDS, SCALE, SEED, Findings, Mutator, deadline
from troubleshoot import pipeline, snapshot
from troubleshoot.engine import conditions
from troubleshoot.engine.condparse import ConditionError
from troubleshoot.engine.loader import load_rule_file, load_rule_text
from troubleshoot.engine.ruleset import load_ruleset
from troubleshoot.engine.yamldoc import YamlError
from troubleshoot.errors import TroubleshootError
from troubleshoot.report import probe_text

pytestmark = pytest.mark.slow

SHIPPED = load_ruleset(use_config=False)
BASE_SNAPSHOT = (REPO / "tests" / "fixtures" / "snapshots" / "base.json").read_text()
SNAPSHOTS, RULE_FILES, CONDITIONS = (round(n * SCALE) for n in (250_000, 150_000, 310_000))


def snapshot_input(m: Mutator, i: int, tmp: Path):
    doc = json.loads(BASE_SNAPSHOT)
    for _ in range(m.rng.choice((1, 1, 2, 4))):
        doc = m.value(doc)
    if i % 20:
        return doc, lambda: snapshot.check(doc)
    path = tmp / f"snap-{i % 7}.json"
    path.write_bytes(m.json_text(doc))
    return path, lambda: snapshot.load(path)


def use_snapshot(loaded, i: int) -> None:
    """What the tool does with a snapshot once loaded: redact it, print it, diagnose from it."""
    if i % 10 == 0:
        snapshot.redact(loaded.facts)
    if i % 50 == 0:
        probe_text.render(loaded.facts)
    if i % 400 == 0:
        pipeline.run(None, ruleset=SHIPPED, facts=loaded.facts, log_text="")


def test_a_quarter_million_snapshots_load_or_say_why(tmp_path):
    found = Findings("snapshots")
    m = Mutator(SEED + 1)
    for i in range(SNAPSHOTS):
        data, load = snapshot_input(m, i, tmp_path)
        try:
            with deadline(INPUT_SECONDS):
                try:
                    loaded = load()
                except TroubleshootError:
                    continue
                use_snapshot(loaded, i)
        except Exception as exc:
            found.failed("snapshot", data, exc)
        finally:
            found.tried += 1
    found.check()


def rule_chunks() -> list[str]:
    """Each shipped rule as its own YAML text (a `- id:` item of a rules file)."""
    out = []
    for path in sorted((REPO / "rules").glob("*.yaml")):
        if path.name in ("symptoms.yaml", "xid-catalog.yaml"):
            continue
        out += [c for c in re.split(r"(?m)^(?=- id:)", path.read_text()) if c.startswith("- id:")]
    return out


def rule_input(m: Mutator, chunks: list[str]) -> str:
    text = "\n".join(m.rng.choice(chunks) for _ in range(m.rng.choice((1, 1, 2, 3))))
    for _ in range(m.rng.choice((1, 1, 2, 4))):
        text = m.text(text)
    return ("rules:\n" + text) if m.rng.random() < 0.2 else text


def load_rules(found: Findings, text: str, path: Path, as_file: bool) -> None:
    if as_file:
        path.write_bytes(text.encode("utf-8", "surrogatepass"))
        rf = load_rule_file(path, "fuzz", SHIPPED.taxonomy)
    else:
        rf = load_rule_text(text, path, "fuzz", SHIPPED.taxonomy)
    unnamed = [p for p in rf.problems if str(path) not in str(p)]
    if unnamed:
        found.tracebacks.append(f"a problem that does not name its file: {unnamed[0]}\n  input: {text[:300]!r}")


def test_a_hundred_and_fifty_thousand_rule_files_and_folders_load_or_say_why(tmp_path):
    found = Findings("rule files")
    m = Mutator(SEED + 2)
    chunks = rule_chunks()
    folder = tmp_path / "team-rules"
    folder.mkdir()
    for i in range(RULE_FILES):
        text = rule_input(m, chunks)
        try:
            with deadline(INPUT_SECONDS):
                load_rules(found, text, folder / f"r{i % 5}.yaml", as_file=i % 10 == 0)
                if i % 1000 == 999:  # a whole folder: the files above, team symptoms and all
                    load_ruleset([folder], include_shipped=False, use_config=False)
        except Exception as exc:
            found.failed("rule file", text, exc)
        finally:
            found.tried += 1
    found.check()


def test_three_hundred_thousand_conditions_parse_or_say_why():
    found = Findings("conditions")
    m = Mutator(SEED + 3)
    sources = sorted({c.source for r in SHIPPED.rules for c in r.facts} |
                     {ctx.when.source for r in SHIPPED.rules for ctx in r.context})
    facts = json.loads(BASE_SNAPSHOT)
    for i in range(CONDITIONS):
        src = m.text(m.rng.choice(sources)) if m.rng.random() < 0.9 else m.rng.choice(sources)
        env = m.value(facts) if i % 10 == 0 else facts
        try:
            with deadline(INPUT_SECONDS):
                try:
                    tree = conditions.parse(src)
                except (ConditionError, YamlError):
                    continue
                conditions.evaluate(tree, env)
        except Exception as exc:
            found.failed("condition", src, exc)
        finally:
            found.tried += 1
    found.check()
