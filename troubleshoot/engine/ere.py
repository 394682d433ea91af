"""Rewrite a rule regex as POSIX ERE, so GNU `grep -E` can run the same patterns (benchmarks).

Works from Python's own parse of the pattern, so the meaning is kept; only the subset rules
may use (no backreferences or lookaround) is supported.
"""

from __future__ import annotations

import re

from troubleshoot.scan.required import _c, _p

_ERE_SPECIAL = set(".[]()*+?{}|^$\\")
# Lines never contain \n (and the scanner splits \r), so classes leave both out: a newline in a
# pattern file would split the pattern in two for grep.
_CATEGORY = {
    _c.CATEGORY_DIGIT: "0-9", _c.CATEGORY_SPACE: " \t\f\v", _c.CATEGORY_WORD: "A-Za-z0-9_",
}
_NEG_CATEGORY = {_c.CATEGORY_NOT_DIGIT: "0-9", _c.CATEGORY_NOT_SPACE: " \t\f\v",
                 _c.CATEGORY_NOT_WORD: "A-Za-z0-9_"}


def to_ere(regex: re.Pattern) -> str:
    tree = _p.parse(regex.pattern, regex.flags)
    out = _seq(list(tree))
    if regex.flags & re.IGNORECASE:
        # grep takes case-insensitivity per invocation, not per pattern: spell both cases.
        out = _fold(out)
    return out


def _fold(ere: str) -> str:
    res, in_class, i = [], False, 0
    while i < len(ere):
        ch = ere[i]
        if ch == "\\" and i + 1 < len(ere):
            res.append(ere[i : i + 2])
            i += 2
            continue
        if ch == "[":
            in_class = True
        elif ch == "]" and in_class:
            in_class = False
        if ch.isalpha():
            res.append(f"{ch.lower()}{ch.upper()}" if in_class else f"[{ch.lower()}{ch.upper()}]")
        else:
            res.append(ch)
        i += 1
    return "".join(res)


def _lit(code: int) -> str:
    ch = chr(code)
    return "\\" + ch if ch in _ERE_SPECIAL else ch


def _seq(items: list) -> str:
    return "".join(_item(op, arg) for op, arg in items)


def _item(op, arg) -> str:
    if op is _c.LITERAL:
        return _lit(arg)
    if op is _c.NOT_LITERAL:
        return "." if chr(arg) in "\n\r" else f"[^{_bracket_char(arg)}]"
    if op is _c.ANY:
        return "."
    if op is _c.AT:
        return {_c.AT_BEGINNING: "^", _c.AT_BEGINNING_STRING: "^", _c.AT_END: "$", _c.AT_END_STRING: "$",
                _c.AT_BOUNDARY: "\\b", _c.AT_NON_BOUNDARY: "\\B"}[arg]
    if op is _c.IN:
        return _in(arg)
    if op is _c.BRANCH:
        return "(" + "|".join(_seq(list(b)) for b in arg[1]) + ")"
    if op is _c.SUBPATTERN:
        inner = _seq(list(arg[-1]))
        add_flags = arg[1] if len(arg) == 4 else 0
        return "(" + (_fold(inner) if add_flags & re.IGNORECASE else inner) + ")"
    if op in (_c.MAX_REPEAT, _c.MIN_REPEAT, getattr(_c, "POSSESSIVE_REPEAT", None)):
        low, high, body = arg
        inner = _seq(list(body))
        if not (len(body) == 1 and body[0][0] in (_c.LITERAL, _c.IN, _c.ANY, _c.NOT_LITERAL, _c.SUBPATTERN)):
            inner = f"({inner})"
        if high is _c.MAXREPEAT:
            return inner + {0: "*", 1: "+"}.get(low, f"{{{low},}}")
        if (low, high) == (0, 1):
            return inner + "?"
        return inner + (f"{{{low}}}" if low == high else f"{{{low},{high}}}")
    raise ValueError(f"cannot express {op} in ERE")


def _bracket_char(code: int) -> str:
    ch = chr(code)
    return {"]": "\\]", "\\": "\\\\"}.get(ch, ch) if ch not in "]\\" else ("]" if ch == "]" else "\\")


def _in(items: list) -> str:
    """A POSIX bracket: no escapes inside, so ']' goes first, '-' last and '^' anywhere but
    first; the characters are collected apart rather than marked in the text, since a class may
    itself hold any character."""
    negate, close, dash, caret = False, False, False, False
    parts: list[str] = []
    for op, arg in items:
        if op is _c.NEGATE:
            negate = True
        elif op is _c.LITERAL:
            ch = chr(arg)
            close, dash, caret = close or ch == "]", dash or ch == "-", caret or ch == "^"
            if ch not in "\n\r]-^":
                parts.append(ch)
        elif op is _c.RANGE:
            if any(chr(c) in "]-^" for c in arg):
                raise ValueError("a range bounded by ']', '-' or '^' in a bracket")
            parts.append(f"{chr(arg[0])}-{chr(arg[1])}")
        elif op is _c.CATEGORY:
            if arg in _CATEGORY:
                parts.append(_CATEGORY[arg])
            elif len(items) == 1:
                return f"[^{_NEG_CATEGORY[arg]}]"
            else:
                raise ValueError("negated class inside a class")
        else:
            raise ValueError(f"cannot express {op} in a bracket")
    body = "".join(parts)
    lead = "^" if negate else ""
    if caret and not body and not close:  # '^' may not open the bracket
        if dash:
            return f"[{lead}-^]"
        return "[^^]" if negate else "\\^"
    return f"[{lead}{']' if close else ''}{body}{'^' if caret else ''}{'-' if dash else ''}]"
