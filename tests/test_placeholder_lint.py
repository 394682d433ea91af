"""A rule's placeholders are filled, or the rule gives its own words for when they cannot be:
`{name|words}`, and `rules lint` fails a placeholder the rule can fire without."""

import re
import textwrap

import pytest

from troubleshoot.engine.diagnose import diagnose, scan_patterns
from troubleshoot.engine.lint import lint
from troubleshoot.engine.placeholders import mandatory_groups, unguaranteed
from troubleshoot.engine.ruleset import load_ruleset
from troubleshoot.report.views import diagnosis_record
from troubleshoot.scan import scan_text


def _rules(rules_dir, body: str):
    return load_ruleset([rules_dir({"r.yaml": textwrap.dedent(body)})], include_shipped=False, use_config=False)


RULE = """\
- id: gpu-gone
  symptom: gpu-hardware-fault
  title: "GPU {pci|of the line} is gone"
  severity: error
  match:
    log: ['GPU (?:at (?P<pci>[0-9a-f:.]+) )?is gone']
  explain: |
    The GPU {pci|named in the line} stopped answering.
    Check it: `nvidia-smi -q -i {pci|0}`
  examples: {match: ['GPU at 0000:3b:00.0 is gone'], no_match: [nothing]}
"""


@pytest.mark.parametrize("line,title,words,command", [
    ("GPU at 0000:3b:00.0 is gone", "GPU 0000:3b:00.0 is gone", "The GPU 0000:3b:00.0 stopped", "nvidia-smi -q -i 0000:3b:00.0"),
    ("GPU is gone", "GPU of the line is gone", "The GPU named in the line stopped", "nvidia-smi -q -i 0"),
])
def test_a_value_or_the_rules_own_words_never_a_placeholder(rules_dir, line, title, words, command):
    rs = _rules(rules_dir, RULE)
    assert rs.problems == [] and lint(rs) == []
    [d] = diagnose(rs.rules, scan_text(line + "\n", scan_patterns(rs.rules)), None)
    record = diagnosis_record(d)
    assert record["title"] == title
    assert words in record["explain"] and command in record["explain"]
    assert not re.search(r"\{\w+[|}]", record["title"] + record["explain"])


def test_lint_fails_a_placeholder_the_rule_can_fire_without(rules_dir):
    rs = _rules(rules_dir, RULE.replace("{pci|named in the line}", "{pci}"))
    [p] = [p for p in lint(rs) if "names {pci}" in p.message]
    assert p.level == "error" and "explain" in p.message and "{pci|" in p.message


@pytest.mark.parametrize("pattern,mandatory", [
    (r"a (?P<x>\d+) b", {"x"}),
    (r"a (?:(?P<x>\d+) )?b", set()),
    (r"a (?P<x>\d+)|b (?P<y>\d+)", set()),
    (r"(?:a (?P<x>\d+)|b (?P<x2>\d+)) (?P<z>z)", {"z"}),
    (r"(?:(?P<x>\d+),)+ (?P<y>\w*)", {"x", "y"}),
    (r"(?:(?P<x>\d+),)* end", set()),
])
def test_mandatory_groups(pattern, mandatory):
    assert mandatory_groups(re.compile(pattern)) == mandatory


FACTS_RULE = """\
- id: old-driver
  symptom: driver-too-old
  title: Old driver
  severity: error
  match:
    facts: ['{cond}']
  explain: "Driver {{nvml.driver_version}} is old."
"""


@pytest.mark.parametrize("cond,ok", [
    ('nvml.driver_version < "470"', True),
    ('exists(nvml.driver_version) and nvml.available == true', True),
    ('nvml.driver_version < "470" or nvml.available == false', False),
    ('not (nvml.driver_version >= "470")', False),
    ('nvml.driver_version != "535.1"', False),
    ('nvml.available == true', False),
])
def test_a_fact_is_guaranteed_only_by_a_condition_that_needs_it(rules_dir, cond, ok):
    rs = _rules(rules_dir, FACTS_RULE.format(cond=cond))
    assert rs.problems == []
    assert (unguaranteed(rs.rules[0]) == []) is ok


def test_the_shipped_rules_have_no_placeholder_they_can_fire_without():
    rs = load_ruleset([], include_shipped=True, use_config=False)
    bad = [(r.id, where, name) for r in rs.rules for where, name in unguaranteed(r)]
    assert bad == []


def test_braces_the_engine_never_fills_and_whole_fix_params_need_no_words(rules_dir):
    rs = _rules(rules_dir, RULE.replace("`nvidia-smi -q -i {pci|0}`", '`torch.device(f"cuda:{rank}")` or `${DRV}`')
                + textwrap.indent(textwrap.dedent("""\
                fixes:
                  - fixer: gpu-fault
                    title: Follow the catalog
                    params: {pci: '{pci}'}
                """), "  "))
    assert rs.problems == []
    assert unguaranteed(rs.rules[0]) == []


def test_a_fallback_left_open_at_the_end_of_its_line_fails_the_lint(rules_dir):
    rs = _rules(rules_dir, RULE.replace("{pci|named in the line}", "{pci|named in\n    the line}"))
    assert any("does not close on its line" in p.message and p.level == "error" for p in lint(rs))


def test_a_capture_a_condition_needs_is_guaranteed(rules_dir):
    rs = _rules(rules_dir, """\
    - id: gpu-gone
      symptom: gpu-hardware-fault
      title: GPU gone
      severity: error
      match:
        log: ['GPU (?:at (?P<pci>[0-9a-f:.]+) )?is gone']
        facts: ['log.pci matches "^0000"']
      explain: "The GPU {pci} stopped answering."
      examples: {match: ['GPU at 0000:3b:00.0 is gone'], no_match: [nothing]}
    """)
    assert rs.problems == []
    assert unguaranteed(rs.rules[0]) == []
