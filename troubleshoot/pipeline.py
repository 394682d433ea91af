"""The one way from logs and machine facts to diagnoses: rules + sources -> ranked diagnoses.

`diagnose_sources` diagnoses a whole log, a folder of rank logs, a merged log, pasted text and
the nodes of a fleet; the new lines of a log still being written (`sources.LogTail`) and the
facts of a watched job go through the same function (run.verdict, for `run` and `--follow`).
The front ends (the CLI commands, `run`, `diagnose --follow`, the TUI, `fleet`)
get their sources, facts and rules from their `context.CommandContext`, call this, and render
what comes back. What a front end still decides itself is which diagnoses to show: `run` keeps
a job that succeeded to what its log and the watcher showed, `--follow` and `run` print each
rule once as it first fires. `why` traces one rule on one log for `rules why`.
"""

from __future__ import annotations

import io
import os
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Callable, Mapping, Sequence

from troubleshoot import logfiles, paste
from troubleshoot.engine.diagnose import FactTraces, diagnose, fired, leading_patterns, scan_patterns, trace_rule
from troubleshoot.engine.ruleset import SHIPPED, RuleSet, load_ruleset
from troubleshoot.records import field, record, replace
from troubleshoot.scan import Scanner, ScanResult, scan_stream
from troubleshoot.errors import TroubleshootError
from troubleshoot.model import Diagnosis
from troubleshoot.sources import (FactsSource, LogSource, Skipped, Sources, not_text, nothing_to_diagnose,
                                  skipped_input)

if TYPE_CHECKING:
    import tempfile

    from troubleshoot.engine import merge, timestamps


@record
class Result:
    diagnoses: list[Diagnosis]
    ruleset: RuleSet
    scan: ScanResult | None  # the scan of the one log read (None: no log, or several)
    source: str
    lines: int = 0  # lines read, over every log
    logs: int = 0  # logs diagnosed separately (each rank of a merged log counts)
    headline: str | None = None  # which rank/node failed first and what followed, for several logs
    skipped: list[Skipped] = field(default_factory=list)  # inputs left out: no text logs
    empty: list[str] = field(default_factory=list)  # logs read that held no bytes
    log_facts: dict = field(default_factory=dict)  # what the logs printed about their own machine: path -> value


def load_rules(rule_dirs: Sequence[str] = (), plugins=None) -> RuleSet:
    """Shipped rules, plugin rule folders, config, $TROUBLESHOOT_RULES, then `rule_dirs`."""
    plugin_dirs = [Path(d) for d in plugins.collect("troubleshoot_rule_dirs")] if plugins else []
    return load_ruleset(rule_dirs, plugin_dirs=plugin_dirs)


def run(log: str | None, rule_dirs: Sequence[str] = (), facts: Mapping | None = None,
        ruleset: RuleSet | None = None, log_text: str | None = None) -> Result:
    """`diagnose_sources` of one log (a path, '-' or pasted text) and one machine's facts: for
    programs and tests that hold no command context."""
    logs = []
    if log_text is not None:
        logs = [LogSource("pasted log", text=log_text)]
    elif log is not None:
        logs = [LogSource("stdin")] if log == "-" else [LogSource(log, log)]
    facts_sources = [FactsSource(facts, "machine facts")] if facts is not None else []
    return diagnose_sources(Sources(logs, facts_sources), ruleset or load_rules(rule_dirs))


@record
class _Unit:
    """One log as diagnosed: a file, or one rank of a merged log (with its line numbers)."""

    source: LogSource
    scan: ScanResult | None  # None: left out (`skipped`)
    order: int
    spool: logfiles.RankStream | None = None
    pasted: paste.Pasted | None = None  # state dumps in the log: facts of the machine it came from
    skipped: str | None = None  # why it is no text log, read from its first bytes


