"""The one-way flow that the CLI, the TUI and the fleet commands drive: rules + sources -> diagnoses.

Front ends build a `sources.Sources` once per command (logs and machine facts, each tagged with
its node and rank), call `diagnose_sources`, and render what comes back; they hold no diagnosis
logic. One log and one machine is the case of one source.
"""

from __future__ import annotations

import io
import os
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO, Callable, Mapping, Sequence

from troubleshoot import logfiles, paste
from troubleshoot.engine import merge, timestamps
from troubleshoot.engine.diagnose import diagnose, fired, scan_patterns, trace_rule
from troubleshoot.engine.ruleset import RuleSet, load_ruleset
from troubleshoot.engine.scanner import ScanResult, scan_stream
from troubleshoot.errors import TroubleshootError
from troubleshoot.model import Diagnosis
from troubleshoot.sources import FactsSource, LogSource, Sources


@dataclass
class Result:
    diagnoses: list[Diagnosis]
    ruleset: RuleSet
    scan: ScanResult | None  # the scan of the one log read (None: no log, or several)
    source: str
    lines: int = 0  # lines read, over every log
    logs: int = 0  # logs diagnosed separately (each rank of a merged log counts)
    headline: str | None = None  # which rank/node failed first and what followed, for several logs


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


def probe(python: str | None = None, plugins=None, on_result=None, ctx=None, cancel=None, on_start=None) -> dict:
    """Run every registered probe (built-in and plugins) on this machine; never raises.
    `on_start(names)` learns which probes will run; `on_result(outcome)` hears each finish."""
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
    if on_start is not None:
        on_start([p.name for p in unique])
    if on_result is not None or cancel is not None:
        return run_probes(unique, ctx, on_result, cancel=cancel)
    from troubleshoot.report.progress import ProbeProgress

    with ProbeProgress([p.name for p in unique]) as progress:  # shown on a terminal after 0.5 s
        return run_probes(unique, ctx, progress.on_result)


def load_rules(rule_dirs: Sequence[str] = (), plugins=None) -> RuleSet:
    """Shipped rules, plugin rule folders, config, $TROUBLESHOOT_RULES, then `rule_dirs`."""
    plugin_dirs = [Path(d) for d in plugins.collect("troubleshoot_rule_dirs")] if plugins else []
    return load_ruleset(rule_dirs, plugin_dirs=plugin_dirs)


def run(log: str | None, rule_dirs: Sequence[str] = (), facts: Mapping | None = None,
        ruleset: RuleSet | None = None, log_text: str | None = None) -> Result:
    """One log (a path, '-' or pasted text) and one machine's facts: the single-source case."""
    logs = []
    if log_text is not None:
        logs = [LogSource("pasted log", text=log_text)]
    elif log is not None:
        logs = [LogSource("stdin")] if log == "-" else [LogSource(log, log)]
    facts_sources = [FactsSource(facts, "machine facts")] if facts is not None else []
    return diagnose_sources(Sources(logs, facts_sources), ruleset or load_ruleset(rule_dirs))


@dataclass
class _Unit:
    """One log as diagnosed: a file, or one rank of a merged log (with its line numbers)."""

    source: LogSource
    scan: ScanResult
    order: int
    spool: logfiles.RankStream | None = None
    pasted: paste.Pasted | None = None  # state dumps in the log: facts of the machine it came from


