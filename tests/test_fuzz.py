"""Property-based fuzzing of every input parser: random bytes, YAML, JSON, conditions, snapshot
numbers of any size, journals of any shape and the ids given to `undo`.

Bounded for CI (about a minute in all). A long run:
    TROUBLESHOOT_FUZZ=long python -m pytest tests/test_fuzz.py -q
(20x the examples; the number of inputs tried is printed at the end of the run).
"""

import io
import json
import os
import re
import string
import tempfile
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from troubleshoot.engine import conditions, yamldoc
from troubleshoot.engine.condparse import ConditionError
from troubleshoot.engine.loader import load_rule_file
from troubleshoot.engine.ruleset import load_ruleset
from troubleshoot.engine.diagnose import scan_patterns
from troubleshoot.scan import hyperscan_available, re2_available, scan_stream
from forcefork import forced_fork
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
        d = scan_stream(io.BytesIO(data), PATTERNS, "hyperscan", chunk_size=chunk, threads=2)
        assert summary(a) == summary(d)
        with tempfile.NamedTemporaryFile() as w, open(w.name, "rb") as f:  # cut into ranges, one process each
            w.write(data)
            w.flush()
            with forced_fork():
                e = scan_stream(f, PATTERNS, "hyperscan", chunk_size=chunk, threads=2)
            assert summary(a) == summary(e) and (e.total_lines, e.total_bytes) == (a.total_lines, a.total_bytes)


log_lines = st.lists(st.one_of(st.binary(max_size=48), st.sampled_from(SIGNATURES)), min_size=8, max_size=80).map(
    b"\n".join)


@budget(100)
@given(log_lines, st.sampled_from([7, 64]), st.sampled_from([1, 2, 3]))
def test_ranges_scanned_by_forked_processes_agree_with_one_process(data, chunk, threads):
    TRIED["scanner ranges"] += 1
    a = scan_stream(io.BytesIO(data), PATTERNS, "re", chunk_size=chunk)
    engine = "hyperscan" if hyperscan_available() else None
    with tempfile.NamedTemporaryFile() as w, open(w.name, "rb") as f:
        w.write(data)
        w.flush()
        with forced_fork():
            b = scan_stream(f, PATTERNS, engine, chunk_size=chunk, threads=threads)
        assert f.read() == b""
    assert summary(a) == summary(b) and (a.total_lines, a.total_bytes) == (b.total_lines, b.total_bytes)


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
    except ConditionError as exc:
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


huge = st.sampled_from([10**4000, -(10**4000), 2**63, 2**64 + 1, -(2**63) - 1, 10**309, 10**30])
big_numbers = st.recursive(st.one_of(huge, st.integers(), st.floats(allow_nan=True, allow_infinity=True)),
                           lambda c: st.one_of(st.lists(c, max_size=4), st.dictionaries(st.sampled_from(
                               ["driver_version", "mem_total_mib", "nofile_soft", "count", "temperature_c", "x"]), c,
                               max_size=4)), max_leaves=12)
NUMERIC_FACTS = [("io", "mem_total_mib"), ("io", "mem_available_mib"), ("io", "shm_size_mib"), ("io", "nr_open"),
                 ("io", "nofile_soft"), ("nvml", "cuda_driver_version"), ("fabric_manager", "nvswitch_count")]


@budget(300)
@given(st.lists(st.tuples(st.sampled_from(NUMERIC_FACTS), big_numbers), max_size=6), st.booleans())
def test_snapshot_numbers_of_any_size_never_raise(tmp_path_factory, values, as_text):
    """Huge integers (4000 digits: past Python's int-to-text limit), 2**64, floats past double:
    from a dict or from JSON text, then through the facts-reading code and the conditions."""
    TRIED["snapshot numbers"] += 1
    data: dict = {"schema": 1}
    for (area, key), v in values:
        data.setdefault(area, {})[key] = v
    if as_text:
        path = tmp_path_factory.mktemp("s") / "snap.json"
        path.write_text("{" + ", ".join(f'"{a}": {{' + ", ".join(f'"{k}": {_json_number(v)}' for k, v in area.items())
                                        + "}" if isinstance(area, dict) else f'"{a}": {area}'
                                        for a, area in data.items()) + "}")
        try:
            loaded = snapshot.load(path)
        except TroubleshootError:
            return
    else:
        try:
            loaded = snapshot.check(data)
        except TroubleshootError:
            return
    for src in ("io.mem_total_mib > 1024", "nvml.cuda_driver_version >= 12.4", "io.nr_open < 1048576 * 16",
                "fabric_manager.nvswitch_count > 0 and io.shm_size_mib <= io.mem_total_mib / 2"):
        conditions.evaluate(conditions.parse(src), loaded.facts)


def _json_number(v) -> str:
    """JSON text for a value, big integers written out digit by digit as a snapshot from
    elsewhere would have them (json.dumps refuses past 4300 digits)."""
    if isinstance(v, int) and not isinstance(v, bool):
        import sys

        old = sys.get_int_max_str_digits()
        sys.set_int_max_str_digits(0)
        try:
            return str(v)
        finally:
            sys.set_int_max_str_digits(old)
    import json

    return json.dumps(v, default=str)


