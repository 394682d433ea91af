"""Logs of other accelerators get one clear answer: not an NVIDIA GPU, and the vendor's tool.
The lines are the rules' own match examples (real lines, sources noted beside them in
rules/accelerators.yaml)."""

import json

import pytest

from conftest import run_main
from troubleshoot.engine.ruleset import load_ruleset


@pytest.fixture(scope="module")
def examples():
    rs = load_ruleset(use_config=False)
    return {r.id: r.examples.match for r in rs.rules if r.id.endswith("-stack")}


@pytest.mark.parametrize("rule", ["google-tpu-stack", "xilinx-xrt-fpga-stack", "amd-rocm-hip-stack"])
def test_a_libtpu_an_xrt_and_a_rocm_log_give_accelerator_unsupported_and_nothing_else(examples, rule, tmp_path):
    for i, text in enumerate(examples[rule]):
        log = tmp_path / f"{rule}-{i}.log"
        log.write_text(text if text.endswith("\n") else text + "\n")
        p = run_main("diagnose", "--no-probe", "--format", "json", "--log", str(log))
        assert p.returncode == 0, p.stderr
        found = [(d["rule"], d["symptom"]) for d in json.loads(p.stdout)["diagnoses"]]
        assert found == [(rule, "accelerator-unsupported")], (i, text[:200], found)
