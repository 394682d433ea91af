"""No `{placeholder}` reaches a user: every shipped rule, diagnosed on each of its own examples
through the whole pipeline (the facts a pasted dump in the example gives included), renders its
title, explanation, notes, action and fixes with every `{name}` filled."""

from __future__ import annotations

import re

import pytest

from troubleshoot import paste, pipeline
from troubleshoot.engine.ruleset import load_ruleset
from troubleshoot.engine.xid import CATALOG_WORDS
from troubleshoot.report import jsonfmt, text

pytestmark = pytest.mark.slow  # every example of every rule through the whole pipeline: ~20 s on one core
RULESET = load_ruleset(use_config=False)
# `{name}` or `{a.b.c}` as a rule writes a placeholder; `${VAR}` (shell) and `{1,2}` are not ones.
PLACEHOLDER = re.compile(r"(?<![$\w{])\{[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*\}(?!\})")


def _cases():
    for rule in RULESET.rules:
        for i, example in enumerate(rule.examples.match):
            yield pytest.param(rule.id, example, id=f"{rule.id}[{i}]")


@pytest.mark.parametrize("rule_id, example", list(_cases()))
def test_every_placeholder_is_filled_on_the_rule_s_own_examples(rule_id, example):
    facts = paste.read(example).facts or None  # what the example itself prints of its machine
    result = pipeline.run(None, facts=facts, ruleset=RULESET, log_text=example)
    mine = [d for d in result.diagnoses if d.rule.id == rule_id]
    if not mine:
        pytest.skip("another rule refines it on this example, or it needs facts the example lacks")
    shown = text.render(mine, limit=None) + jsonfmt.render(mine)
    rule = mine[0].rule
    # names the rule provides (its captures, facts, the Xid catalog's words); other braces are
    # code the rule quotes, such as Python's f"cuda:{local_rank}"
    left = sorted({p for p in PLACEHOLDER.findall(shown) if p[1:-1] in rule.captures or "." in p or
                   (rule.catalog is not None and p[1:-1] in CATALOG_WORDS)})
    assert left == [], f"{rule_id}: unfilled {left}"
