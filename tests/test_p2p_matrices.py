"""Bandwidth matrices pasted into a log (troubleshoot.paste.p2p): real outputs of the CUDA sample
p2pBandwidthLatencyTest and of nvbandwidth (tests/fixtures/p2p/SOURCE.md) read as facts, and
the diagnoses they give."""

import json
from pathlib import Path

import pytest
from conftest import run_main

from troubleshoot.paste import p2p

FIXTURES = Path(__file__).parent / "fixtures" / "p2p"


def facts(name: str) -> dict:
    found = p2p.p2p((FIXTURES / name).read_text().splitlines())
    return found.facts["p2p"] if found else {}


def test_a_gpu_copying_from_the_host_at_half_the_others_rate_is_slow():
    f = facts("nvbandwidth-readme-host-to-device.txt")
    assert f["slow_gpus"] == [0] and f["slow_best_gbps"] == 6.2 and f["others_best_gbps"] == 12.36
    assert f["best_of"] == "the host" and f["gpus"] == 2


def test_pairs_that_differ_by_nvlink_topology_are_no_slow_gpu():
    # DGX-1: pairs at ~97, ~48 and ~11 GB/s, but every GPU has a ~97 GB/s peer
    f = facts("dgx1-v100-nvlink-hybrid-cube-mesh.txt")
    assert "slow_gpus" not in f and f["gpus"] == 8
    assert [m.title for m in p2p.matrices((FIXTURES / "dgx1-v100-nvlink-hybrid-cube-mesh.txt").read_text().splitlines())] \
        == ["Bidirectional P2P=Disabled Bandwidth Matrix (GB/s)", "Bidirectional P2P=Enabled Bandwidth Matrix (GB/s)"]


def test_peer_copies_slower_than_through_host_memory_are_told():
    f = facts("nccl-p2p-writes-below-host-path.txt")
    assert f["p2p_slower_than_host"] is True and f["p2p_enabled_gbps"] == 9.96 and f["p2p_disabled_gbps"] == 22.24
    assert "slow_gpus" not in f  # every GPU equally slow: a path, not one GPU


def test_a_matrix_cut_short_or_wrapped_is_not_read():
    lines = (FIXTURES / "dgx1-v100-nvlink-hybrid-cube-mesh.txt").read_text().splitlines()
    last = max(i for i, t in enumerate(lines) if t.startswith("     7 "))
    cut = lines[:last] + lines[last + 1:]
    assert [m.title for m in p2p.matrices(cut)] == ["Bidirectional P2P=Disabled Bandwidth Matrix (GB/s)"]
    wrapped = [t if not t.startswith("     3 ") else t[:30] for t in lines]
    assert p2p.matrices(wrapped) == []


@pytest.mark.parametrize("name,rule", [
    ("nvbandwidth-readme-host-to-device.txt", "p2p-matrix-slow-gpu"),
    ("nccl-p2p-writes-below-host-path.txt", "p2p-slower-than-host-path"),
    ("dgx1-v100-nvlink-hybrid-cube-mesh.txt", None),
])
def test_each_matrix_gives_its_diagnosis(name, rule):
    p = run_main("diagnose", "--no-probe", "--format", "json", "--log", str(FIXTURES / name))
    doc = json.loads(p.stdout)
    assert [d["rule"] for d in doc["diagnoses"]][:1] == ([rule] if rule else [])
    assert doc["facts_source"] is None  # a benchmark's numbers are no facts of the machine's software
    if rule:
        top = doc["diagnoses"][0]
        assert top["symptom"] == "pcie-degraded" and "{" not in top["explain"]
