"""The TUI's background jobs: the one place it reaches the command context and the pipeline.

Rules, lint, probes, the snapshot, scans and diagnoses run in `tui.background` jobs, never in
the app's thread; each hands its result back to a method of the app. A mixin of
`app.TroubleshootApp`, whose state (the kept scan, the facts, the job in flight) it reads and
sets; what the jobs find is shown by the app and its tabs.
"""

from __future__ import annotations

import os
import threading
import time

from troubleshoot.tui import views

PROBE_WORDS = {"ok": "OK", "unavailable": "unavailable", "error": "ERROR", "timeout": "TIMED OUT"}


class Jobs:
    def _load_rules(self, again: bool = False) -> None:
        """The context's rules (`again`: the rule files read anew), in a job: ~50 ms of imports
        and the YAML that the app's thread (keys, drawing) does not wait for."""
        def job(cancel):
            return self.ctx.reload_rules() if again else self.ctx.ruleset()

        self.progress.rules = True
        self.linted = False
        self._render_status()
        self.bg.start("rules", job, self._rules_loaded, self._job_failed)

    def _rules_loaded(self, ruleset) -> None:
        self.ruleset = ruleset
        self.progress.rules = False
        self.rules_pane.set_rules(ruleset)  # 300 rows: filled when the Rules tab is shown
        self.rules_pane.show_problems([views.safe(p) for p in ruleset.problems], linted=False)
        self._fill_visible()
        self.scan_key = None  # the patterns may have changed: the log is read again
        self.diagnose()
        if self.tab == "rules":
            self._lint()

    def _lint(self) -> None:
        """The full lint, as `rules lint` runs it (every example matched, every fix checked
        against the fixers: ~1 s of CPU), when the Rules tab is first shown, not at start where
        it would slow the first diagnosis and the first keys."""
        if self.linted or self.ruleset is None:
            return
        self.linted = True
        ruleset = self.ruleset
        self.bg.start("lint", lambda cancel: [views.safe(p) for p in self.ctx.lint(ruleset)],
                      lambda problems: self._linted(ruleset, problems))

    def _linted(self, ruleset, problems: list[str]) -> None:
        if ruleset is self.ruleset:  # not rules replaced since (R)
            self.rules_pane.show_problems(problems, linted=True)

    def _job_failed(self, exc) -> None:
        self.progress.rules = self.progress.scanning = self.progress.diagnosing = False
        self.scanning_key = None
        self._render_status()
        self._placeholder()
        self.notify(views.safe(exc), severity="error", timeout=10, markup=False)

    def _run_probes(self) -> None:
        def job(cancel):
            def on_start(names):
                self._from_thread(self._probes_started, list(names))

            def on_result(outcome):
                self._from_thread(self._probe_done, outcome.name, outcome.status, outcome.facts)

            return self.ctx.probe(on_result=on_result, cancel=cancel, on_start=on_start, runner=self.bg.runner)

        self.bg.start("probe", job, self._facts_ready)

    def _warn(self, message: str) -> None:
        """A warning of the context, from whichever thread found it, as a notification."""
        def show() -> None:
            self.notify(views.safe(message), severity="warning", timeout=10, markup=False)

        if threading.get_ident() == self._thread_id:
            show()
        else:
            self._from_thread(show)

    def _from_thread(self, fn, *args) -> None:
        if self.bg.stopped.is_set():
            return
        try:
            self.call_from_thread(self.call_later, fn, *args)  # an error there ends the app
        except RuntimeError:  # the app is closing
            pass

    def _probes_started(self, names: list[str]) -> None:
        self.progress.probes_total = len(names)
        self.probe_status = {n: "running" for n in names}
        self._render_probe_status()
        self._render_status()
        self._placeholder()

    def _probe_done(self, name: str, status: str, facts: dict) -> None:
        self.probe_status[name] = PROBE_WORDS.get(status, status)
        self.progress.probes_done += 1
        self.facts = {**(self.facts or {}), name: facts}
        self._render_probe_status()
        self._render_machine()
        self._render_status()
        self._placeholder()

    def _facts_ready(self, snap: dict) -> None:
        self.facts = snap
        self.progress.probes_total = 0
        self._render_machine()
        self._render_status()
        self.diagnose()

    def _load_snapshot(self) -> None:
        """The context's facts, replayed from --snapshot (its warnings told as notifications)."""
        self.bg.start("snapshot", lambda cancel: (self.ctx.machine(), self.ctx.probe_names()),
                      lambda done: self._snapshot_loaded(*done), self._job_failed)

    def _snapshot_loaded(self, machine, areas: list[str]) -> None:
        facts = machine.facts or {}
        self.probe_status = {a: ("from snapshot" if a in facts else "missing") for a in areas}
        self._render_probe_status()
        self._facts_ready(facts)

    def diagnose(self) -> None:
        """Diagnose the current log (or pasted text) with the current facts: the log is read
        only when it is not the one already scanned."""
        if self.ruleset is None:
            return
        key = (self.log_path, self.pasted)
        if self.pasted is None and self.log_path is None:
            self._diagnose_facts()
        elif key == self.scanning_key:
            return  # being scanned: the scan's diagnosis uses the facts of when it ends
        elif key != self.scan_key or self.scanned is None:
            self._scan(key)
        else:
            self._diagnose_scanned()

    def _logs(self, key) -> list:
        """The logs of (path, pasted text), read as the CLI reads --log: a file, a folder of
        rank logs, a glob; or the pasted text. A path that cannot be read raises."""
        path, pasted = key
        if pasted is None and path is None:
            return []
        return self.ctx.log_sources([path] if path is not None else None, pasted=pasted)

    def _sources(self, logs, facts):
        """The logs with this machine's facts, unless the logs came from elsewhere (pasted, or
        an old file: context.from_here); then with their own facts alone."""
        here, _ = self.ctx.from_here(logs)
        return self.ctx.sources(logs, facts if here else None, "machine facts")

    def _scan(self, key) -> None:
        from troubleshoot import pipeline

        ruleset = self.ruleset
        path, pasted = key
        total = len(pasted.encode("utf-8", "surrogateescape")) if pasted is not None else _size(path)
        self.progress.scanning, self.progress.scan_done, self.progress.scan_total = True, 0, total
        self._render_status()
        self._placeholder()
        last = [0.0]

        def progress(done: int) -> None:
            now = time.monotonic()
            if now - last[0] >= 0.1:  # a status update ten times a second is plenty
                last[0] = now
                self._from_thread(self._scan_progress, done)

        if self.follow and self.tail is None and key == (self.log_path, None):
            from troubleshoot.sources import LogTail

            # Small reads: the app's thread polls it, and the scan reads the whole log anyway.
            self.tail = LogTail(self.log_path, max_chunk=1 << 20)
            self.tail.catch_up()  # before the scan starts: what it cannot have seen comes next

        def job(cancel):
            logs = self._logs(key)
            scanned = pipeline.read_sources(logs, ruleset, cancel=cancel, progress=progress if len(logs) == 1 else None)
            facts = self.facts  # the facts of now, not of when the scan started
            sources = self._sources(logs, facts)
            try:
                result = pipeline.diagnose_scanned(scanned, sources, ruleset)
            except BaseException:
                scanned.close()
                raise
            return scanned, logs, result, facts, sources

        self.scans += 1
        self.scanning_key = key
        self.bg.start("scan", job, lambda done: self._scanned(key, *done), self._job_failed)

    def _scan_progress(self, done: int) -> None:
        if self.progress.scanning:
            self.progress.scan_done = done
            self._render_status()
            self._placeholder()

    def _scanned(self, key, scanned, logs, result, facts, sources) -> None:
        self.ctx.tell_inputs(result, sources)  # an empty log: said as the CLI says it, in a notification
        if self.scanned is not None:
            self._old_scans.append(self.scanned)
        self.scanned, self.scan_key, self.scanning_key, self.scan_logs = scanned, key, None, logs
        self.progress.scanning = False
        self._show_diagnoses(result)
        self._show_log()
        self._tell_facts(result)
        if facts is not self.facts:  # facts arrived while the diagnosis ran: diagnose again, no new scan
            self._diagnose_scanned()

    def _diagnose_scanned(self) -> None:
        from troubleshoot import pipeline

        scanned, sources, ruleset = self.scanned, self._sources(self.scan_logs, self.facts), self.ruleset
        self._start_diagnosis(lambda cancel: pipeline.diagnose_scanned(scanned, sources, ruleset))

    def _diagnose_facts(self) -> None:
        from troubleshoot import pipeline

        facts, ruleset = self.facts, self.ruleset
        if facts is None:
            self._placeholder()
            return

        sources = self._sources([], facts)
        self._start_diagnosis(lambda cancel: pipeline.diagnose_sources(sources, ruleset))

    def _start_diagnosis(self, job) -> None:
        """A diagnosis in the background (`job(cancel)` -> pipeline.Result), shown when done."""
        self.progress.diagnosing = True
        self._render_status()
        self.bg.start("diagnose", job, self._diagnosed, self._job_failed)

    def _diagnosed(self, result) -> None:
        self.progress.diagnosing = False
        self._show_diagnoses(result)
        self._show_log()
        self._tell_facts(result)

    def _tell_facts(self, result) -> None:
        """Whose machine judged the log, told once per log: what it printed of its own machine,
        and why this machine's facts were left out."""
        from troubleshoot.report.factsview import facts_lines

        from troubleshoot.report.factsview import machine_facts

        here, why = self.ctx.from_here(self.scan_logs or [])
        note = None if here else f"this machine's facts were not used: {why}"
        printed = bool(machine_facts(result.log_facts))
        self.facts_word = ("facts: the log" if printed else "facts: none") if not here else \
            ("facts: the log + this machine" if printed else "")
        self._render_status()
        said = facts_lines(None, result.log_facts, note)
        key = (self.log_path, self.pasted, tuple(said))
        if said and key != self._facts_told:
            self._facts_told = key
            self.notify(" ".join(said), title="Whose facts", markup=False)

    def poll_follow(self) -> None:
        """--follow: the log is diagnosed again once it has gained complete lines."""
        if self.tail is None or (self.log_path, self.pasted) != (self.ctx.options.follow, None):
            return  # not scanned yet, or another log is open now
        if self.scanning_key == (self.log_path, self.pasted):
            return  # diagnose() would drop this request: look again at the next poll
        if self.tail.new_lines():
            self.scan_key = None
            self.diagnose()



def _size(path: str | None) -> int:
    """A log file's size, for the scan's percentage; 0 (no percentage) for a folder or a glob."""
    try:
        return os.path.getsize(path) if path and os.path.isfile(path) else 0
    except OSError:
        return 0
