"""What one command works with, built once from its options by `build`: the plugins, the probes,
the machine's facts (and which machine they describe), the rules, the logs, whether to colour
the output and how strictly to lint.

Every front end takes one: each CLI command, `run`, `diagnose --follow`, `fix`, `rules why`,
`fleet` and the TUI. None of them loads plugins or rules, probes, reads a snapshot or decides on
colours by itself. Each part is made on first use and at most once (a lock guards them: `run`
loads the rules in a thread while the job runs), so `diagnose --no-probe` never imports a probe
and `run` starts the job before any rule is read.

Layering: this module wires pipeline, snapshot, fixes and plugins together; run, fleet, cli and
tui sit above it.
"""

from __future__ import annotations

import _thread  # threading's locks are these; threading itself costs every start 1 ms
import os
import sys
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from troubleshoot.console import print_warning
from troubleshoot.errors import TroubleshootError
from troubleshoot.records import field, record

if TYPE_CHECKING:
    from troubleshoot.engine.lint import Problem
    from troubleshoot.engine.ruleset import RuleSet
    from troubleshoot.fixes.api import Fixer
    from troubleshoot.fixes.service import FixService
    from troubleshoot.model import Rule
    from troubleshoot.pipeline import Result
    from troubleshoot.plugins import Plugins
    from troubleshoot.probes.base import Probe, ProbeOutcome
    from troubleshoot.sources import LogSource, Skipped, Sources

# Commands that read a piped stdin as their log when no --log is given.
READS_STDIN = frozenset({"diagnose", "why"})
THIS_MACHINE = "this machine"


@record(frozen=True)
class Options:
    """What a command was asked to work with, as its parsed options say it."""

    command: str | None = None
    logs: tuple[str, ...] = ()  # --log values as given: a file, a folder of rank logs, a glob, '-'
    rule_dirs: tuple[str, ...] = ()  # --rules
    plugins: tuple[str, ...] = ()  # -p
    snapshot: str | None = None  # --snapshot: facts of a saved machine instead of this one
    probe: bool = True  # False: --no-probe
    python: str | None = None  # --python: the interpreter whose frameworks are probed
    color: str = "auto"  # --color: auto, always, never
    root: str | None = None  # --root: fixes' file changes land under it
    follow: str | None = None  # --follow: a growing log
    here: bool = False  # --here: the logs came from this machine, whatever their age or form

    @classmethod
    def from_args(cls, args: Any) -> "Options":
        """The options of an argparse namespace; a command without an option gets its default."""
        log = getattr(args, "log", None)
        logs = tuple(log) if isinstance(log, list) else ((log,) if log else ())
        command = getattr(args, "command", None)
        if command == "rules":
            command = getattr(args, "rules_command", None) or "rules"
        return cls(command=command, logs=logs, rule_dirs=tuple(getattr(args, "rules", None) or ()),
                   plugins=tuple(getattr(args, "plugins", None) or ()), snapshot=getattr(args, "snapshot", None),
                   probe=not getattr(args, "no_probe", False), python=getattr(args, "python", None),
                   color=getattr(args, "color", None) or "auto", root=getattr(args, "root", None),
                   follow=getattr(args, "follow", None), here=bool(getattr(args, "here", False)))


@record(frozen=True)
class Machine:
    """The facts a command diagnoses with, and where they come from."""

    facts: dict | None
    origin: str | None  # "this machine", "snapshot FILE"; None: no facts (--no-probe)


