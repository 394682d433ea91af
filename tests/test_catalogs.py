"""Message catalogs (rules/catalogs/): rules that refer to them, and the catalogs themselves, each
rebuilt by its generator from the checked-in excerpt of its emitter's source."""

import json
import sys
import textwrap
from pathlib import Path

import pytest

from troubleshoot.engine import catalogs
from troubleshoot.engine.diagnose import diagnose, scan_patterns
from troubleshoot.engine.ruleset import load_ruleset
from troubleshoot.report.views import diagnosis_record
from troubleshoot.scan import scan_text

REPO = Path(__file__).resolve().parents[1]
EXCERPTS = REPO / "tests" / "fixtures" / "catalog-sources"

DEMO = {
    "catalog": {"id": "demo-status", "name": "Demo status codes", "source": "demo/demo.h", "version": "1.2",
                "url": "https://example.org/demo.h"},
    "entries": [
        {"key": "demoSuccess", "code": 0, "message": "no error", "severity": "info"},
        {"key": "demoErrorIllegalAddress", "code": 700, "message": "an illegal memory access was encountered",
         "doc": "The device touched an invalid address.", "symptom": "illegal-memory-access", "severity": "error",
         "action": "restart-app", "reason": "The process must be relaunched."},
        {"key": "demoErrorEcc", "code": 214, "message": "uncorrectable ECC error encountered",
         "symptom": "gpu-hardware-fault", "severity": "error", "action": "reset-gpu"},
        {"key": "demoErrorBusy", "code": 46, "message": "all CUDA-capable devices are busy or unavailable",
         "symptom": "device-busy", "severity": "error"},
        {"key": "demo_rpc_timeout", "pattern": r"Timeout after \d+ms of waiting for RPC response from GPU\d+",
         "symptom": "gpu-hardware-fault", "severity": "error", "action": "reboot"},
    ],
}


@pytest.fixture
def demo_catalog(tmp_path, monkeypatch):
    folder = tmp_path / "catalogs"
    folder.mkdir()
    (folder / "demo-status.json").write_text(json.dumps(DEMO))
    monkeypatch.setattr(catalogs, "folder", lambda: folder)
    catalogs.names.cache_clear()
    catalogs.load.cache_clear()
    yield folder
    catalogs.names.cache_clear()
    catalogs.load.cache_clear()


def _rule(extra: str, patterns: list[str], rid: str = "demo-error", explain: str = "Demo {entry_key}.",
          example: str = "demoErrorEcc") -> str:
    return textwrap.dedent(f"""\
    - id: {rid}
      symptom: illegal-memory-access
      title: "Demo error {{entry_key}}"
      severity: warning
      catalog: demo-status
      match:
        log: {json.dumps(patterns)}
      explain: "{explain}"
      examples: {{match: [{json.dumps(example)}], no_match: [nothing]}}
    """) + textwrap.indent(textwrap.dedent(extra), "  ")


def _load(rules_dir, text):
    rs = load_ruleset([rules_dir({"r.yaml": text})], include_shipped=False, use_config=False)
    return rs


def _run(rs, log):
    return diagnose(rs.rules, scan_text(log, scan_patterns(rs.rules)), None)


def test_each_entry_a_line_names_is_a_diagnosis_with_the_entry_symptom_and_action(demo_catalog, rules_dir):
    rs = _load(rules_dir, _rule("", [r"\b(?P<entry>demo(?:Error)?[A-Z]\w+)\b", r"code=(?P<entry>\d+)"],
                                explain="{entry_key} ({entry_code}): {entry_doc} {entry_reason}"))
    assert rs.problems == []
    log = "x demoErrorIllegalAddress at step 3\nok\nfailed with code=214\nreturned demoSuccess\n"
    ds = {d.entry["key"]: d for d in _run(rs, log)}
    assert set(ds) == {"demoErrorIllegalAddress", "demoErrorEcc"}  # demoSuccess means nothing
    ima, ecc = ds["demoErrorIllegalAddress"], ds["demoErrorEcc"]
    assert (ima.symptom, ima.severity, ima.action, ima.first_line) == ("illegal-memory-access", "error", "restart-app", 1)
    assert (ecc.symptom, ecc.action, ecc.first_line) == ("gpu-hardware-fault", "reset-gpu", 3)
    assert ima.title == "Demo error demoErrorIllegalAddress"
    assert "demoErrorIllegalAddress (700): The device touched an invalid address. The process must be relaunched." in ima.explain
    record = diagnosis_record(ima)
    assert record["catalog"] == {"catalog": "demo-status", "version": "1.2", "key": "demoErrorIllegalAddress", "code": 700}
    assert record["action"] == "restart-app"


