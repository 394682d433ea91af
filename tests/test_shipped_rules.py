"""The shipped knowledge base: lint-clean, examples pass, every symptom covered."""

import pytest
import yaml

from conftest import REPO, SHARED
from troubleshoot.engine.examples import check_examples
from troubleshoot.engine.lint import lint
from troubleshoot.engine.ruleset import load_ruleset


@pytest.fixture(scope="module")
def shipped():
    return load_ruleset(use_config=False)


def test_lint_is_clean(shipped):
    problems = [str(p) for p in lint(shipped)]
    assert problems == []


def test_every_example_passes(shipped):
    from troubleshoot import paste

    checked, failures = check_examples(shipped.rules, facts_of=lambda text: paste.read(text).facts)
    assert checked > 500
    assert [str(f) for f in failures] == []


def test_every_example_passes_with_the_pure_python_scanner(shipped):
    _, failures = check_examples(shipped.rules, backend="re")
    assert [str(f) for f in failures] == []


def test_every_symptom_has_a_log_rule(shipped):
    with_log = {r.symptom for r in shipped.rules if r.log}
    assert set(shipped.taxonomy) - with_log == set()


def test_taxonomy_is_in_sync_with_shared():
    shared = SHARED / "symptoms.yaml"
    if not shared.exists():
        pytest.skip("../shared is not beside this checkout")
    ours = yaml.safe_load((REPO / "rules" / "symptoms.yaml").read_text())["symptoms"]
    theirs = yaml.safe_load(shared.read_text())["symptoms"]
    assert ours == theirs, "copy ../shared/symptoms.yaml to rules/symptoms.yaml"


def test_explanations_say_how_to_confirm_and_rules_cite_sources(shipped):
    for r in shipped.rules:
        assert len(r.explain) > 120, r.id
        assert r.references, r.id


def test_fix_params_only_use_known_captures(shipped):
    import re

    from troubleshoot.engine.xid import CATALOG_WORDS

    for r in shipped.rules:
        names = set(r.captures) | (set(CATALOG_WORDS) if r.catalog else set())
        for f in r.fixes:
            for value in f.params.values():
                if isinstance(value, str) and f.fixer != "advice":
                    for name in re.findall(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", value):
                        assert name in names, (r.id, f.fixer, name)


def test_shipped_rule_files_validate_against_the_published_schema():
    import json

    import jsonschema

    schema = json.loads((REPO / "docs" / "rule.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    files = sorted(p for p in (REPO / "rules").glob("*.yaml") if p.name not in ("symptoms.yaml", "xid-catalog.yaml"))
    assert files
    for f in files:
        errors = [f"{f.name}: {'/'.join(map(str, e.absolute_path))}: {e.message}"
                  for e in validator.iter_errors(yaml.safe_load(f.read_text()))]
        assert errors == []
