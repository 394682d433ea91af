"""The optional regex libraries a scan runs on, and RE2 set up for every module that uses it.

RE2 (google-re2) and hyperscan have wheels for common platforms; everything works without
either. RE2 is imported here, once, and every RE2 program of the package (the candidate
finder's, the verifier's, the rule loader's check) is compiled here with the same options.
hyperscan is imported by hsdb only when a scan asks whether it is there: the library takes
milliseconds to load that a small diagnosis does not spend.
"""

from __future__ import annotations

import functools

try:  # RE2 wheels exist for common Linux/macOS platforms; everything works without.
    import re2 as _re2
except ImportError:  # pragma: no cover - exercised by the fallback tests via force_backend
    _re2 = None


def re2_available() -> bool:
    return _re2 is not None


def re2_module():
    """The RE2 library (None where it is not installed)."""
    return _re2


def re2_options(**settings):
    """RE2 options that keep RE2 quiet (it would print every rejected pattern to stderr itself),
    with `settings` (never_nl=True, max_mem=...) applied."""
    opts = _re2.Options()
    opts.log_errors = False
    for name, value in settings.items():
        setattr(opts, name, value)
    return opts


@functools.lru_cache(maxsize=None)
def re2_compile(source: str):
    """Compiled once per process: the loader's check and the scan's verifier share it."""
    return _re2.compile(source, re2_options())


def re2_compatible(source: str) -> str | None:
    """None if RE2 compiles the pattern, else its complaint (RE2 missing: None)."""
    if _re2 is None:
        return None
    try:
        re2_compile(source)
    except Exception as exc:  # re2 raises its own error type
        return str(exc) or type(exc).__name__
    return None


def hyperscan_available() -> bool:
    from troubleshoot.scan import hsdb

    return hsdb.available()