def test_a_pattern_names_every_printed_message_of_a_catalog(demo_catalog, rules_dir):
    rs = _load(rules_dir, _rule("", [r"(?:CUDA|DEMO) error: (?P<entry>{catalog:demo-status})"],
                                example="DEMO error: uncorrectable ECC error encountered"))
    assert rs.problems == []
    log = ("RuntimeError: DEMO error: an illegal memory access was encountered\n"
           "DEMO error: no error\n"  # an entry without a symptom is not even a form to look for
           "E DEMO error: Timeout after 4500ms of waiting for RPC response from GPU1\n")
    ds = _run(rs, log)
    assert sorted((d.entry["key"], d.first_line) for d in ds) == [("demoErrorIllegalAddress", 1), ("demo_rpc_timeout", 3)]
    assert next(d for d in ds if d.entry["key"] == "demo_rpc_timeout").action == "reboot"


def test_a_rule_that_covers_an_entry_takes_it_from_the_catalog_rule(demo_catalog, rules_dir):
    text = _rule("", [r"\b(?P<entry>demoError\w+)\b"]) + textwrap.dedent("""\
    - id: demo-ecc-specific
      symptom: gpu-hardware-fault
      title: ECC, explained well
      severity: error
      covers: {demo-status: [demoErrorEcc]}
      match:
        log: ['demoErrorEcc']
      explain: "More to say."
      examples: {match: [demoErrorEcc], no_match: [nothing]}
    """)
    rs = _load(rules_dir, text)
    assert rs.problems == []
    ds = _run(rs, "demoErrorEcc\ndemoErrorIllegalAddress\n")
    assert sorted((d.rule.id, (d.entry or {}).get("key")) for d in ds) == [
        ("demo-ecc-specific", None), ("demo-error", "demoErrorIllegalAddress")]


@pytest.mark.parametrize("extra,patterns,complaint", [
    ("covers: {demo-status: [demoErrorGone]}\n", [r"(?P<entry>demo\w+)"], "catalog 'demo-status' has no entry 'demoErrorGone'"),
    ("covers: {nvrm-old: [x]}\n", [r"(?P<entry>demo\w+)"], "covers: no message catalog 'nvrm-old'"),
    ("", [r"demo (?P<entry>{catalog:demo-gone})"], "names no message catalog 'demo-gone'"),
    ("", [r"demo\w+"], "'catalog: demo-status' needs a match.log pattern capturing (?P<entry>...)"),
])
def test_a_rule_naming_what_no_catalog_has_does_not_load(demo_catalog, rules_dir, extra, patterns, complaint):
    rs = _load(rules_dir, _rule(extra, patterns))
    assert rs.rules == []
    assert any(complaint in p.message for p in rs.problems), [p.message for p in rs.problems]


def test_lookup_by_key_code_message_and_format(demo_catalog):
    cat = catalogs.load("demo-status")
    assert cat.lookup("demoErrorEcc").code == 214
    assert cat.lookup("700").key == cat.lookup("0x2bc").key == "demoErrorIllegalAddress"
    assert cat.lookup("An Illegal Memory Access Was Encountered").key == "demoErrorIllegalAddress"
    assert cat.lookup("Timeout after 1ms of waiting for RPC response from GPU0").key == "demo_rpc_timeout"
    assert cat.lookup("something else") is None and cat.lookup("  ") is None


def test_a_catalog_is_kept_across_runs_until_its_file_changes(demo_catalog):
    """The next run reads a catalog with its lookup tables from the per-user cache, and finds
    what the file gives; a changed file is read again."""
    first = catalogs.load("demo-status")
    catalogs.load.cache_clear()
    kept = catalogs.load("demo-status")
    assert kept is not first and kept == first and "_patterns" in kept.__dict__
    assert "_compiled" not in kept.__dict__ and "_looked_up" not in kept.__dict__  # memos are not kept
    assert kept.lookup("Timeout after 7ms of waiting for RPC response from GPU3").key == "demo_rpc_timeout"
    changed = json.loads(json.dumps(DEMO))
    changed["entries"][2]["message"] = "uncorrectable ECC error seen"
    (demo_catalog / "demo-status.json").write_text(json.dumps(changed) + " ")  # another size: another stamp
    catalogs.load.cache_clear()
    assert catalogs.load("demo-status").lookup("uncorrectable ECC error seen").key == "demoErrorEcc"
    # A cache entry that is not a catalog (damaged, or planted) reads as missing.
    entry = catalogs._CACHE.path(str(demo_catalog / "demo-status.json"))  # written by this test: its own file
    entry.write_bytes(entry.read_bytes()[:-9] + b"garbage!.")
    catalogs.load.cache_clear()
    assert catalogs.load("demo-status").lookup("demoErrorEcc").code == 214


# ------------------------------------------------------------------ the shipped catalogs

def _generators():
    sys.path.insert(0, str(REPO))
    try:
        from tools.catalogs.registry import generators
        return generators()
    finally:
        sys.path.remove(str(REPO))


SHIPPED = sorted(p.stem for p in (REPO / "rules" / "catalogs").glob("*.json"))


