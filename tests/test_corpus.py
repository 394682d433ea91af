"""Real logs from public issue threads, labelled with their symptom: the accuracy bar.

tests/corpus/*.yaml were collected from threads other than the ones rule examples came from;
../shared/corpus/dev.yaml is the project's shared development set. The scoring is the same as
../shared/tools/eval_corpus.py: the top diagnosis must name the labelled symptom, and a case
labelled `none` must get no diagnosis of severity `error`.
"""

from pathlib import Path

import pytest
import yaml

from conftest import REPO, SHARED
from troubleshoot import pipeline
from troubleshoot.engine.ruleset import load_ruleset

CORPORA = sorted((REPO / "tests" / "corpus").glob("*.yaml")) + [SHARED / "corpus" / "dev.yaml"]


@pytest.fixture(scope="module")
def shipped():
    return load_ruleset(use_config=False)


def score(cases, ruleset):
    right = labelled = clean = negatives = 0
    misses = []
    for case in cases:
        ds = pipeline.run(None, ruleset=ruleset, log_text=case["log"]).diagnoses
        if case["symptom"] == "none":
            negatives += 1
            bad = [d.rule.id for d in ds if d.severity == "error"]
            clean += not bad
            if bad:
                misses.append((case["id"], "none", bad))
        else:
            labelled += 1
            ok = bool(ds) and ds[0].symptom == case["symptom"]
            right += ok
            if not ok:
                misses.append((case["id"], case["symptom"], [d.symptom for d in ds[:3]]))
    return right, labelled, clean, negatives, misses


@pytest.mark.parametrize("path", CORPORA, ids=lambda p: p.parent.name + "/" + p.name)
def test_corpus_accuracy(path: Path, shipped):
    if not path.exists():
        pytest.skip(f"{path} not present")
    cases = yaml.safe_load(path.read_text())
    right, labelled, clean, negatives, misses = score(cases, shipped)
    top1 = right / max(labelled, 1)
    clean_rate = clean / max(negatives, 1)
    print(f"{path.name}: top1 {top1:.3f} ({right}/{labelled}), negatives clean {clean}/{negatives}, misses {misses}")
    assert top1 >= 0.9, misses
    assert clean_rate >= 0.8, misses


def test_corpus_cases_are_well_formed():
    ids = set()
    taxonomy = set(yaml.safe_load((REPO / "rules" / "symptoms.yaml").read_text())["symptoms"]) | {"none"}
    for path in CORPORA[:-1]:
        for case in yaml.safe_load(path.read_text()):
            assert {"id", "symptom", "source", "log"} <= set(case), (path, case.get("id"))
            assert case["symptom"] in taxonomy, (path, case["id"])
            assert case["id"] not in ids, case["id"]
            ids.add(case["id"])
