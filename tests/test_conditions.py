import pytest

from troubleshoot.engine.condparse import ConditionError
from troubleshoot.engine.conditions import UNKNOWN, evaluate, parse, paths
from troubleshoot.values import parse_bytes, parse_version

FACTS = {
    "nvml": {
        "driver_version": "470.82.01",
        "cuda_driver_version": "11.4",
        "gpus": [
            {"index": 0, "pcie_gen_current": 1, "pcie_gen_max": 4, "temperature_c": 50, "compute_mode": "Default"},
            {"index": 1, "pcie_gen_current": 4, "pcie_gen_max": 4, "temperature_c": 91, "compute_mode": "Default"},
        ],
    },
    "frameworks": {"torch": {"version": "2.1.0+cu121", "cuda": "12.1"}, "jax": None},
    "docker": {"installed": True, "runtimes": ["runc", "io.containerd.runc.v2"]},
    "kernel": {"modules": {"nouveau": False, "nvidia": True}},
}


def ev(src, facts=FACTS):
    return evaluate(parse(src), facts)


@pytest.mark.parametrize("src, want", [
    ("nvml.driver_version < 525", True),
    ("nvml.driver_version >= 470.82", True),
    ("nvml.driver_version == '470.82.1'", True),
    ("version(frameworks.torch.cuda) > version(nvml.cuda_driver_version)", True),
    ("frameworks.torch.cuda > nvml.cuda_driver_version", True),
    ("'12.10' > '12.9'", True),
    ("nvml.cuda_driver_version < 12.10", True),
    ("frameworks.torch.version >= '2.1'", True),
    ("'nvidia' not in docker.runtimes", True),
    ("'runc' in docker.runtimes", True),
    ("kernel.modules.nouveau == true", False),
    ("not kernel.modules.nouveau and kernel.modules.nvidia", True),
    ("any(g in nvml.gpus: g.pcie_gen_current < g.pcie_gen_max)", True),
    ("all(g in nvml.gpus: g.temperature_c < 85)", False),
    ("count(g in nvml.gpus: g.temperature_c > 85) == 1", True),
    ("len(nvml.gpus) > 1 and exists(frameworks.torch)", True),
    ("frameworks.jax == null", True),
    ("exists(frameworks.tensorflow)", False),
    ("nvml.gpus[1].temperature_c * 2 > 180", True),
    ("frameworks.torch.version matches '^2\\\\.1'", True),
    ("lower(nvml.gpus[0].compute_mode) == 'default'", True),
    ("(1 < 2 or x.y) and true", True),
])
def test_conditions(src, want):
    assert ev(src) is want


@pytest.mark.parametrize("src", [
    "kernel.modules.nvidia_uvm == true",
    "not kernel.modules.nvidia_uvm",
    "nvml.gpus[7].temperature_c > 1",
    "any(g in nvml.gpus: g.power_w > 300)",
    "version(frameworks.torch.nope) > 1",
])
def test_missing_facts_are_unknown_not_false(src):
    assert ev(src) is UNKNOWN


def test_kleene_logic_lets_known_parts_decide():
    assert ev("missing.fact or 1 == 1") is True
    assert ev("missing.fact and 1 == 2") is False
    assert ev("missing.fact and 1 == 1") is UNKNOWN


def test_missing_paths_are_reported():
    missing = []
    evaluate(parse("kernel.modules.nvidia_uvm and docker.nvidia_runtime"), FACTS, missing)
    assert missing == ["kernel.modules.nvidia_uvm", "docker.nvidia_runtime"]


def test_paths_lists_facts_but_not_bound_variables():
    assert paths(parse("any(g in nvml.gpus: g.x > 1) and docker.installed")) == ["nvml.gpus", "docker.installed"]


@pytest.mark.parametrize("src, col", [
    ("driver <", 9),
    ("a = b", 3),
    ("__import__('os')", 1),
    ("any(x in y)", 11),
    ("a.b(1)", 4),
    ("'unterminated", 1),
])
def test_bad_conditions_name_the_column(src, col):
    with pytest.raises(ConditionError) as exc:
        parse(src)
    assert exc.value.column == col


def test_no_attribute_access_or_eval():
    # Python attribute names are just missing keys here.
    assert ev("nvml.__class__.__name__ == 'dict'") is UNKNOWN
    assert ev("docker.runtimes.__len__ > 0") is UNKNOWN


def test_captured_values_compare_as_sizes():
    facts = {"log": {"requested": "2.00 GiB", "unallocated": "3.10 GiB"}}
    assert ev("bytes(log.unallocated) >= bytes(log.requested)", facts) is True
    assert ev("bytes(log.unallocated) >= bytes('not a size')", facts) is UNKNOWN


def test_value_parsers():
    assert parse_bytes("2.14 GiB") == int(2.14 * (1 << 30))
    assert parse_bytes("512MB") == 512_000_000 and parse_bytes(7) == 7
    assert parse_version("2.1.0+cu121").parts == (2, 1, 0)
    assert parse_version("12.1") == parse_version("12.1.0")
    assert parse_version("470.82.01") < parse_version("525")
