"""Placeholders in a rule's texts filled from what a diagnosis knows: `{name}` from the line's
captures (and a catalog's words), `{a.b}` from the facts. Pure functions over strings."""

from __future__ import annotations

import functools
import json
import re
from typing import Mapping

from troubleshoot.engine import cmdquote, conditions
from troubleshoot.lazyre import lazy
from troubleshoot.model import Fix
from troubleshoot.textsafe import markdown_inline


def lookup(env: Mapping, dotted: str):
    value = conditions.evaluate(conditions.parse(dotted), dict(env)) if _PATH.match(dotted) else conditions.UNKNOWN
    return None if value is conditions.UNKNOWN else value

_PATH = lazy(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_0-9]+|\[\d+\])*$")


def short(value, limit: int = 160) -> str:
    if isinstance(value, list) and value and all(isinstance(v, (str, int, float)) for v in value):
        text = ", ".join(map(str, value))  # versions, paths: read as a sentence, not as JSON
    else:
        text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


_PLACEHOLDER = lazy(r"\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)\}")
# `{name|words}`: the rule's own words for when the log or the facts do not give `name`.
_WITH_FALLBACK = lazy(r"\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)\|([^{}\n]*)\}")


def interpolate(text: str, captures: Mapping[str, str], facts: Mapping | None = None, markdown: bool = False) -> str:
    """Replace `{name}` with a captured value and `{a.b}` with a fact; unknown names stay. Inside
    code (a code span or a fenced block: commands a reader copies) values are quoted for the
    shell. In prose they read as they were found; in Markdown prose (`markdown`: explanations
    and notes) their own marks are escaped, so a captured `[text](url)` never becomes a link.
    Titles stay unescaped: each renderer escapes a title as a whole."""
    if "{" not in text:
        return text
    if "|" in text:
        text = _fallbacks(text, captures, facts)
    names = _placeholders(text)
    return _filled(text, names, tuple(_value_of(n, captures, facts) for n in names), markdown)


@functools.lru_cache(maxsize=256)
def _placeholders(text: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(m.group(1) for m in _PLACEHOLDER.finditer(text)))


@functools.lru_cache(maxsize=1024)
def _filled(text: str, names: tuple[str, ...], values: tuple[str | None, ...], markdown: bool) -> str:
    # Remembered by the values the text reads: a thousand ranks' timeouts share one explanation,
    # whose Markdown and shell quoting cost more than the rest of a diagnosis.
    given = dict(zip(names, values))
    return cmdquote.fill(text, _PLACEHOLDER, given.get, markdown_inline if markdown else cmdquote.as_read)


def _fallbacks(text: str, captures: Mapping[str, str], facts: Mapping | None) -> str:
    """Each `{name|words}` as `{name}` where the value is known (filled, quoted, like any
    other), else as the rule's words."""

    def sub(m: re.Match) -> str:
        return "{" + m.group(1) + "}" if _value_of(m.group(1), captures, facts) is not None else m.group(2)

    return _WITH_FALLBACK.sub(sub, text)


def _fill_value(text: str, captures: Mapping[str, str], facts: Mapping | None) -> str:
    """A fix parameter: data for the fixer, never Markdown, so every value goes in as read."""
    if "|" in text:
        text = _fallbacks(text, captures, facts)

    def sub(m: re.Match) -> str:
        value = _value_of(m.group(1), captures, facts)
        return m.group(0) if value is None else value

    return _PLACEHOLDER.sub(sub, text)


def _value_of(name: str, captures: Mapping[str, str], facts: Mapping | None) -> str | None:
    """What `{name}` stands for: a captured value, else a fact (`{a.b}`); None when neither."""
    if name in captures:
        return str(captures[name])
    if "." in name and facts:
        value = lookup(facts, name)
        if value is not None:
            return short(value)
    return None


def render_fix(ref, captures: Mapping[str, str], facts: Mapping | None) -> Fix:
    """A rule's fix with captures and facts filled in; params whose value is missing are dropped."""
    params = {}
    for key, value in ref.params.items():
        if isinstance(value, str):
            new = _fill_value(value, captures, facts)
            if _PLACEHOLDER.fullmatch(new):
                continue  # an optional value the log did not provide
            value = new
        params[key] = value
    return Fix(fixer=ref.fixer, title=interpolate(ref.title, captures, facts), params=params)