@record
class CommandContext:
    """One command's plugins, probes, facts, rules, logs and output settings (see the module)."""

    options: Options
    # Told each problem once, as it is found: a plugin that failed to load, a hook that raised,
    # two probes of one name, a snapshot's warnings. The TUI points it at a notification.
    warn: Callable[[str], None] = print_warning
    stdin_log: bool = False  # no --log, and stdin is a pipe this command reads as its log
    no_color: bool = False  # NO_COLOR was set when the command started
    _plugins: Plugins | None = field(default=None, repr=False)
    _probes: list[Probe] | None = field(default=None, repr=False)
    _machine: Machine | None = field(default=None, repr=False)
    _ruleset: RuleSet | None = field(default=None, repr=False)
    _fixers: dict[str, Fixer] | None = field(default=None, repr=False)
    _told: set[str] = field(default_factory=set, repr=False)  # problems already told, each once
    facts_note: str | None = None  # why this machine's facts were left out of the diagnosis, if they were
    _skipped: list[Skipped] = field(default_factory=list, repr=False)  # the logs' files left out as no logs
    # One lock per part: the TUI loads the rules in one thread while it probes in another.
    _lock: _thread.RLock = field(default_factory=_thread.RLock, repr=False)  # plugins, probes, fixers
    _rules_lock: _thread.LockType = field(default_factory=_thread.allocate_lock, repr=False)
    _machine_lock: _thread.LockType = field(default_factory=_thread.allocate_lock, repr=False)

    def with_options(self, **changes) -> "CommandContext":
        """This context with some options changed (`run --tui` opens the TUI on the job's log
        and saved facts): the plugins, probes, rules and fixers already loaded are kept; the
        facts too, unless the snapshot changed."""
        from troubleshoot.records import replace

        options = replace(self.options, **changes)
        machine = self._machine if options.snapshot == self.options.snapshot else None
        return replace(self, options=options, _machine=machine, _told=set(self._told))

    # ------------------------------------------------------------ plugins and probes

    @property
    def plugins(self) -> Plugins:
        """Installed plugins and the -p ones, loaded on first use; a -p plugin that cannot load
        raises (TroubleshootError), any other problem is told through `warn`."""
        with self._lock:
            if self._plugins is None:
                from troubleshoot.plugins import load_plugins

                self._plugins = load_plugins(self.options.plugins)
            if self._plugins.report is None:
                self._plugins.report = self._tell
            self._tell_problems()
            return self._plugins

    def _tell(self, problem: str) -> None:
        if problem not in self._told:
            self._told.add(problem)
            self.warn(problem)

    def _tell_problems(self) -> None:
        for p in list(self._plugins.problems if self._plugins else ()):
            self._tell(p)

    def probes(self) -> list[Probe]:
        """Every registered probe, built-in and plugins', one per name: the first the hook gives
        (a -p plugin's before an installed plugin's before a built-in one); the others are told
        through `warn` and ignored."""
        with self._lock:
            if self._probes is None:
                plugins = self.plugins
                seen: set[str] = set()
                self._probes = []
                for p in plugins.collect("troubleshoot_probes"):
                    if p.name in seen:
                        plugins.problems.append(f"two probes are named {p.name!r}; the second is ignored")
                        continue
                    seen.add(p.name)
                    self._probes.append(p)
                self._tell_problems()
            return self._probes

    def probe_names(self) -> list[str]:
        return [p.name for p in self.probes()]

    def probe(self, on_result: Callable[[ProbeOutcome], None] | None = None, cancel=None,
              on_start: Callable[[list[str]], None] | None = None, runner=None,
              names: Sequence[str] | None = None, root: str | None = None, cap: float | None = None) -> dict:
        """Run the probes (only `names`, when given) on this machine, or on the tree under
        `root`; never raises. `cap`: no probe waited for longer (seconds). Without callbacks a
        line on a terminal says what is still running after half a second."""
        import dataclasses
        from pathlib import Path

        from troubleshoot.probes.base import ProbeContext
        from troubleshoot.snapshot import run_probes

        probes = [p for p in self.probes() if names is None or p.name in names]
        if cap is not None:
            probes = [dataclasses.replace(p, timeout=min(p.timeout, cap)) for p in probes]
        ctx = ProbeContext()
        if self.options.python:
            ctx.python = self.options.python
        if runner is not None:
            ctx.runner = runner
        if root:
            ctx.root = Path(root)
        if on_start is not None:
            on_start([p.name for p in probes])
        if on_result is not None or cancel is not None:
            return run_probes(probes, ctx, on_result, cancel=cancel)
        from troubleshoot.report.progress import ProbeProgress

        with ProbeProgress([p.name for p in probes], plain=not self.colour(sys.stderr)) as progress:
            return run_probes(probes, ctx, progress.on_result)

    def probe_areas(self, names: Sequence[str], root: str | None) -> dict:
        """The facts of some areas again, after a fix (under `root`: of the files there)."""
        return self.probe(on_result=lambda outcome: None, names=tuple(names), root=root)

    # ------------------------------------------------------------ facts

    def machine(self) -> Machine:
        """The facts of this command, once: the --snapshot replayed (its warnings told), this
        machine probed now, or none (--no-probe)."""
        with self._machine_lock:
            if self._machine is None:
                self._machine = self._load_machine()
            return self._machine

    def _load_machine(self) -> Machine:
        if self.options.snapshot:
            from troubleshoot import snapshot

            loaded = snapshot.load(self.options.snapshot)
            for w in loaded.warnings:
                self.warn(w)
            return Machine(loaded.facts, f"snapshot {self.options.snapshot}")
        if not self.options.probe:
            return Machine(None, None)
        return Machine(self.probe(), THIS_MACHINE)

    def facts_at_hand(self, needed: bool) -> dict | None:
        """Facts for a fixer: read (probed, or the snapshot loaded) when `needed`; otherwise
        only those already known or cheap to have (a snapshot), never a probe run for nothing."""
        if needed or self.options.snapshot or self._machine is not None:
            return self.machine().facts
        return None

    # ------------------------------------------------------------ rules and fixers

    def ruleset(self) -> RuleSet:
        """Shipped rules, plugins' rule folders, config, $TROUBLESHOOT_RULES and --rules, once."""
        with self._rules_lock:
            if self._ruleset is None:
                self._ruleset = self._load_rules()
            return self._ruleset

    def reload_rules(self) -> RuleSet:
        """The rule files read again (after editing them)."""
        ruleset = self._load_rules()
        with self._rules_lock:
            self._ruleset = ruleset
        return ruleset

    def _load_rules(self) -> RuleSet:
        from troubleshoot import pipeline

        return pipeline.load_rules(self.options.rule_dirs, self.plugins)

    def rule(self, rule_id: str) -> Rule:
        """The effective rule `rule_id`; an unknown id is a one-line error that names the file
        that disabled it, else the closest id, else the command that lists them."""
        ruleset = self.ruleset()
        rule = ruleset.get(rule_id)
        if rule is not None:
            return rule
        if rule_id in ruleset.disabled:
            raise TroubleshootError(f"rule {rule_id!r} is disabled by {ruleset.disabled[rule_id]}")
        from troubleshoot.console import did_you_mean

        # Rule ids share long prefixes (torch-cuda-...): a close one must be very close.
        hint = did_you_mean(rule_id, (r.id for r in ruleset.rules), cutoff=0.8)
        raise TroubleshootError(f"unknown rule {rule_id!r}{hint or ' (see `' + self.command_line('rules', 'list') + '`)'}")

    def fixers(self) -> dict[str, Fixer]:
        with self._lock:
            if self._fixers is None:
                from troubleshoot.fixes.registry import load_fixers

                self._fixers = load_fixers(self.plugins)
                self._tell_problems()
            return self._fixers

    def lint(self, ruleset: RuleSet | None = None) -> list[Problem]:
        """Every problem of the rules, checked as `rules lint` checks them: fact areas of
        plugin probes known, every `fixes:` entry checked against the registered fixers."""
        from troubleshoot import snapshot
        from troubleshoot.engine.lint import lint

        documented = set(snapshot.schema()["properties"])
        areas = frozenset(n for n in self.probe_names() if n not in documented)
        return lint(ruleset or self.ruleset(), extra_areas=areas, fixers=self.fixers())

    def fix_service(self, facts: Callable[[bool], Mapping | None] | None = None) -> FixService:
        """Planning, applying, verifying and undoing fixes with this command's fixers, facts,
        probes and --root. `facts(needed)`: the facts a fixer plans with (default: this
        command's machine, see `facts_at_hand`)."""
        from troubleshoot.fixes.service import FixService

        return FixService(self.fixers(), facts or self.facts_at_hand, self.probe_areas, self.options.root)

    # ------------------------------------------------------------ logs and the diagnosis

    def log_sources(self, specs: Sequence[str] | None = None, pasted: str | None = None) -> list[LogSource]:
        """The logs of --log (or `specs`): files, folders of rank logs, globs, '-' for stdin; a
        piped stdin when the command reads one; or `pasted` text. A path that cannot be read is
        a one-line error, and so are files none of which is a text log; files that are no logs
        among others are told through `warn`, before any probe runs."""
        from troubleshoot.sources import LogSource, find_logs, nothing_to_diagnose, skipped_note

        self._skipped = []
        if pasted is not None:
            return [LogSource("pasted log", text=pasted)]
        if specs is None:
            specs = self.options.logs or (("-",) if self.stdin_log else ())
        found = find_logs(specs)
        if found.skipped and not found.logs:
            raise TroubleshootError(nothing_to_diagnose(found.skipped))
        self._skipped = found.skipped
        if found.skipped:
            self._tell(skipped_note(found.skipped))
        return found.logs

    def sources(self, logs: Sequence[LogSource] | None = None, facts: Mapping | None = None,
                origin: str | None = None) -> Sources:
        """Logs and facts as the pipeline takes them. By default the logs of --log and this
        command's machine (probed or replayed only now, after the logs were found readable)."""
        from troubleshoot.sources import FactsSource, Sources

        logs = self.log_sources() if logs is None else list(logs)
        if facts is None and origin is None:
            here, why = self.from_here(logs)
            if here:
                m = self.machine()
                facts, origin = m.facts, m.origin
            else:
                self.facts_note = f"this machine's facts were not used: {why} (--here uses them)"
        return Sources(list(logs), [FactsSource(facts, origin or "machine facts")] if facts is not None else [],
                       skipped=list(self._skipped))

    def from_here(self, logs: Sequence[LogSource]) -> tuple[bool, str]:
        """Whether this machine's facts describe the machine `logs` came from (sources.from_here),
        and why. A --snapshot and --no-probe decide by themselves; --here says yes."""
        import time

        from troubleshoot.sources import from_here

        if self.options.snapshot or not self.options.probe:
            return True, "facts as asked"
        if self.options.here:
            return True, "--here"
        return from_here(logs, _isatty(sys.stdin), time.time())

    def diagnose(self, sources: Sources | None = None) -> Result:
        """The one way from this command's logs and facts to ranked diagnoses. What the reading
        found about the logs themselves (an input that was no text log, an empty log) is told
        through `warn`, and kept in the result (`skipped`, `empty`)."""
        from troubleshoot import pipeline

        ruleset = self.ruleset()
        sources = self.sources() if sources is None else sources
        result = pipeline.diagnose_sources(sources, ruleset)
        self.tell_inputs(result, sources)
        return result

    def tell_inputs(self, result: Result, sources: Sources) -> None:
        """Tell through `warn` what reading `sources` found about the logs themselves: an input
        that was no text log (seen only once read: stdin, a FIFO; files were told when listed),
        a log that held nothing. For every front end that diagnoses (the CLI, the TUI)."""
        from troubleshoot.sources import empty_note, skipped_note

        found = result.skipped[len(sources.skipped):]
        if found:
            self._tell(skipped_note(found))
        # stdin read only because it was a pipe (a script's, a CI runner's) beside facts to
        # diagnose: an empty one is no log given, not an empty log (the JSON still lists it).
        empty = [] if self.stdin_log and sources.facts else result.empty
        if empty:
            self._tell(empty_note(empty))

    def log_hint(self) -> list[str] | None:
        """The words a printed `troubleshoot fix --rule` line needs to read the same logs: each
        --log value as given. None when a log came from stdin (the line then says LOG)."""
        if not self.options.logs or "-" in self.options.logs:
            return None
        return [word for spec in self.options.logs for word in ("--log", spec)]

    def facts_hint(self) -> list[str]:
        """The words that give a printed command the same facts: the --snapshot, or --here."""
        if self.options.snapshot:
            return ["--snapshot", self.options.snapshot]
        return ["--here"] if self.options.here else []

    # ------------------------------------------------------------ output

    def colour(self, stream) -> bool:
        """Colours on `stream`: --color always, or a terminal unless --color never or NO_COLOR."""
        if self.options.color == "always":
            return True
        if self.options.color == "never" or self.no_color:
            return False
        return _isatty(stream)

    def rich(self, stream) -> bool:
        """Markdown rendered for a terminal (wrapped, lists drawn), else plain text."""
        if self.options.color == "always":
            return True
        return self.options.color != "never" and _isatty(stream)

    def hint_args(self) -> list[str]:
        """The options a printed command line must repeat to see the same rules and plugins."""
        out: list[str] = []
        for d in self.options.rule_dirs:
            out += ["--rules", d]
        for p in self.options.plugins:
            out += ["-p", p]
        return out

    def command_line(self, *words: str) -> str:
        """A command to print as a hint, with this one's --rules and -p: it copy-pastes."""
        import shlex

        return shlex.join(["troubleshoot", *words, *self.hint_args()])


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def build(options: Options | Any, warn: Callable[[str], None] | None = None,
          plugins: Plugins | None = None) -> CommandContext:
    """The context of one command, from its parsed options (an argparse namespace or Options).
    `plugins`: a plugin manager already loaded (a program embedding the TUI, a test)."""
    opts = options if isinstance(options, Options) else Options.from_args(options)
    stdin_log = (opts.command in READS_STDIN and not opts.logs and opts.follow is None
                 and not _isatty(sys.stdin))
    ctx = CommandContext(opts, warn or print_warning, stdin_log=stdin_log,
                         no_color=bool(os.environ.get("NO_COLOR")))
    ctx._plugins = plugins
    return ctx
