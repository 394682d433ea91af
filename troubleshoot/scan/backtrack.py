"""Regex shapes that make a backtracking engine (Python's `re`) take exponential time.

RE2 and hyperscan run any pattern in time linear in the line. Python's `re`, which runs the
patterns where no RE2 wheel exists, tries every way a pattern can match before it gives up: on
`(x+x+)+y` a line of 42 `x` is 2**42 tries. Three shapes are to blame, found in Python's own
parse of the pattern (after its optimisations: `(?:\\d|\\w)` is read as the class `[\\d\\w]`,
which cannot backtrack):

- a repetition inside a repetition, `(a+)+` or `(.*a){20}`;
- alternatives under a repetition that can start with the same character, `(a|aa)+` or
  `(.|\\s)+`: each character may be taken by either, and every split is tried;
- a backreference, `(a+)\\1`, which RE2 does not run at all.
"""

from __future__ import annotations

import re

from troubleshoot.scan.required import _c, _p

WHY = ("a backtracking engine (Python's re, which runs patterns where RE2 is not installed) can take "
       "exponential time on it")
_REPEATS = tuple(getattr(_c, n) for n in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT") if hasattr(_c, n))
_GROUPS = tuple(getattr(_c, n) for n in ("SUBPATTERN", "ATOMIC_GROUP") if hasattr(_c, n))
_REFS = (_c.GROUPREF, _c.GROUPREF_EXISTS)
_ALL = frozenset(range(129))  # ASCII, and 128 for every other character
_DIGITS = frozenset(range(48, 58))
_WORD = frozenset(range(48, 58)) | frozenset(range(65, 91)) | frozenset(range(97, 123)) | {95, 128}
_SPACE = frozenset((9, 10, 11, 12, 13, 32, 128))
_CATEGORY = {
    _c.CATEGORY_DIGIT: _DIGITS, _c.CATEGORY_NOT_DIGIT: _ALL - _DIGITS,
    _c.CATEGORY_WORD: _WORD, _c.CATEGORY_NOT_WORD: (_ALL - _WORD) | {128},
    _c.CATEGORY_SPACE: _SPACE, _c.CATEGORY_NOT_SPACE: (_ALL - _SPACE) | {128},
}


def superlinear(regex: re.Pattern) -> str | None:
    """Why Python's `re` may take exponential time on `regex`, or None when it cannot."""
    try:
        parsed = list(_p.parse(regex.pattern, regex.flags))
    except Exception:
        return None
    if _has_ref(parsed):
        return f"a backreference (like \\1 or (?P=name)): {WHY}, and RE2 does not run it; match the text itself"
    if _nested(parsed, frozenset(), loop=False):
        return f"nested repetition (like (a+)+ or (.*a){{20}}): {WHY}; rewrite it without nesting"
    if _overlap(parsed, inside_repeat=False):
        return (f"alternatives that overlap under a repetition (like (a|aa)+ or (.|\\s)+): {WHY}; make the "
                f"alternatives start differently, or use one character class")
    return None


def _group_body(op, arg) -> list:
    """A group's items: a capture's arg is (group, add flags, del flags, items); an atomic
    group's arg is the items themselves."""
    return list(arg) if op is getattr(_c, "ATOMIC_GROUP", None) else list(arg[-1])


def _children(op, arg) -> list[list]:
    """The sub-sequences of one parsed item."""
    if op in _REPEATS:
        return [list(arg[2])]
    if op in _GROUPS:
        return [_group_body(op, arg)]
    if op is _c.BRANCH:
        return [list(b) for b in arg[1]]
    if op in (_c.ASSERT, _c.ASSERT_NOT):
        return [list(arg[1])]
    if op is _c.GROUPREF_EXISTS:
        return [list(b) for b in arg[1:] if b is not None]
    return []


def _has_ref(items: list) -> bool:
    return any(op in _REFS or any(_has_ref(c) for c in _children(op, arg)) for op, arg in items)


def _unbounded(arg) -> bool:
    _low, high, _body = arg
    return high is _c.MAXREPEAT or high > 1


def _nested(items: list, follow: frozenset[int], loop: bool) -> bool:
    """Whether a repetition inside a repetition (`loop`) can stop or go on at the same character:
    `(a+)+` (after `a+`, the next round starts with `a`), `(.*a){20}`; not `(\\d+\\.){3}`, whose
    `\\d+` can only be followed by a dot. `follow`: what can come after `items`."""
    for k, (op, arg) in enumerate(items):
        rest, nullable = _first(items[k + 1:])
        after = rest | follow if nullable else rest
        if op in _REPEATS:
            body = list(arg[2])
            again = _unbounded(arg)
            start = _first(body)[0]
            if loop and again and start & after:
                return True
            if _nested(body, after | start if again else after, loop or again):
                return True
        elif any(_nested(c, after, loop) for c in _children(op, arg)):
            return True
    return False


def _overlap(items: list, inside_repeat: bool) -> bool:
    for op, arg in items:
        if op in _REPEATS:
            if _overlap(list(arg[2]), inside_repeat or _unbounded(arg)):
                return True
            continue
        if op is _c.BRANCH and inside_repeat and _ambiguous([list(b) for b in arg[1]]):
            return True
        if any(_overlap(c, inside_repeat) for c in _children(op, arg)):
            return True
    return False


def _ambiguous(branches: list[list]) -> bool:
    """Whether two alternatives can start with the same character (one that can match nothing
    lets the next repetition start where it would have: it overlaps with any other)."""
    firsts = [_ALL if nullable else first for first, nullable in map(_first, branches)]
    return any(a & b for k, a in enumerate(firsts) for b in firsts[k + 1:])


def _first(items: list) -> tuple[frozenset[int], bool]:
    """(the characters a match of the sequence can start with, whether it can match nothing)."""
    out: set[int] = set()
    for op, arg in items:
        first, nullable = _first_of(op, arg)
        out |= first
        if not nullable:
            return frozenset(out), False
    return frozenset(out), True


def _first_of(op, arg) -> tuple[frozenset[int], bool]:
    if op is _c.LITERAL:
        return _fold(arg), False
    if op is _c.NOT_LITERAL:
        return _ALL - {arg}, False
    if op is _c.ANY:
        return _ALL, False
    if op is _c.IN:
        return _class(arg), False
    if op in _REPEATS:
        first, nullable = _first(list(arg[2]))
        return first, nullable or arg[0] == 0
    if op in _GROUPS:
        return _first(_group_body(op, arg))
    if op is _c.BRANCH:
        found = [_first(list(b)) for b in arg[1]]
        return frozenset().union(*(f for f, _ in found)), any(n for _, n in found)
    if op in _REFS:
        return _ALL, True
    return frozenset(), True  # anchors and lookaround match no character


def _fold(code: int) -> frozenset[int]:
    """A literal's character with its other case: flags may make any literal case-insensitive."""
    if code >= 128:
        return frozenset((128,))
    c = chr(code)
    return frozenset((code, ord(c.swapcase()))) if c.isalpha() else frozenset((code,))


def _class(items) -> frozenset[int]:
    out: set[int] = set()
    negate = False
    for op, arg in items:
        if op is _c.NEGATE:
            negate = True
        elif op is _c.LITERAL:
            out |= _fold(arg)
        elif op is _c.RANGE:
            lo, hi = arg
            for code in range(min(lo, 128), min(hi, 128) + 1):
                out |= _fold(code)
        elif op is _c.CATEGORY:
            out |= _CATEGORY.get(arg, _ALL)
        else:
            out |= _ALL
    return (_ALL - out) | {128} if negate else frozenset(out)