class Scanned:
    """The logs of one command, each read and scanned once. Diagnosing them again with other
    facts (probes that finished after the scan) never reads a log a second time. Rank spools
    of a merged log live until `close()` (a `with` block closes it)."""

    def __init__(self, units: list[_Unit], tmp: tempfile.TemporaryDirectory | None):
        self.units, self._tmp = units, tmp

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> "Scanned":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_sources(logs: Sequence[LogSource], ruleset: RuleSet, cancel=None, progress=None,
                 opener: Callable[[LogSource], BinaryIO] | None = None) -> Scanned:
    """Scan every log once. `cancel` (a threading.Event) stops between two chunks (ScanCancelled);
    `progress(bytes_read)` follows the log being read; `opener(source)` gives a log's stream
    instead of its file (`troubleshoot run` reads the log as the job writes it)."""
    tmp = tempfile.TemporaryDirectory(prefix="troubleshoot-ranks-") if logs else None
    units: list[_Unit] = []
    try:
        patterns = scan_patterns(ruleset.rules) if logs else None
        for i, src in enumerate(logs):
            units += _read(src, i, ruleset, patterns, tmp.name, cancel, progress, opener)
    except BaseException:
        if tmp is not None:
            tmp.cleanup()
        raise
    return Scanned(units, tmp)


def diagnose_sources(sources: Sources, ruleset: RuleSet) -> Result:
    """Every log and every machine's facts of one command -> one ranked list of diagnoses."""
    with read_sources(sources.logs, ruleset) as scanned:
        return diagnose_scanned(scanned, sources, ruleset)


def diagnose_scanned(scanned: Scanned, sources: Sources, ruleset: RuleSet) -> Result:
    """The diagnosis of logs already scanned, with the machine facts of `sources`."""
    units = scanned.units
    if len(units) == 1 and units[0].spool is None:
        return _one_log(units[0], sources, ruleset)
    if not units and len(sources.facts) <= 1:
        facts = sources.facts[0] if sources.facts else None
        ds = diagnose(ruleset.rules, None, facts.facts if facts else None)
        if facts and facts.node:
            ds = [replace(d, nodes=(facts.node,)) for d in ds]
        return Result(ds, ruleset, None, "machine facts")
    occurrences = _occurrences(units, sources, ruleset)
    diagnoses = merge.merge(occurrences)
    if len(units) == 1:
        name = units[0].source.name
    elif units and len({u.source.name for u in units}) == 1:
        name = f"{units[0].source.name} ({len(units)} ranks)"
    else:
        name = f"{len({u.source.name for u in units})} logs" if units else f"{len(sources.facts)} machines"
    return Result(diagnoses, ruleset, None, name, lines=_lines(units), logs=len(units),
                  headline=merge.headline(diagnoses) if len(units) > 1 else None)


def _lines(units: list[_Unit]) -> int:
    return sum(u.scan.total_lines for u in units)


def _read(src: LogSource, order: int, ruleset: RuleSet, patterns, tmp: str, cancel=None,
          progress=None, opener=None) -> list[_Unit]:
    if src.text is not None:
        stream: BinaryIO = io.BytesIO(src.text.encode("utf-8", "surrogateescape"))
    elif opener is not None:
        stream = opener(src)
    else:
        stream = logfiles.open_binary(src.path, src.name)
    try:
        # Read ahead as far as pasted dumps are looked for: the scanner then reads the same
        # bytes from memory, and the rest straight into its own buffer (readinto, no copies).
        ahead = stream.read(max(logfiles.PEEK, paste.HEAD_BYTES))
        head = ahead[: logfiles.PEEK]
        peeked = logfiles.Peeked(ahead, stream)
        if not logfiles.is_labelled(head):
            if src.node is None and src.path:
                src = replace(src, node=logfiles.node_in(head))
            pasted = paste.read_head(ahead[: paste.HEAD_BYTES])
            del ahead  # the scan's read-ahead lets go of it once read (peak memory)
            return [_Unit(src, _scan(peeked, patterns, src.name, cancel, progress), order, pasted=pasted)]
        folder = tempfile.mkdtemp(dir=tmp)
        out = []
        for spool in logfiles.split(peeked, folder):
            tagged = replace(src, rank=src.rank if spool.rank is None else spool.rank,
                             node=src.node or logfiles.sniff_node(spool.path))
            with open(spool.path, "rb") as f:
                out.append(_Unit(tagged, _scan(f, patterns, src.name, cancel), order, spool))
        return out
    except OSError as exc:
        raise TroubleshootError(f"cannot read log {src.name}: {exc.strerror or exc}") from None
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()


