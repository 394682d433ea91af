"""Required literals of a regex: strings one of which every match must contain.

The pure-Python scanner uses them as a prefilter (`bytes.find` runs at memory speed), so that
the regex itself only runs on the few lines that contain one.
"""

from __future__ import annotations

import re

try:
    from re import _constants as _c, _parser as _p  # Python >= 3.11
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _c  # type: ignore[no-redef]
    import sre_parse as _p  # type: ignore[no-redef]

MIN_LITERAL = 3


def required_literals(regex: re.Pattern) -> list[str] | None:
    """A small set of literals, one of which occurs in every match; None when there is none."""
    try:
        parsed = _p.parse(regex.pattern, regex.flags)
    except Exception:
        return None
    best = _best_of_sequence(list(parsed))
    if not best or min(len(s) for s in best) < MIN_LITERAL:
        return None
    return sorted(best)


def _score(cands: set[str] | None) -> tuple[int, int]:
    if not cands:
        return (-1, 0)
    return (min(len(s) for s in cands), -len(cands))


def _best_of_sequence(items: list) -> set[str] | None:
    options: list[set[str]] = []
    run: list[str] = []
    for op, arg in items:
        if op is _c.LITERAL:
            run.append(chr(arg))
            continue
        if run:
            options.append({"".join(run)})
            run = []
        sub = _required_of_item(op, arg)
        if sub:
            options.append(sub)
    if run:
        options.append({"".join(run)})
    if not options:
        return None
    return max(options, key=_score)


def _required_of_item(op, arg) -> set[str] | None:
    if op is _c.SUBPATTERN:
        return _best_of_sequence(list(arg[-1]))
    if op in (_c.MAX_REPEAT, _c.MIN_REPEAT):
        low, _high, body = arg
        return _best_of_sequence(list(body)) if low >= 1 else None
    if op is _c.BRANCH:
        alternatives: set[str] = set()
        for branch in arg[1]:
            sub = _best_of_sequence(list(branch))
            if not sub:
                return None
            alternatives |= sub
        return alternatives if len(alternatives) <= 16 else None
    if op is _c.IN:
        # A class of a few single characters is an alternation of one-char literals: too short
        # alone, and not worth combining; treat as unknown.
        return None
    return None