@pytest.mark.parametrize("name", SHIPPED)
def test_a_shipped_catalog_names_its_source_and_is_rebuilt_from_the_excerpt(name):
    """Each catalog is its generator's output: rebuilt from the checked-in excerpt of its
    emitter's source, every entry equals the shipped one with that key."""
    shipped = json.loads((REPO / "rules" / "catalogs" / f"{name}.json").read_text())
    head = shipped["catalog"]
    assert head["id"] == name and all(head.get(k) for k in ("name", "source", "version", "url"))
    gens = _generators()
    assert name in gens, f"no generator in tools/catalogs makes {name}"
    excerpt = EXCERPTS / name
    assert (excerpt / "SOURCE.md").is_file()
    sys.path.insert(0, str(REPO))
    try:
        from tools.catalogs.registry import rows
        _, rebuilt = rows(name, excerpt, head["version"], strict=False)
    finally:
        sys.path.remove(str(REPO))
    by_key = {e["key"]: e for e in shipped["entries"]}
    assert rebuilt, "the excerpt gives no entry"
    for row in rebuilt:
        assert row == by_key.get(row["key"]), row["key"]


@pytest.mark.parametrize("name", SHIPPED)
def test_a_shipped_catalog_speaks_the_taxonomy_and_the_action_vocabulary(name):
    from troubleshoot.engine.symptoms import load_taxonomy
    from troubleshoot.engine.xid import actions

    taxonomy = load_taxonomy(REPO / "rules" / "symptoms.yaml")
    cat = catalogs.load(name)
    assert cat.entries
    for e in cat.entries:
        assert e.symptom is None or e.symptom in taxonomy, (e.key, e.symptom)
        assert e.action is None or e.action in actions(), (e.key, e.action)
        assert e.severity in ("error", "warning", "info")
    # every printed form compiles as the loader will use it
    import re
    for form in cat.printed_forms():
        re.compile(form)


@pytest.mark.parametrize("name", SHIPPED)
def test_a_shipped_catalog_is_its_map_applied_to_its_entries(name):
    """The map (tools/catalogs/maps/NAME.yaml) and the catalog agree: applied strictly to the
    shipped entries (every key and group it names must exist), it gives the shipped catalog.
    A map edited without regenerating the catalog fails here."""
    sys.path.insert(0, str(REPO))
    try:
        from tools.catalogs import common
        shipped = json.loads((REPO / "rules" / "catalogs" / f"{name}.json").read_text())["entries"]
        fields = {"key", "code", "message", "pattern", "doc", "where", "extra"}
        entries = [common.Entry(**{k: v for k, v in row.items() if k in fields}) for row in shipped]
        assert common.apply_map(name, entries, common.load_map(name)) == shipped
    finally:
        sys.path.remove(str(REPO))


def test_a_written_rule_keeps_its_diagnosis_and_takes_the_catalogs_first_step(demo_catalog, rules_dir):
    text = _rule("", [r"\b(?P<entry>demoError\w+)\b"]) + textwrap.dedent("""\
    - id: demo-written
      symptom: gpu-hardware-fault
      title: A written rule for the line
      severity: error
      match:
        log: ['GPU trouble: demoErrorEcc']
      explain: "Written for this message."
      examples: {match: ['GPU trouble: demoErrorEcc'], no_match: [nothing]}
    """)
    rs = _load(rules_dir, text)
    assert rs.problems == []
    [d] = _run(rs, "GPU trouble: demoErrorEcc\n")
    assert (d.rule.id, d.entry, d.action) == ("demo-written", None, "reset-gpu")


def test_a_form_whose_entry_names_a_first_step_is_looked_for_first(demo_catalog):
    forms = catalogs.load("demo-status").printed_forms()
    # the busy devices' message is longer than two forms before it, but its entry names no first step
    assert len(forms) == 4 and "busy" in forms[-1] and len(forms[-1]) > len(forms[1]) > len(forms[2])


def test_a_format_is_compiled_only_for_a_text_that_starts_as_it_does():
    """A catalog of hundreds of formats looks a printed line up without compiling them all:
    only those whose leading literal text the line starts with."""
    from troubleshoot.engine.catalogs import leading_literal

    assert leading_literal(r"NCCL WARN Call to .*? failed") == "NCCL WARN Call to "
    assert leading_literal(r"a\.b\(c\) x\d+") == "a.b(c) x"
    assert leading_literal(r"abc?d") == "ab" and leading_literal(r"ab{2}c") == "a"
    assert leading_literal(r"x\|y") == "x|y" and leading_literal(r"a[|]b") == "a"
    assert leading_literal(r"foo|bar") == leading_literal(r"ab(c|d)") == leading_literal(r"(?i)foo") == ""
    nccl = catalogs.load("nccl-warn")
    nccl.__dict__.pop("_compiled", None)
    nccl.__dict__.pop("_looked_up", None)
    line = "Call to ibv_reg_mr failed with error Cannot allocate memory"
    found = nccl.lookup(line)
    assert found is not None and found.symptom and 0 < len(nccl._compiled) < len(nccl._patterns) / 10
    assert all(line.startswith(leading_literal(form)) for form in nccl._compiled)
