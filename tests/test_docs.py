"""Every YAML example in docs/*.md works as written: rule files load and lint with no problem and
their examples pass; symptom files extend the taxonomy; the admin loop's settings load. A block that is neither fails the test,
so a new kind of example has to be classified (and checked) here."""

import re

import pytest

from conftest import REPO
from troubleshoot import paste
from troubleshoot.engine import yamldoc
from troubleshoot.engine.examples import check_examples
from troubleshoot.engine.lint import lint
from troubleshoot.engine.ruleset import load_ruleset
from troubleshoot.fixes.registry import load_fixers
from troubleshoot.plugins import load_plugins

def _schema():
    import json

    import jsonschema

    return jsonschema.Draft202012Validator(json.loads((REPO / "docs" / "rule.schema.json").read_text()))


SCHEMA = _schema()
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
DOCS = sorted((REPO / "docs").glob("*.md"))


def blocks(path, lang):
    return [body for kind, body in FENCE.findall(path.read_text()) if kind == lang]


@pytest.mark.parametrize("doc", [d for d in DOCS if blocks(d, "yaml")], ids=lambda d: d.name)
def test_yaml_examples_lint_clean_and_pass_their_examples(doc, tmp_path):
    folder = tmp_path / "docs-rules"
    folder.mkdir()
    for i, body in enumerate(blocks(doc, "yaml")):
        data, _ = yamldoc.load(body)
        if isinstance(data, dict) and "symptoms" in data:
            (folder / f"{i}").mkdir()
            (folder / f"{i}" / "symptoms.yaml").write_text(body)
        elif isinstance(data, list) or (isinstance(data, dict) and set(data) & {"rules", "disable"}):
            (folder / f"{i}.yaml").write_text(body)
            errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in SCHEMA.iter_errors(data)]
            assert errors == [], f"{doc.name}: YAML block {i} against docs/rule.schema.json: {errors}"
        elif isinstance(data, dict) and set(data) == {"admin"}:  # the admin loop's settings: they load
            from troubleshoot.admin import config

            (tmp_path / f"config-{i}.yaml").write_text(body)
            assert config.load(tmp_path / f"config-{i}.yaml", {}).limits
        else:
            pytest.fail(f"{doc.name}: YAML block {i} is neither a rule file, a symptoms file nor a config:\n{body[:200]}")
    if not any(folder.iterdir()):
        return  # settings only: nothing of the rules to check
    # A doc's fixer plugin (a ```python block that starts with `# plugin.py`) is loaded with -p.
    modules = []
    for body in blocks(doc, "python"):
        if body.startswith("# plugin.py"):
            (tmp_path / "plugin.py").write_text(body)
            modules.append(str(tmp_path / "plugin.py"))
    plugins = load_plugins(modules)
    ruleset = load_ruleset([folder])
    ours = [r for r in ruleset.rules if r.origin.path.startswith(str(folder))]
    problems = [p for p in lint(ruleset, fixers=load_fixers(plugins)) if p.path.startswith(str(folder))]
    assert problems == [], "\n".join(map(str, problems))
    checked, failures = check_examples(ours, facts_of=lambda text: paste.read(text).facts)
    assert failures == [], "\n".join(map(str, failures))
    assert ours and checked >= 2 * len([r for r in ours if r.log])


def test_rules_doc_names_only_fixers_that_exist():
    fixers = load_fixers(load_plugins())
    named = set(re.findall(r"^\s*-?\s*fixer: ([a-z0-9-]+)", (REPO / "docs" / "rules.md").read_text(), re.M))
    assert named and named <= set(fixers), named - set(fixers)


def test_fixer_ids_doc_lists_every_shipped_fixer():
    table = set(re.findall(r"^\| `([a-z0-9-]+)` \|", (REPO / "docs" / "fixer-ids.md").read_text(), re.M))
    shipped = {fid for fid, f in load_fixers(load_plugins()).items() if type(f).__module__.startswith("troubleshoot_fixers")}
    assert shipped and table == shipped


def test_the_readme_starts_with_the_two_commands_and_says_what_they_take():
    """A newcomer's first screen: install-and-run, then the tests (exactly what CI runs), what
    the test install brings and how long the suite takes; figures and tables come later."""
    text = (REPO / "README.md").read_text()
    first, second = (b.strip() for b in re.findall(r"```sh\n(.*?)```", text, re.S)[:2])
    assert first == "pip install . && troubleshoot"
    assert second == "pip install -e '.[test]' && python -m pytest"
    assert second in (REPO / ".ci" / "run").read_text()
    screen = text[:text.index("## Commands")]
    assert "PyTorch's CPU build" in screen and "two to three minutes" in screen and "-m slow" in screen
    assert "|" not in screen and "benchmark" not in screen.lower()