step = st.fixed_dictionaries({}, optional={
    "index": st.one_of(st.integers(-3, 10**6), st.text(max_size=3), st.none()),
    "kind": st.one_of(st.sampled_from(["write", "merge", "line", "command", "env", "advice", "rm"]), st.integers()),
    "status": st.one_of(st.sampled_from(["pending", "done", "failed", "unchanged", "skipped", "shown", "x"]), st.none()),
    "target": st.sampled_from(["ROOT/etc/a.conf", "ROOT/../escape", "/etc/passwd", "relative/x", "ROOT", "ROOT/a\x00b",
                               "ROOT/link/x", 7, None]),
    "existed": st.one_of(st.booleans(), st.none(), st.text(max_size=2)),
    "backup": st.sampled_from(["backups/0", "backups/1", "../../etc/shadow", "after/0", "backups/x", 3]),
    "after": st.sampled_from(["after/0", "after/1", "/etc/passwd", "backups/0"]),
    "argv": st.one_of(st.lists(st.text(max_size=5), max_size=3), st.text(max_size=5), st.none()),
    "undo": st.one_of(st.lists(st.text(max_size=5), max_size=3), st.integers(), st.none()),
})
VALID_STEP = {"index": 0, "kind": "line", "status": "done", "title": "t", "target": "ROOT/etc/a.conf", "existed": True,
              "backup": "backups/0", "after": "after/0"}
VALID_JOURNAL = {"schema": 1, "id": "SELF", "fixer": "ramdisk", "started": "2026-01-01T00:00:00+00:00",
                 "status": "applied", "root": "ROOT", "steps": [VALID_STEP]}
# Mostly valid journals with a few fields changed (they reach the undo itself), and any JSON at all.
mutated_step = st.builds(lambda over: {**VALID_STEP, **over}, step)
journal_doc = st.one_of(json_values, st.builds(lambda over: {**VALID_JOURNAL, **over}, st.fixed_dictionaries({}, optional={
    "schema": st.one_of(st.just(1), st.integers(), st.text(max_size=2)),
    "id": st.sampled_from(["SELF", "other", 5]),
    "fixer": st.one_of(st.just("ramdisk"), st.integers()),
    "started": st.one_of(st.just("2026-01-01T00:00:00+00:00"), st.text(max_size=8), st.none()),
    "status": st.sampled_from(["applying", "applied", "failed", "verify-failed", "undone", "bogus"]),
    "root": st.sampled_from(["ROOT", "relative", 5, "ROOT/.."]),
    "steps": st.one_of(st.lists(st.one_of(st.just(VALID_STEP), mutated_step, step), max_size=5),
                       st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)),
})))
undo_ids = st.one_of(st.sampled_from(["../../x", "..", ".", "a/b", "/etc", "x\x00y", "", " ", "-rf", "~", "FOLDER"]),
                     st.text(max_size=30))


@budget(300)
@given(journal_doc, undo_ids, st.binary(max_size=40))
def test_journals_and_undo_ids_never_raise_or_act_outside_the_root(tmp_path_factory, doc, eid, raw):
    """A journal of any shape (or not JSON at all), and any id given to `undo`: a one-line
    error or a confined undo; nothing outside the sandbox root is read as a backup or touched."""
    from troubleshoot.fixes import executor, journal

    TRIED["journals"] += 1
    base = tmp_path_factory.mktemp("j")
    os.environ["XDG_STATE_HOME"] = str(base / "state")
    root = base / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "a.conf").write_bytes(b"now\n")
    outside = base / "escape"
    outside.write_bytes(b"outside\n")
    folder_name = f"20260101-000000-fuzz-{TRIED['journals']:06d}"
    folder = journal.state_dir() / folder_name
    (folder / "backups").mkdir(parents=True)
    (folder / "after").mkdir()
    (folder / "backups" / "0").write_bytes(b"before\n")
    (folder / "after" / "0").write_bytes(b"now\n")

    def fill(v):
        if isinstance(v, str):
            return v.replace("ROOT", str(root)).replace("SELF", folder_name)
        if isinstance(v, list):
            return [fill(x) for x in v]
        if isinstance(v, dict):
            return {k: fill(x) for k, x in v.items()}
        return v

    text = json.dumps(fill(doc)) if raw[:1] != b"\xff" else raw.decode("latin-1")
    (folder / "journal.json").write_text(text, encoding="utf-8")
    for target in (folder_name, eid.replace("FOLDER", folder_name)):
        try:
            executor.undo(target)
        except TroubleshootError:
            pass
        journal.entries()
    assert outside.read_bytes() == b"outside\n"
    assert sorted(p.name for p in base.iterdir()) == ["escape", "root", "state"]


def test_report_inputs_tried():
    """Runs last in this module: a one-line count for the closing note and CI log."""
    total = sum(TRIED.values())
    print(f"\nfuzz inputs tried: {dict(TRIED)} total {total}")
    assert total > 0
