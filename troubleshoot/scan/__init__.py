"""Streaming log scanner: finds which patterns match on which lines of a log of any size.

The log is read into a reused buffer in newline-aligned chunks of about 1 MiB (reader). A fast
engine finds the few candidate lines of each chunk — hyperscan (all patterns in one compiled
database, cached on disk: hyperscan, hsdb, prefilter, ordering), else RE2 (one combined
program: re2), else a literal prefilter (pure Python: literal) — and only those lines are
decoded, cleaned (ansi) and verified with the pattern's own regex (verify: RE2 where installed,
else `re` in bounded windows, rewindow), which decides the match and extracts captures. All
three engines give identical results: the fast pass only proposes lines. Memory stays bounded
and does not grow with the log: one buffer, and per pattern group a count, the first and last
few lines and the latest captures (result, tally), never the lines themselves.

On more than one core a large log file is cut into ranges of whole lines, one per core, each
scanned by a forked process whose matches this process then applies in log order (forked,
children); where forking is not safe (another thread runs, a pipe) hyperscan's pass over each
chunk is shared with worker threads instead (threaded). Either way the result is the
one-thread result. stream.scan_stream puts it together.

Line numbers count `\\n` like `grep -n`. A `\\r` inside a line (progress bars) splits it into
segments that are matched separately; ANSI escape sequences are removed before matching;
invalid UTF-8 becomes U+FFFD.

A program that scans large logs should call `tune_allocator()` once at its start (see
reader.tune_allocator): the scan never changes the process's allocator itself.

The names below load their modules when first used, so that a program that only needs one
module (reader.tune_allocator at its start, ansi's regex) does not load the engines with it.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "clean_line": "ansi",
    "hyperscan_available": "engines", "re2_available": "engines", "re2_compatible": "engines",
    "FileSpan": "reader", "file_span": "reader", "tune_allocator": "reader",
    "GroupHits": "result", "LineHit": "result", "ScanCancelled": "result", "ScanPattern": "result",
    "ScanResult": "result", "Series": "result", "series_view": "result",
    "Scanner": "stream", "scan_stream": "stream", "scan_text": "stream",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
