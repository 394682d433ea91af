"""The regexes of `matches`: refused when they could take more than linear time, compiled
once. RE2 runs them when installed (it never backtracks); Python's `re` otherwise, where the
scan's own super-linear check (scan.backtrack) refuses the shapes that backtrack."""

from __future__ import annotations

import functools
import re

from troubleshoot.engine.condtree import MAX_STRING
from troubleshoot.scan import backtrack, engines


def regex_problem(src: str) -> str | None:
    """Why a `matches` pattern is refused (None: fine). With RE2 every pattern it compiles runs
    in linear time; without it, a shape that makes `re` backtrack exponentially is refused."""
    if len(src) > MAX_STRING:
        return f"longer than {MAX_STRING} characters"
    if engines.re2_available():
        return engines.re2_compatible(src)
    try:
        compiled_re = re.compile(src)
    except re.error as exc:
        return str(exc)
    return backtrack.superlinear(compiled_re)


@functools.lru_cache(maxsize=256)
def compiled(src: str):
    """A compiled pattern (RE2 when present); a pattern that is refused matches itself literally."""
    if regex_problem(src) is not None:
        return re.compile(re.escape(src[:MAX_STRING]))
    if engines.re2_available():
        return engines.re2_compile(src)
    return re.compile(src)
