"""`rules lint`: loader problems plus checks that look at what patterns would do on real logs."""

from __future__ import annotations

from troubleshoot.engine.ruleset import RuleSet
from troubleshoot.errors import Problem

# Ordinary lines of a healthy training log: a pattern that matches them would flood diagnoses.
ORDINARY_LINES = (
    "",
    "Epoch 3/100:  45%|####5     | 450/1000 [01:23<01:40,  5.47it/s, loss=0.231]",
    "[2024-05-01 12:00:00,123] INFO train.py:88 step=1200 loss=1.234 lr=3.0e-04 grad_norm=0.87",
    "node01:1234:1234 [0] NCCL INFO Channel 00/02 :    0   1   2   3",
)


def lint(ruleset: RuleSet) -> list[Problem]:
    problems = list(ruleset.problems)
    for rule in ruleset.rules:
        for p in rule.log:
            hits = sum(1 for line in ORDINARY_LINES if p.regex.search(line))
            if p.regex.search(""):
                problems.append(Problem(rule.origin.path, p.line,
                                        f"rule {rule.id!r}: pattern matches an empty line, so every line of a log",
                                        level="error"))
            elif hits >= 2:
                problems.append(Problem(rule.origin.path, p.line,
                                        f"rule {rule.id!r}: pattern matches ordinary training-log lines", level="warning"))
    return sorted(problems, key=lambda p: (p.path, p.line or 0))
