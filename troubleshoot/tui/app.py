"""The Textual front door: machine, log, ranked diagnoses, fixes, rules, history.

It drives the same pipeline as the CLI (probes, engine, executor) from workers, so input never
blocks; it holds no diagnosis logic of its own.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from textual import on, work
from textual.css.query import NoMatches
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import (Button, DataTable, Footer, Header, Input, Markdown, Static, TabbedContent, TabPane,
                             TextArea)

from troubleshoot.tui.screens import ConfirmScreen, FixScreen, HelpScreen
from troubleshoot.report.text import action_line

SEV_MARK = {"error": "✖ ERROR", "warning": "▲ WARN", "info": "● INFO"}
AREAS = ("host", "nvml", "kernel", "cuda", "frameworks", "docker", "io", "env")
PASTE_LIMIT = 50 << 20


class TroubleshootApp(App):
    """troubleshoot: diagnose a failing training job."""

    CSS_PATH = "app.tcss"
    TITLE = "troubleshoot"
    BINDINGS = [
        Binding("d", "show_tab('diagnoses')", "Diagnoses"),
        Binding("m", "show_tab('machine')", "Machine"),
        Binding("l", "show_tab('log')", "Log"),
        Binding("r", "show_tab('rules')", "Rules"),
        Binding("h", "show_tab('history')", "History"),
        Binding("f", "preview_fix", "Fix preview"),
        Binding("ctrl+r", "diagnose", "Diagnose", show=False),
        Binding("R", "reload_rules", "Reload rules", show=False),
        Binding("e", "export", "Export"),
        Binding("question_mark", "help", "Help"),
        Binding("escape", "show_tab('diagnoses')", "Back", show=False),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, log: str | None = None, snapshot: str | None = None, rules: list[str] | None = None,
                 follow: str | None = None, root: str | None = None, probe: bool = True, plugins=None):
        super().__init__()
        self.log_path = follow or log
        self.follow = follow is not None
        self.snapshot_path = snapshot
        self.rule_dirs = list(rules or [])
        self.fix_root = root
        self.do_probe = probe and snapshot is None
        self.plugins = plugins
        self.facts: dict | None = None
        self.ruleset = None
        self.diagnoses: list = []
        self.pasted: str | None = None
        self.follow_offset = 0
        self.probe_status: dict[str, str] = {a: ("waiting" if self.do_probe else "-") for a in AREAS}

    # ------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        yield Header()
        with TabbedContent(initial="diagnoses"):
            with TabPane("Diagnoses", id="diagnoses"):
                with Horizontal():
                    yield DataTable(id="diag-table", cursor_type="row", zebra_stripes=True)
                    with VerticalScroll(id="diag-detail"):
                        yield Static("", id="diag-head", markup=False)
                        yield Markdown("", id="diag-explain")
                        yield Static("", id="diag-evidence", markup=False)
                        yield Static("", id="diag-fixes", markup=False)
            with TabPane("Machine", id="machine"):
                with VerticalScroll():
                    yield Static("", id="probe-status", markup=False)
                    yield DataTable(id="gpu-table", zebra_stripes=True)
                    yield Static("", id="machine-facts", markup=False)
            with TabPane("Log", id="log"):
                with Vertical():
                    with Horizontal(id="log-bar"):
                        yield Input(placeholder="path to a log file, Enter to open", id="log-path")
                        yield Button("Diagnose pasted text", id="diagnose-paste", variant="primary")
                    yield TextArea(id="log-text", soft_wrap=False, show_line_numbers=True)
            with TabPane("Rules", id="rules"):
                with Vertical():
                    yield Static("", id="rules-problems", markup=False)
                    with Horizontal():
                        yield DataTable(id="rules-table", cursor_type="row", zebra_stripes=True)
                        with VerticalScroll(id="rule-detail"):
                            yield Static("", id="rule-text", markup=False)
            with TabPane("History", id="history"):
                with Vertical():
                    yield Static("Applied fixes, newest first. Select one and press u to undo it.", id="history-help")
                    yield DataTable(id="history-table", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        t = self.query_one("#diag-table", DataTable)
        t.add_columns("#", "severity", "symptom", "title", "conf.", "lines")
        g = self.query_one("#gpu-table", DataTable)
        g.add_columns("GPU", "name", "memory MiB", "util", "temp", "power W", "PCIe now/max", "throttle", "ECC/Xid")
        self.query_one("#rules-table", DataTable).add_columns("id", "symptom", "sev.", "pack", "file:line")
        self.query_one("#history-table", DataTable).add_columns("id", "status", "fix", "where")
        self.bind("u", "undo_selected", description="Undo")
        self._render_probe_status()
        self.load_rules()
        if self.snapshot_path:
            self.load_snapshot()
        elif self.do_probe:
            self.run_probes()
        if self.log_path:
            self.query_one("#log-path", Input).value = self.log_path
        self.refresh_history()
        if self.follow:
            self.set_interval(1.0, self.poll_follow)

    # ------------------------------------------------------------ workers

    @work(thread=True, exclusive=True, group="rules")
    def load_rules(self) -> None:
        from troubleshoot import pipeline
        from troubleshoot.engine.lint import lint

        ruleset = pipeline.load_rules(self.rule_dirs, self.plugins)
        problems = [str(p) for p in lint(ruleset)]
        self.call_from_thread(self._rules_loaded, ruleset, problems)

    def _rules_loaded(self, ruleset, problems: list[str]) -> None:
        self.ruleset = ruleset
        table = self.query_one("#rules-table", DataTable)
        table.clear()
        for r in sorted(ruleset.rules, key=lambda r: (r.symptom, r.id)):
            table.add_row(r.id, r.symptom, r.severity, r.origin.pack, f"{Path(r.origin.path).name}:{r.origin.line}", key=r.id)
        note = f"{len(ruleset.rules)} rules loaded from {len(ruleset.packs)} pack(s)."
        if problems:
            note += f" {len(problems)} problem(s):\n" + "\n".join(problems[:20])
        self.query_one("#rules-problems", Static).update(note)
        self.action_diagnose()

    @work(thread=True, exclusive=True, group="probe")
    def run_probes(self) -> None:
        from troubleshoot import pipeline

        def on_result(outcome) -> None:
            self.call_from_thread(self._probe_done, outcome.name, outcome.status, outcome.facts)

        snap = pipeline.probe(None, self.plugins, on_result=on_result)
        self.call_from_thread(self._facts_ready, snap)

    def _probe_done(self, name: str, status: str, facts: dict) -> None:
        self.probe_status[name] = {"ok": "OK", "unavailable": "unavailable", "error": "ERROR", "timeout": "TIMED OUT"}.get(status, status)
        self.facts = {**(self.facts or {}), name: facts}
        self._render_probe_status()
        self._render_machine()

    def _facts_ready(self, snap: dict) -> None:
        self.facts = snap
        self._render_machine()
        self.action_diagnose()

    @work(thread=True, exclusive=True, group="snapshot")
    def load_snapshot(self) -> None:
        from troubleshoot import snapshot
        from troubleshoot.errors import TroubleshootError

        try:
            loaded = snapshot.load(self.snapshot_path)
        except TroubleshootError as exc:
            self.call_from_thread(self.notify, str(exc), severity="error", timeout=10)
            return
        for w in loaded.warnings[:5]:
            self.call_from_thread(self.notify, w, severity="warning")
        self.probe_status = {a: ("from snapshot" if a in loaded.facts else "missing") for a in AREAS}
        self.call_from_thread(self._render_probe_status)
        self.call_from_thread(self._facts_ready, loaded.facts)

    def action_diagnose(self) -> None:
        if self.ruleset is not None:
            self.diagnose_worker(self.log_path, self.pasted)

    @work(thread=True, exclusive=True, group="diagnose")
    def diagnose_worker(self, log_path: str | None, pasted: str | None) -> None:
        from troubleshoot import pipeline
        from troubleshoot.errors import TroubleshootError

        started = time.monotonic()
        try:
            if pasted is not None:
                result = pipeline.run(None, facts=self.facts, ruleset=self.ruleset, log_text=pasted)
            else:
                result = pipeline.run(log_path, facts=self.facts, ruleset=self.ruleset)
        except TroubleshootError as exc:
            self.call_from_thread(self.notify, str(exc), severity="error", timeout=10)
            return
        self.call_from_thread(self._show_diagnoses, result, time.monotonic() - started)

    def _show_diagnoses(self, result, seconds: float) -> None:
        old = {_key(d) for d in self.diagnoses}
        self.diagnoses = result.diagnoses
        table = self.query_one("#diag-table", DataTable)
        table.clear()
        for i, d in enumerate(self.diagnoses, 1):
            lines = f"{d.first_line}-{d.last_line}" if d.count > 1 else (str(d.first_line) if d.count else "facts")
            table.add_row(str(i), SEV_MARK.get(d.severity, d.severity), d.symptom, d.title, f"{d.confidence:.2f}",
                          lines, key=_key(d))
        lines = result.scan.total_lines if result.scan else 0
        n = len(self.diagnoses)
        self.sub_title = f"{result.source} · {lines} lines · {n} diagnos{'i' if n == 1 else 'e'}s"
        self.last_seconds = seconds
        new = [d for d in self.diagnoses if _key(d) not in old]
        if old and new:
            self.notify("New: " + "; ".join(d.title for d in new[:3]), title="New diagnosis")
        if self.diagnoses:
            table.move_cursor(row=0)
            self._show_detail(self.diagnoses[0])
        else:
            self.query_one("#diag-head", Static).update("No known problem found." if result.scan or self.facts
                                                        else "Open or paste a log (l), or wait for the probes.")
            self.query_one("#diag-explain", Markdown).update("")
            self.query_one("#diag-evidence", Static).update("")
            self.query_one("#diag-fixes", Static).update("")
        self._render_machine()

    @on(DataTable.RowHighlighted, "#rules-table")
    def _rule_row(self, event: DataTable.RowHighlighted) -> None:
        rule = self.ruleset.get(event.row_key.value) if self.ruleset and event.row_key else None
        if rule is None:
            return
        lines = [rule.title, f"{rule.severity} · symptom {rule.symptom} · confidence {rule.confidence}",
                 f"from {rule.origin.pack}: {rule.origin}", ""]
        lines += [f"log: {p.source}" for p in rule.log] + [f"facts: {c.source}" for c in rule.facts]
        for kind, texts in (("must match", rule.examples.match), ("must not match", rule.examples.no_match)):
            for t in texts:
                lines += ["", f"example ({kind}):"] + ["  " + ln for ln in t.rstrip().splitlines()[:12]]
        self.query_one("#rule-text", Static).update("\n".join(lines))

    # ------------------------------------------------------------ diagnoses

    @on(DataTable.RowHighlighted, "#diag-table")
    def _row(self, event: DataTable.RowHighlighted) -> None:
        d = self._diagnosis(event.row_key.value if event.row_key else None)
        if d and self.is_running:  # a highlight can arrive while the app shuts down
            self._show_detail(d)

    def _diagnosis(self, rule_id: str | None):
        return next((d for d in self.diagnoses if _key(d) == rule_id), None)

    def selected(self):
        table = self.query_one("#diag-table", DataTable)
        if not self.diagnoses or table.cursor_row is None or table.cursor_row >= len(self.diagnoses):
            return None
        return self.diagnoses[table.cursor_row]

    def _show_detail(self, d) -> None:
        from rich.text import Text

        head = Text()
        head.append(f"{SEV_MARK.get(d.severity, d.severity)}  ", style=f"bold {_sev_style(d.severity)}")
        head.append(d.title, style="bold")
        action = action_line(d)
        if action:
            head.append(f"\n{action}", style="bold")
        head.append(f"\nsymptom {d.symptom} · rule {d.rule.id} · confidence {d.confidence:.2f}")
        for n in d.notes:
            head.append(f"\nnote: {n}", style="italic")
        self.query_one("#diag-head", Static).update(head)
        self.query_one("#diag-explain", Markdown).update(d.explain)
        ev = Text("Evidence\n", style="bold underline")
        for e in d.evidence:
            if e.source == "log":
                ev.append(f"{e.line:>7} │ ", style="dim")
                a, b = e.span or (0, 0)
                ev.append(e.text[:a])
                ev.append(e.text[a:b], style="bold reverse")
                ev.append(e.text[b:] + "\n")
            else:
                ev.append("   fact │ ", style="dim")
                ev.append(e.text + "\n")
        self.query_one("#diag-evidence", Static).update(ev)
        fx = Text("Fixes (f: preview)\n", style="bold underline")
        for f in d.fixes:
            fx.append(f"• {f.title or f.fixer}  [{f.fixer}]\n")
        if not d.fixes:
            fx.append("none\n")
        self.query_one("#diag-fixes", Static).update(fx)

    FOCUS = {"diagnoses": "#diag-table", "machine": "#gpu-table", "log": "#log-path", "rules": "#rules-table",
             "history": "#history-table"}

    def action_show_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab
        # Focus moves with the tab: a focused widget left in a hidden pane would pull it back.
        self.query_one(self.FOCUS[tab]).focus()

    def action_preview_fix(self) -> None:
        d = self.selected()
        if d is None:
            self.notify("Select a diagnosis first.", severity="warning")
            return
        if not d.fixes:
            self.notify("This diagnosis names no fix.", severity="warning")
            return
        self.push_screen(FixScreen(d, self.facts, self.fix_root, self.plugins), callback=lambda _: self.refresh_history())

    # ------------------------------------------------------------ log input

    @on(Input.Submitted, "#log-path")
    def _open_log(self, event: Input.Submitted) -> None:
        path = os.path.expanduser(event.value.strip())
        if not path:
            return
        if not os.path.isfile(path):
            self.notify(f"not a file: {path}", severity="error")
            return
        self.log_path, self.pasted = path, None
        self.action_diagnose()
        self.action_show_tab("diagnoses")

    @on(Button.Pressed, "#diagnose-paste")
    def _diagnose_paste(self) -> None:
        text = self.query_one("#log-text", TextArea).text
        if not text.strip():
            self.notify("Paste a log into the text area first.", severity="warning")
            return
        if len(text) > PASTE_LIMIT:
            self.notify("Pasted text is larger than 50 MB: save it to a file and open that.", severity="error")
            return
        self.pasted = text
        self.action_diagnose()
        self.action_show_tab("diagnoses")

    def poll_follow(self) -> None:
        try:
            size = os.path.getsize(self.log_path)
        except OSError:
            return
        if size != self.follow_offset:
            self.follow_offset = size
            self.action_diagnose()

    # ------------------------------------------------------------ machine

    def _render_probe_status(self) -> None:
        parts = [f"{a}: {s}" for a, s in self.probe_status.items()]
        try:
            status = self.query_one("#probe-status", Static)
        except NoMatches:  # a probe reported while the app was shutting down or a modal was up
            return
        status.update("Probes  " + "  ·  ".join(parts))

    def _render_machine(self) -> None:
        from troubleshoot.report.probe_text import render as probe_text

        facts = self.facts or {}
        used = self._facts_used()
        table = self.query_one("#gpu-table", DataTable)
        table.clear()
        nv = facts.get("nvml") or {}
        for g in nv.get("gpus") or []:
            throttle = ", ".join(r for r in (g.get("throttle_reasons") or []) if r != "gpu_idle") or "-"
            xids = [x for x in ((facts.get("kernel") or {}).get("xid_events") or [])]
            ecc = f"ECC {g.get('ecc_uncorrected_volatile')}" if g.get("ecc_uncorrected_volatile") else "-"
            if xids:
                ecc += f" · Xid {','.join(str(x['code']) for x in xids[-3:])}"
            table.add_row(str(g.get("index")), str(g.get("name")), f"{g.get('memory_used_mib')}/{g.get('memory_total_mib')}",
                          f"{g.get('utilization_gpu')}%", f"{g.get('temperature_c')}°C",
                          f"{g.get('power_w')}/{g.get('power_limit_w')}",
                          f"gen{g.get('pcie_gen_current')} x{g.get('pcie_width_current')} / gen{g.get('pcie_gen_max')} x{g.get('pcie_width_max')}",
                          throttle, ecc)
        text = probe_text(facts) if facts else "No facts yet."
        if used:
            text += "\nFacts used by the diagnoses:\n" + "\n".join(f"  ★ {path} = {val}   ({rule})" for path, val, rule in used)
        self.query_one("#machine-facts", Static).update(text)

    def _facts_used(self) -> list[tuple[str, str, str]]:
        out = []
        for d in self.diagnoses:
            for e in d.evidence:
                if e.source == "fact":
                    out.append((e.path, e.text.split(" = ", 1)[-1], d.rule.id))
        return out

    # ------------------------------------------------------------ rules, history, export

    def action_reload_rules(self) -> None:
        self.load_rules()
        self.notify("Reloading rules...")

    def refresh_history(self) -> None:
        from troubleshoot.fixes import journal

        table = self.query_one("#history-table", DataTable)
        table.clear()
        for eid, e in journal.entries():
            if isinstance(e, str):
                table.add_row(eid, "corrupt", e[:60], "", key=eid)
            else:
                table.add_row(eid, e.data.get("status", "?"), e.data.get("title", ""), e.data.get("root") or "/", key=eid)

    def action_undo_selected(self) -> None:
        table = self.query_one("#history-table", DataTable)
        if self.query_one(TabbedContent).active != "history" or table.row_count == 0:
            self.notify("Open History (h) and select an applied fix to undo.", severity="warning")
            return
        eid = table.coordinate_to_cell_key((table.cursor_row, 0)).row_key.value

        def done(confirmed: bool | None) -> None:
            if not confirmed:
                return
            from troubleshoot.errors import TroubleshootError
            from troubleshoot.fixes import executor

            try:
                res = executor.undo(eid)
            except TroubleshootError as exc:
                self.notify(str(exc), severity="error", timeout=10)
                return
            msg = f"Restored {len(res.restored)} file(s), removed {len(res.removed)}."
            if res.not_reversed:
                msg += " Not reversed (commands): " + "; ".join(res.not_reversed)
            self.notify(msg, title=f"Undid {eid}", timeout=10)
            self.refresh_history()

        self.push_screen(ConfirmScreen(f"Undo {eid}? Every file it changed is restored byte for byte."), callback=done)

    def action_export(self) -> None:
        from troubleshoot.report import markdown

        body = markdown.render(self.diagnoses, self.log_path or ("pasted log" if self.pasted else "machine facts"))
        if self.facts:
            from troubleshoot.report.probe_text import render as probe_text

            body += "\n## Machine\n\n```text\n" + probe_text(self.facts) + "```\n"
        if self.pasted or self.log_path:
            excerpt = self._log_excerpt()
            if excerpt:
                body += "\n## Log excerpt\n\n```text\n" + excerpt + "\n```\n"
        path = Path(f"troubleshoot-report-{time.strftime('%Y%m%d-%H%M%S')}.md").resolve()
        try:
            path.write_text(body)
        except OSError as exc:
            self.notify(f"cannot write {path}: {exc.strerror}", severity="error")
            return
        self.notify(f"Report saved to {path}", title="Export", timeout=8)

    def _log_excerpt(self) -> str:
        lines: list[str] = []
        for d in self.diagnoses[:3]:
            lines += [f"{e.line:>7} | {e.text}" for e in d.evidence if e.source == "log"]
        return "\n".join(dict.fromkeys(lines))

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def get_system_commands(self, screen):
        yield from super().get_system_commands(screen)
        for title, help_, action in (
            ("Diagnose again", "Re-run the diagnosis on the current log", self.action_diagnose),
            ("Preview fix", "Preview the fixes of the selected diagnosis", self.action_preview_fix),
            ("Export report", "Save a Markdown report of diagnoses and machine", self.action_export),
            ("Reload rules", "Reload rule files after editing them", self.action_reload_rules),
            ("Undo selected fix", "Undo the fix selected in History", self.action_undo_selected),
            ("Show machine", "GPUs, driver, CUDA, frameworks, Docker, IO", lambda: self.action_show_tab("machine")),
            ("Show log input", "Paste, open or follow a log", lambda: self.action_show_tab("log")),
            ("Show rules", "Browse loaded rules and lint problems", lambda: self.action_show_tab("rules")),
            ("Show history", "Applied fixes; undo", lambda: self.action_show_tab("history")),
            ("Help", "Keys and what each view shows", self.action_help),
        ):
            yield SystemCommand(title, help_, action)


def _key(d) -> str:
    """A row key per diagnosis: one Xid rule gives a diagnosis per code."""
    return d.rule.id + (f":xid{d.xid['code']}" if d.xid else "")


def _sev_style(sev: str) -> str:
    return {"error": "red", "warning": "yellow", "info": "cyan"}.get(sev, "")


def run_tui(**kwargs) -> int:
    TroubleshootApp(**kwargs).run()
    return 0
