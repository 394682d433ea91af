"""The one-way flow that the CLI and the TUI both drive: rules + log + facts -> diagnoses.

Front ends call these functions and render what comes back; they hold no diagnosis logic.
"""

from __future__ import annotations

import io
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Mapping, Sequence

from troubleshoot import paste
from troubleshoot.engine.diagnose import diagnose, scan_patterns, trace_rule
from troubleshoot.engine.ruleset import RuleSet, load_ruleset
from troubleshoot.engine.scanner import ScanResult, scan_stream
from troubleshoot.errors import TroubleshootError
from troubleshoot.model import Diagnosis


@dataclass
class Result:
    diagnoses: list[Diagnosis]
    ruleset: RuleSet
    scan: ScanResult | None
    source: str


def open_log(path: str | None) -> tuple[BinaryIO, str]:
    """A binary stream for a path, or stdin for '-'; unreadable input is a one-line error."""
    if path in (None, "-"):
        return sys.stdin.buffer, "stdin"
    p = Path(path)
    try:
        if p.is_dir():
            raise TroubleshootError(f"cannot read log {path}: is a directory")
        return open(p, "rb"), str(p)
    except OSError as exc:
        raise TroubleshootError(f"cannot read log {path}: {exc.strerror or exc}") from None


def scan_log(ruleset: RuleSet, stream: BinaryIO, backend: str | None = None) -> ScanResult:
    try:
        return scan_stream(stream, scan_patterns(ruleset.rules), backend)
    except OSError as exc:
        raise TroubleshootError(f"cannot read log: {exc.strerror or exc}") from None


def probe(python: str | None = None, plugins=None, on_result=None, ctx=None) -> dict:
    """Run every registered probe (built-in and plugins) on this machine; never raises."""
    from troubleshoot.plugins import load_plugins
    from troubleshoot.probes.base import ProbeContext, run_probes

    plugins = plugins or load_plugins()
    ctx = ctx or ProbeContext()
    if python:
        ctx.python = python
    probes = plugins.collect("troubleshoot_probes")
    seen: set[str] = set()
    unique = []
    for p in probes:
        if p.name in seen:
            plugins.problems.append(f"two probes are named {p.name!r}; the second is ignored")
            continue
        seen.add(p.name)
        unique.append(p)
    return run_probes(unique, ctx, on_result)


def load_rules(rule_dirs: Sequence[str] = (), plugins=None) -> RuleSet:
    """Shipped rules, plugin rule folders, config, $TROUBLESHOOT_RULES, then `rule_dirs`."""
    plugin_dirs = [Path(d) for d in plugins.collect("troubleshoot_rule_dirs")] if plugins else []
    return load_ruleset(rule_dirs, plugin_dirs=plugin_dirs)


def run(log: str | None, rule_dirs: Sequence[str] = (), facts: Mapping | None = None,
        ruleset: RuleSet | None = None, log_text: str | None = None) -> Result:
    ruleset = ruleset or load_ruleset(rule_dirs)
    scan = None
    source = "machine facts"
    if log_text is not None:
        head = paste.Head(io.BytesIO(log_text.encode("utf-8", "surrogateescape")))
        scan, source = scan_log(ruleset, head), "pasted log"
    elif log is not None:
        stream, source = open_log(log)
        head = paste.Head(stream)
        try:
            scan = scan_log(ruleset, head)
        finally:
            if stream is not sys.stdin.buffer:
                stream.close()
    if scan is not None:  # state dumps in the log are facts of the machine it came from
        facts = paste.merge(facts, paste.read(head.text()))
    return Result(diagnoses=diagnose(ruleset.rules, scan, facts), ruleset=ruleset, scan=scan, source=source)


def why(rule_id: str, log: str | None, rule_dirs: Sequence[str] = (), facts: Mapping | None = None):
    ruleset = load_ruleset(rule_dirs)
    rule = ruleset.get(rule_id)
    if rule is None:
        raise TroubleshootError(f"no rule with id {rule_id!r} (see `troubleshoot rules list`)")
    scan = None
    if log is not None:
        stream, _ = open_log(log)
        try:
            scan = scan_stream(stream, scan_patterns([rule]))
        finally:
            if stream is not sys.stdin.buffer:
                stream.close()
    return trace_rule(rule, scan, facts), ruleset


class LogTail:
    """The complete lines a growing log gained since the last call (a truncated or rotated
    log starts over). Used to report new diagnoses while a job runs."""

    def __init__(self, path: str | Path, max_chunk: int = 64 << 20):
        self.path = Path(path)
        self.offset = 0
        self.max_chunk = max_chunk
        self._patterns: tuple | None = None  # (ruleset, its scan patterns), built once

    def new_lines(self) -> bytes:
        try:
            with open(self.path, "rb") as f:
                if os.fstat(f.fileno()).st_size < self.offset:
                    self.offset = 0
                f.seek(self.offset)
                chunk = f.read(self.max_chunk)
        except OSError:
            return b""
        cut = chunk.rfind(b"\n") + 1
        self.offset += cut
        return chunk[:cut]

    def new_diagnoses(self, ruleset: RuleSet) -> list[Diagnosis]:
        chunk = self.new_lines()
        if not chunk:
            return []
        if self._patterns is None or self._patterns[0] is not ruleset:
            self._patterns = (ruleset, scan_patterns(ruleset.rules))
        return diagnose(ruleset.rules, scan_stream(io.BytesIO(chunk), self._patterns[1]), None)
