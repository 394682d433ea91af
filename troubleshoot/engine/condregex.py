"""The regexes of `matches`: refused when they could take more than linear time, compiled
once. RE2 runs them when installed (it never backtracks); Python's `re` otherwise."""

from __future__ import annotations

import functools
import re

from troubleshoot.engine.condtree import MAX_STRING

try:  # linear-time matching: a condition's regex never backtracks (google-re2, a dependency)
    import re2 as _re2
except ImportError:  # pragma: no cover - platforms without a wheel
    _re2 = None

# Nested repetition, `(a+)+`: what makes Python's `re` backtrack exponentially.
_NESTED_REPEAT = re.compile(r"\((?:[^()\\]|\\.)*[+*}](?:[^()\\]|\\.)*\)\s*(?:[+*]|\{\d*,)")


def regex_problem(src: str) -> str | None:
    """Why a `matches` pattern is refused (None: fine). With RE2 every pattern it compiles runs
    in linear time; without it, nested repetition (catastrophic backtracking) is refused."""
    if len(src) > MAX_STRING:
        return f"longer than {MAX_STRING} characters"
    if _re2 is not None:
        try:
            _re2.compile(src, _re2_options())
        except Exception as exc:  # re2 raises its own error type
            return str(exc) or "RE2 cannot compile it"
        return None
    try:
        re.compile(src)
    except re.error as exc:
        return str(exc)
    if _NESTED_REPEAT.search(src):
        return "nested repetition (like (a+)+) can take exponential time; simplify it"
    return None


@functools.lru_cache(maxsize=1)
def _re2_options():
    opts = _re2.Options()
    opts.log_errors = False
    return opts


@functools.lru_cache(maxsize=256)
def compiled(src: str):
    """A compiled pattern (RE2 when present); a pattern that is refused matches itself literally."""
    if regex_problem(src) is not None:
        return re.compile(re.escape(src[:MAX_STRING]))
    if _re2 is not None:
        return _re2.compile(src, _re2_options())
    return re.compile(src)

