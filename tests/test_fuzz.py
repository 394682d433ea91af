"""Property-based fuzzing of every input parser: random bytes, YAML, JSON, conditions.

Bounded for CI (about a minute in all). A long run:
    TROUBLESHOOT_FUZZ=long python -m pytest tests/test_fuzz.py -q
(20x the examples; the number of inputs tried is printed at the end of the run).
"""

import io
import os
import re
import string
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from troubleshoot.engine import conditions, yamldoc
from troubleshoot.engine.loader import load_rule_file
from troubleshoot.engine.ruleset import load_ruleset
from troubleshoot.engine.diagnose import scan_patterns
from troubleshoot.engine.scanner import hyperscan_available, re2_available, scan_stream
from troubleshoot.errors import TroubleshootError
from troubleshoot import snapshot

pytestmark = pytest.mark.slow  # its own CI step (python -m pytest -m slow)

LONG = os.environ.get("TROUBLESHOOT_FUZZ") == "long"
TRIED: Counter = Counter()


def budget(n: int):
    return settings(max_examples=n * (20 if LONG else 1), deadline=None, derandomize=not LONG,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


SHIPPED = load_ruleset(use_config=False)
PATTERNS = scan_patterns(SHIPPED.rules)
SIGNATURES = [b"RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB", b"NCCL WARN Call to ibv_create_qp failed",
              b"NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python, GPU has fallen off the bus.",
              b"Traceback (most recent call last):", b"\x1b[31m", b"\x1b[0m", b"\r", b"\r\n", b"\n", b"\x00", b"\xff\xfe",
              "é漢字".encode(), "é".encode("latin-1"), b"Bus error", b"killed by signal: Killed"]

log_bytes = st.lists(st.one_of(st.binary(max_size=64), st.sampled_from(SIGNATURES)), max_size=60).map(b"".join)


def summary(result):
    return {k: (v.count, tuple(h.line for h in v.lines)) for k, v in result.hits.items()}


@budget(200)
@given(log_bytes, st.sampled_from([7, 64, 4096]))
def test_scanner_never_fails_and_engines_agree(data, chunk):
    TRIED["scanner"] += 1
    a = scan_stream(io.BytesIO(data), PATTERNS, "re", chunk_size=chunk)
    want_lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    assert a.total_lines == want_lines
    if re2_available():
        b = scan_stream(io.BytesIO(data), PATTERNS, "re2", chunk_size=chunk)
        assert summary(a) == summary(b)
    if hyperscan_available():
        c = scan_stream(io.BytesIO(data), PATTERNS, "hyperscan", chunk_size=chunk)
        assert summary(a) == summary(c)


yaml_text = st.one_of(
    st.text(alphabet=string.printable + "éü漢&*!|>-:[]{}'\"#", max_size=400),
    st.lists(st.sampled_from(["rules:", "- id: x", "  symptom: cuda-oom", "  title: t", "  severity: error",
                              "  match: {log: ['(x']}", "  match:", "    log: ['.*']", "    facts: ['a <']",
                              "  explain: x", "  examples: {match: [x], no_match: [y]}", "  bogus: 12.10", "  id: y",
                              "&a [1, *a]", "- *a", "  confidence: 1e999", "  confidence: .nan", "disable: [x]",
                              "\t- bad indent", "%YAML 1.1", "--- !!python/object:os.system", "  context: [{when: 'x'}]"]),
             max_size=30).map("\n".join),
)


@budget(300)
@given(yaml_text)
def test_rule_loader_reports_problems_never_raises(tmp_path_factory, text):
    TRIED["rule files"] += 1
    path = tmp_path_factory.mktemp("r") / "f.yaml"
    path.write_text(text, encoding="utf-8")
    rf = load_rule_file(path, "fuzz", SHIPPED.taxonomy)
    for p in rf.problems:
        assert str(path) in str(p)


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(min_value=-(10**30), max_value=10**30), st.floats(allow_nan=True),
              st.text(max_size=20)),
    lambda children: st.one_of(st.lists(children, max_size=5), st.dictionaries(st.text(max_size=10), children, max_size=5)),
    max_leaves=40)
snapshot_like = st.fixed_dictionaries({"schema": st.one_of(st.integers(-2, 5), st.text(max_size=3), st.none())},
                                      optional={area: json_values for area in ("nvml", "kernel", "io", "docker", "env", "frameworks")})


@budget(400)
@given(st.one_of(snapshot_like, json_values))
def test_snapshot_check_errors_cleanly(data):
    TRIED["snapshots"] += 1
    try:
        loaded = snapshot.check(data)
    except TroubleshootError:
        return
    assert isinstance(loaded.facts, dict)


cond_text = st.one_of(st.text(max_size=60), st.lists(st.sampled_from(
    ["nvml.gpus", "any(", "g in", ":", ")", "g.x", "<", "==", "'12.10'", "12.10", "and", "or", "not", "[", "]", ",",
     "version(", "bytes(", "len(", "exists(", "matches", "'(x'", "-", "*", "/", "0", "1e9", "null", "true"]),
    max_size=20).map(" ".join))
facts = st.dictionaries(st.sampled_from(["nvml", "g", "x", "log"]), json_values, max_size=4)


@budget(600)
@given(cond_text, facts)
def test_conditions_parse_or_say_why(src, env):
    TRIED["conditions"] += 1
    try:
        tree = conditions.parse(src)
    except conditions.ConditionError as exc:
        assert re.search(r"column \d+", str(exc))
        return
    conditions.evaluate(tree, env)


@budget(400)
@given(yaml_text)
def test_yaml_loader_only_raises_yaml_errors(text):
    TRIED["yaml"] += 1
    try:
        yamldoc.load(text)
    except yamldoc.YamlError:
        pass


def test_report_inputs_tried():
    """Runs last in this module: a one-line count for the closing note and CI log."""
    total = sum(TRIED.values())
    print(f"\nfuzz inputs tried: {dict(TRIED)} total {total}")
    assert total > 0