def _scan(stream, patterns, name: str, cancel=None, progress=None) -> ScanResult:
    try:
        return scan_stream(stream, patterns, cancel=cancel, progress=progress)
    except OSError as exc:
        raise TroubleshootError(f"cannot read log {name}: {exc.strerror or exc}") from None


def _facts(unit: _Unit, sources: Sources):
    facts = sources.facts_for(unit.source.node)
    return paste.merge(facts, unit.pasted) if unit.pasted else facts


def _one_log(unit: _Unit, sources: Sources, ruleset: RuleSet) -> Result:
    src = unit.source
    ds = diagnose(ruleset.rules, unit.scan, _facts(unit, sources))
    ranks = (src.rank,) if src.rank is not None else ()
    nodes = (src.node,) if src.node else ()
    ds = [replace(d, files=(src.name,), ranks=ranks, nodes=nodes) if d.count else replace(d, nodes=nodes)
          for d in ds]
    return Result(ds, ruleset, unit.scan, src.name, lines=unit.scan.total_lines, logs=1)


def _occurrences(units: list[_Unit], sources: Sources, ruleset: RuleSet) -> list[merge.Occurrence]:
    out: list[merge.Occurrence] = []
    logged_nodes = set()
    for u in units:
        src = u.source
        logged_nodes.add(src.node)
        found = fired(ruleset.rules, u.scan, _facts(u, sources))
        stamps = _stamps(u, found)
        for d in found:
            if d.count:
                out.append(merge.Occurrence(_remap(d, u.spool), src.name, src.node, src.rank,
                                            stamps.get(d.first_line), u.order))
            else:  # a finding from the machine's facts belongs to the node, not to a rank's log
                out.append(merge.Occurrence(d, None, src.node, None, None, u.order))
    for i, f in enumerate(sources.facts):
        if f.node not in logged_nodes or not units:
            out += [merge.Occurrence(d, None, f.node, None, None, len(units) + i)
                    for d in fired(ruleset.rules, None, f.facts)]
    return out


def _remap(d: Diagnosis, spool: logfiles.RankStream | None) -> Diagnosis:
    """Line numbers of one rank's spooled lines back to the merged log's."""
    if spool is None or not d.count:
        return d
    evidence = tuple(replace(e, line=spool.original(e.line)) if e.source == "log" else e for e in d.evidence)
    return replace(d, evidence=evidence, first_line=spool.original(d.first_line),
                   last_line=spool.original(d.last_line))


def _stamps(u: _Unit, found: list[Diagnosis]) -> dict[int, timestamps.Stamp]:
    """When each diagnosis was first seen in this log (keyed by its first line): that line's
    timestamp, or the nearest one before it."""
    out: dict[int, timestamps.Stamp] = {}
    missing = []
    for d in found:
        if not d.count or d.first_line is None:
            continue
        first = next((e for e in d.evidence if e.source == "log"), None)
        stamp = timestamps.find(first.text) if first else None
        if stamp:
            out[d.first_line] = stamp
        else:
            missing.append(d.first_line)
    path = u.spool.path if u.spool else u.source.path  # line numbers are still the spool's own
    if missing and path:
        out.update(logfiles.stamps_at(path, missing))
    return out


def why(rule_id: str, log: str | None, rule_dirs: Sequence[str] = (), facts: Mapping | None = None,
        plugins=None):
    ruleset = load_rules(rule_dirs, plugins)
    rule = ruleset.get(rule_id)
    if rule is None:
        raise TroubleshootError(f"no rule with id {rule_id!r} (see `troubleshoot rules list`)")
    scan = None
    if log is not None:
        stream, _ = open_log(log)
        try:
            scan = scan_stream(stream, scan_patterns([rule]), defer=False)  # every part's lines, shown
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