class _Spools:
    """Where the rank spools of merged logs go: a temporary folder made only once a merged log
    needs one (a followed log's new lines, read every second, need none)."""

    def __init__(self) -> None:
        self._tmp: tempfile.TemporaryDirectory | None = None

    def folder(self) -> str:
        """A new folder for one log's spools."""
        import tempfile  # (and `random` with it: 5-10 ms of a start that never spools a merged log)

        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="troubleshoot-ranks-")
        return tempfile.mkdtemp(dir=self._tmp.name)

    def cleanup(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


class Scanned:
    """The logs of one command, each read and scanned once. Diagnosing them again with other
    facts (probes that finished after the scan) never reads a log a second time. Rank spools
    of a merged log live until `close()` (a `with` block closes it). `skipped`: the logs whose
    first bytes were no text, left out unread."""

    def __init__(self, units: list[_Unit], spools: _Spools, skipped: Sequence[Skipped] = ()):
        self.units, self._spools, self.skipped = units, spools, list(skipped)

    def close(self) -> None:
        self._spools.cleanup()

    def __enter__(self) -> "Scanned":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_sources(logs: Sequence[LogSource], ruleset: RuleSet, cancel=None, progress=None,
                 opener: Callable[[LogSource], BinaryIO] | None = None) -> Scanned:
    """Scan every log once. `cancel` (a threading.Event) stops between two chunks (ScanCancelled);
    `progress(bytes_read)` follows the log being read; `opener(source)` gives a log's stream
    instead of its file (`troubleshoot run` reads the log as the job writes it)."""
    spools = _Spools()
    units: list[_Unit] = []
    try:
        sizes = None if opener is not None else _sizes(logs)
        size = sum(sizes) if sizes is not None else None
        scanner = Scanner(scan_patterns(ruleset.rules), size=size, stable=leading_patterns(ruleset.rules, SHIPPED)) if logs else None

        def read(i: int) -> list[_Unit]:
            return _read(logs[i], i, scanner, spools, cancel, progress, opener)

        shares = _shares(logs, sizes, size, cancel, progress)
        if shares is None:
            for i in range(len(logs)):
                units += read(i)
        else:
            from troubleshoot import manylogs

            spools.folder()  # made before the fork: a child's rank spools land in it and go with it
            units = manylogs.read_forked(shares, read)
    except BaseException:
        spools.cleanup()
        raise
    skipped = [skipped_input(u.source, u.skipped) for u in units if u.skipped is not None]
    return Scanned([u for u in units if u.skipped is None], spools, skipped)


def _shares(logs: Sequence[LogSource], sizes: list[int] | None, size: int | None, cancel, progress) -> list[range] | None:
    """The logs cut into one share per forked reader, or None where they are read here: many
    files of a known size, enough bytes, nothing that follows the reading from another thread."""
    if len(logs) < 2 or cancel is not None or progress is not None or size is None:
        return None  # one log: its scan forks by ranges itself, where it is large
    from troubleshoot import manylogs

    return manylogs.shares(sizes) if manylogs.worth_forking(len(logs), size) else None


def diagnose_sources(sources: Sources, ruleset: RuleSet,
                     opener: Callable[[LogSource], BinaryIO] | None = None) -> Result:
    """Every log and every machine's facts of one command -> one ranked list of diagnoses.
    `opener`: as for `read_sources` (a followed log's new lines)."""
    with read_sources(sources.logs, ruleset, opener=opener) as scanned:
        return diagnose_scanned(scanned, sources, ruleset)


def diagnose_scanned(scanned: Scanned, sources: Sources, ruleset: RuleSet) -> Result:
    """The diagnosis of logs already scanned, with the machine facts of `sources`. Every log
    given left out as no text log is an error: nothing would be diagnosed."""
    skipped = [*sources.skipped, *scanned.skipped]
    if not scanned.units and scanned.skipped:
        raise TroubleshootError(nothing_to_diagnose(skipped))
    result = _diagnosed(scanned.units, sources, ruleset)
    empty = [u.source.name for u in scanned.units if u.spool is None and not u.scan.total_bytes]
    return replace(result, skipped=skipped, empty=list(dict.fromkeys(empty)), log_facts=_log_facts(scanned.units))


def _log_facts(units: list[_Unit]) -> dict:
    """The facts the first log that printed any gave about its machine (torch, nvcc, the
    driver...), by fact path: what a diagnosis of that log was judged by."""
    for u in units:
        if u.pasted:
            out = {}
            for path in u.pasted.lines:
                value = _at(u.pasted.facts, path)
                if value is not None and not isinstance(value, (dict, list)):
                    out[path] = value
            if out:
                return out
    return {}


def _at(facts: Mapping, path: str):
    node = facts
    for key in path.split("."):
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


def _diagnosed(units: list[_Unit], sources: Sources, ruleset: RuleSet) -> Result:
    if len(units) == 1 and units[0].spool is None:
        return _one_log(units[0], sources, ruleset)
    if not units and len(sources.facts) <= 1:
        facts = sources.facts[0] if sources.facts else None
        ds = diagnose(ruleset.rules, None, facts.facts if facts else None)
        if facts and facts.node:
            ds = [replace(d, nodes=(facts.node,)) for d in ds]
        return Result(ds, ruleset, None, "machine facts")
    from troubleshoot.engine import merge  # several sources only: a single log's start skips it

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


def _sizes(logs: Sequence[LogSource]) -> list[int] | None:
    """The bytes of each log, when every one is a regular file or a text (None: a stream among
    them, or a file that cannot be read, which its opening reports)."""
    out = []
    for src in logs:
        if src.text is not None:
            out.append(len(src.text))
            continue
        try:
            st = os.stat(src.path) if src.path else None
        except OSError:
            st = None
        if st is None or not stat.S_ISREG(st.st_mode):
            return None
        out.append(st.st_size)
    return out


def _lines(units: list[_Unit]) -> int:
    return sum(u.scan.total_lines for u in units)


def _read(src: LogSource, order: int, scanner: Scanner, spools: _Spools, cancel=None,
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
        want = max(logfiles.PEEK, paste.HEAD_BYTES)
        ahead = stream.read(want)
        if opener is None and src.text is None:  # a job's own log (`run`) is read whatever it holds
            why = not_text(ahead, whole=len(ahead) < want)
            if why is not None:
                return [_Unit(src, None, order, skipped=why)]
        head = ahead[: logfiles.PEEK]
        peeked = logfiles.Peeked(ahead, stream)
        if not logfiles.is_labelled(head):
            if src.node is None and src.path:
                src = replace(src, node=logfiles.node_in(head))
            pasted = paste.read_head(ahead[: paste.HEAD_BYTES])
            del ahead  # the scan's read-ahead lets go of it once read (peak memory)
            return [_Unit(src, _scan(peeked, scanner, src.name, cancel, progress), order, pasted=pasted)]
        folder = spools.folder()
        out = []
        for spool in logfiles.split(peeked, folder):
            tagged = replace(src, rank=src.rank if spool.rank is None else spool.rank,
                             node=src.node or logfiles.sniff_node(spool.path))
            with open(spool.path, "rb") as f:
                out.append(_Unit(tagged, _scan(f, scanner, src.name, cancel), order, spool))
        return out
    except OSError as exc:
        raise TroubleshootError(f"cannot read log {src.name}: {exc.strerror or exc}") from None
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()


def _scan(stream, scanner: Scanner, name: str, cancel=None, progress=None) -> ScanResult:
    try:
        return scanner.scan(stream, cancel=cancel, progress=progress)
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
    from troubleshoot.engine import merge

    out: list[merge.Occurrence] = []
    logged_nodes = set()
    memo = FactTraces()
    for u in units:
        src = u.source
        logged_nodes.add(src.node)
        found = fired(ruleset.rules, u.scan, _facts(u, sources), memo)
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
    from troubleshoot.engine import timestamps

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


def why(rule, log: LogSource | None, facts: Mapping | None = None):
    """How one rule did or did not fire on one log and these facts, part by part (`rules why`):
    the log is scanned for that rule's patterns alone, every matching line kept."""
    scan = None
    if log is not None:
        stream = logfiles.open_binary(log.path, log.name)
        try:
            scan = scan_stream(stream, scan_patterns([rule]), defer=False)  # every part's lines, shown
        except OSError as exc:
            raise TroubleshootError(f"cannot read log {log.name}: {exc.strerror or exc}") from None
        finally:
            if stream is not sys.stdin.buffer:
                stream.close()
    return trace_rule(rule, scan, facts)


def live_rules(ruleset: RuleSet) -> RuleSet:
    """The rules on a watched job's `run.*` facts alone: they can fire while the job runs."""
    from troubleshoot.engine.ruleset import fact_paths

    rules = [r for r in ruleset.rules if r.facts and all(p.startswith("run.") for p in fact_paths(r))]
    return RuleSet(rules, ruleset.taxonomy)
