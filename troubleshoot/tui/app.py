"""The Textual front door: machine, log, ranked diagnoses, fixes, rules, history.

It takes the command's `context.CommandContext` like every CLI command (plugins, probes, the
snapshot, rules, lint and the fix service all come from it); its background jobs (tui/jobs.py)
drive the same pipeline, so input never blocks and `q` never waits for them; it holds no
diagnosis logic of its own. A log (a file, a folder of rank logs, pasted text) is scanned once:
facts that arrive later (probes finishing) re-run only the diagnosis over the kept scan; a
followed log is read again when `sources.LogTail` says it gained complete lines. Designed at
80x24: below 120 columns the panes stack, from 120 they sit side by side.

Over 500 lines: the layout, the keys and the handlers of the five views of one Textual App,
which read and set the same widgets; the jobs, the fix screen and the log view are modules of
their own.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.screen import ModalScreen
from textual.widgets import (Button, ContentSwitcher, DataTable, Input, Markdown, Static, TabbedContent, TabPane,
                             TextArea)

from troubleshoot.textsafe import terminal_safe
from troubleshoot.tui import views
from troubleshoot.tui.background import Background
from troubleshoot.tui.datamd import DataMarkdown
from troubleshoot.tui.driver import quick_exit_driver
from troubleshoot.tui.jobs import Jobs
from troubleshoot.tui.logview import LogView, rows_for, rows_for_logs
from troubleshoot.tui.screens import ConfirmScreen, ExportScreen, FixScreen, HelpScreen

if TYPE_CHECKING:
    from troubleshoot.context import CommandContext

PASTE_LIMIT = 50 << 20
PASTE_HINT = ("Paste a log here (your terminal's paste: ctrl+shift+v, shift+insert or the mouse), "
              "then ctrl+r to diagnose it.  ctrl+l clears.  esc leaves.")
# Actions that make no sense under a modal (a confirmation, the fix preview): the app ignores them there.
BASE_ONLY = {"show_tab", "preview_fix", "paste", "open_log", "diagnose", "clear_paste", "filter_rules",
             "reload_rules", "export", "undo_selected", "back"}


class KeyBar(Static):
    """The footer: help and quit always, then the keys of the view in focus that fit."""


class TroubleshootApp(Jobs, App):
    """troubleshoot: diagnose a failing training job."""

    CSS_PATH = "app.tcss"
    TITLE = "troubleshoot"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    BINDINGS = [
        Binding("d", "show_tab('diagnoses')", "Diagnoses"),
        Binding("m", "show_tab('machine')", "Machine"),
        Binding("l", "show_tab('log')", "Log"),
        Binding("r", "show_tab('rules')", "Rules"),
        Binding("h", "show_tab('history')", "History"),
        Binding("f", "preview_fix", "Fix preview"),
        Binding("p", "paste", "Paste a log"),
        Binding("o", "open_log", "Open a log file"),
        Binding("ctrl+r,ctrl+enter", "diagnose", "Diagnose", priority=True),
        Binding("ctrl+l", "clear_paste", "Clear the paste area", priority=True),
        Binding("slash", "filter_rules", "Filter rules"),
        Binding("R", "reload_rules", "Reload rules"),
        Binding("e", "export", "Export"),
        Binding("u", "undo_selected", "Undo"),
        Binding("question_mark", "help", "Help"),
        Binding("f1", "help", "Help", priority=True),
        Binding("escape", "back", "Back"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, ctx: CommandContext | None = None, *, log: str | None = None, snapshot: str | None = None,
                 rules: list[str] | None = None, follow: str | None = None, root: str | None = None,
                 probe: bool = True, plugins=None, driver_class=None):
        """`ctx`: the command's context; without one, it is built from the other arguments (the
        options of `troubleshoot tui`; `plugins`: already loaded)."""
        super().__init__(driver_class=driver_class)
        if ctx is None:
            from troubleshoot import context

            ctx = context.build(context.Options(command="tui", logs=(log,) if log else (), snapshot=snapshot,
                                                rule_dirs=tuple(rules or ()), follow=follow, root=root,
                                                probe=probe), plugins=plugins)
        self.ctx = ctx
        opts = ctx.options
        self.log_path = opts.follow or (opts.logs[0] if opts.logs else None)
        self.follow = opts.follow is not None
        self.snapshot_path = opts.snapshot
        self.fix_root = opts.root
        self.do_probe = opts.probe and opts.snapshot is None
        self.tail = None  # the followed log (sources.LogTail), once the first scan of it is done
        self.scan_logs: list = []  # the logs of the kept scan (sources.LogSource)
        self.facts: dict | None = None
        self.ruleset = None
        self.diagnoses: list = []
        self.result = None
        self.pasted: str | None = None
        self.probe_status: dict[str, str] = {}  # probe name -> its state, once the probes are known
        self.progress = views.Progress(rules=True)
        self.bg = Background(self)
        self.scanned = None  # the kept scan of the current log (pipeline.Scanned)
        self._old_scans: list = []  # replaced scans, closed once a newer diagnosis is shown
        self.scan_key: tuple | None = None  # (path, pasted text) the kept scan is of
        self.scanning_key: tuple | None = None  # the one being scanned now
        self.scans = 0  # how many times a log was read (facts arriving later never add one)
        self.unseen = 0  # new diagnoses that arrived while a modal was up
        self.linted = False
        self._laid_out_width = 0
        self._stale: set[str] = {"rules", "history"}
        self.last_seconds = 0.0

    # ------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        yield Static("", id="status", markup=False)
        with TabbedContent(initial="diagnoses"):
            with TabPane("Diagnoses", id="diagnoses"):
                with Horizontal(id="diag-pane", classes="pane"):
                    yield DataTable(id="diag-table", cursor_type="row", zebra_stripes=True)
                    with VerticalScroll(id="diag-detail"):
                        yield Static("", id="diag-head", markup=False)
                        yield DataMarkdown("", id="diag-explain")
                        yield Static("", id="diag-evidence", markup=False)
                        yield Static("", id="diag-fixes", markup=False)
            with TabPane("Machine", id="machine"):
                with VerticalScroll(id="machine-scroll"):
                    yield Static("", id="probe-status", markup=False)
                    yield Static("", id="gpu-table", markup=False)
                    yield Static("", id="machine-facts", markup=False)
            with TabPane("Log", id="log"):
                with Vertical():
                    with Horizontal(id="log-bar"):
                        yield Input(placeholder="path to a log file, Enter to open (o)", id="log-path", compact=True)
                        yield Button("Diagnose ^r", id="diagnose-paste", variant="primary", compact=True)
                        yield Button("Clear ^l", id="clear-paste", compact=True)
                    yield Static("", id="log-note", markup=False)
                    with ContentSwitcher(initial="log-view", id="log-switch"):
                        yield LogView(id="log-view")
                        yield TextArea(id="log-text", soft_wrap=False, show_line_numbers=True, placeholder=PASTE_HINT)
            with TabPane("Rules", id="rules"):
                with Vertical():
                    with Horizontal(id="rules-bar"):
                        yield Input(placeholder="/ filter: words in the id, symptom, title, text or patterns",
                                    id="rules-filter", compact=True)
                        yield Static("", id="rules-count", markup=False)
                    yield Static("", id="rules-problems", markup=False)
                    with Horizontal(classes="pane"):
                        yield DataTable(id="rules-table", cursor_type="row", zebra_stripes=True)
                        with VerticalScroll(id="rule-detail"):
                            yield Static("", id="rule-text", markup=False)
            with TabPane("History", id="history"):
                with Vertical():
                    yield Static("Applied fixes, newest first. Select one and press u to undo it.", id="history-help")
                    yield DataTable(id="history-table", cursor_type="row", zebra_stripes=True)
        yield KeyBar("", id="keys", markup=False)

    def on_mount(self) -> None:
        if hasattr(self._driver, "app_mounted"):  # tui.early: a `q` before the first frame ends it at once
            self._driver.app_mounted(self.bg.stop)  # before any job starts: that exit stops them too
            self.call_after_refresh(self._driver.app_drawn)
        self.watch(self.screen, "focused", lambda _: self._render_keys())
        self.ctx.warn = self._warn  # a hook that fails, a snapshot's warnings: on the screen, not under it
        self._render_probe_status()
        self._render_machine()
        self._render_status()
        self.call_after_refresh(self._start_jobs)
        if self.log_path:
            self.query_one("#log-path", Input).value = self.log_path
        self._placeholder()
        self.query_one("#diag-table", DataTable).focus()
        if self.follow:
            self.set_interval(1.0, self.poll_follow)

    def _start_jobs(self) -> None:
        """After the first frame: the jobs' CPU (the rules alone ~0.1 s: imports, YAML) would share
        the interpreter with drawing it. The diagnosis comes no later: the work is the same."""
        self._load_rules()
        if self.snapshot_path:
            self._load_snapshot()
        elif self.do_probe:
            self._run_probes()

    def on_resize(self) -> None:
        self.call_after_refresh(self._relayout)

    def _relayout(self) -> None:
        # Tables are cut to the width: refill the one in view now, the others when shown.
        if self.size.width == self._laid_out_width:
            return
        self._laid_out_width = self.size.width
        self._stale = {"rules", "history"}
        self._fill_diagnoses(keep_cursor=True)
        self._fill_visible()
        self._render_keys()

    def _fill_visible(self) -> None:
        tab = self.query_one(TabbedContent).active
        if tab in self._stale:
            self._stale.discard(tab)
            if tab == "rules":
                self._fill_rules()
            else:
                self.refresh_history()

    @on(TabbedContent.TabActivated)
    def _tab_changed(self) -> None:
        self._render_keys()
        self._fill_visible()
        if self.query_one(TabbedContent).active == "rules":
            self._lint()

    # ------------------------------------------------------------ status line and footer

    def _render_status(self) -> None:
        r = self.result
        count = len(self.diagnoses) if r is not None else None
        lines = (r.scan.total_lines if r.scan else r.lines) if r is not None and (r.scan or r.lines) else None
        extra = f"{self.unseen} new" if self.unseen else ""
        source = r.source if r is not None else ("pasted log" if self.pasted is not None else self.log_path)
        self.sub_title = views.status_line(source, lines, count, self.progress).plain
        try:
            self.query_one("#status", Static).update(views.status_line(source, lines, count, self.progress, extra))
        except NoMatches:
            return

    def _key_context(self) -> tuple[str, bool]:
        focused = self.screen.focused if self.screen is self.screen_stack[0] else None
        fid = focused.id if focused is not None else None
        typing = isinstance(focused, (Input, TextArea))
        special = {"rules-filter": "filter", "log-path": "open", "log-text": "paste", "log-view": "log"}
        if fid in special:
            return special[fid], typing
        tab = self.query_one(TabbedContent).active
        if tab == "diagnoses" and self.query_one("#diag-pane").has_class("detail-only"):
            return "detail", typing
        return tab or "diagnoses", typing

    def _render_keys(self) -> None:
        try:
            bar = self.query_one("#keys", KeyBar)
        except NoMatches:
            return
        context, typing = self._key_context()
        bar.update(views.key_bar(context, max(20, self.size.width - 1), typing))

    def check_action(self, action: str, parameters) -> bool | None:
        if action in BASE_ONLY and isinstance(self.screen, ModalScreen):
            return False
        return True

    # ------------------------------------------------------------ diagnoses

    def _show_diagnoses(self, result, seconds: float) -> None:
        old = {views.diag_key(d) for d in self.diagnoses}
        had_result = self.result is not None
        self.result, self.diagnoses, self.last_seconds = result, result.diagnoses, seconds
        for s in self._old_scans:
            s.close()
        self._old_scans.clear()
        new = [d for d in self.diagnoses if views.diag_key(d) not in old]
        if had_result and new:
            if isinstance(self.screen, ModalScreen):  # a toast there would cover the modal
                self.unseen += len(new)
            else:
                self.notify("New: " + "; ".join(views.safe(d.title) for d in new[:3]), title="New diagnosis",
                            markup=False)
        self._fill_diagnoses(keep_cursor=False)
        self._render_machine()
        self._render_status()

    def _fill_diagnoses(self, keep_cursor: bool) -> None:
        table = self.query_one("#diag-table", DataTable)
        row = table.cursor_row if keep_cursor else 0
        cols = views.diag_columns([views.safe(d.symptom) for d in self.diagnoses], table.size.width or self.size.width)
        table.clear(columns=True)
        table.add_column("severity", width=cols.severity, key="sev")
        table.add_column("symptom", width=cols.symptom, key="symptom")
        table.add_column("title", width=cols.title, key="title")
        for d in self.diagnoses:
            table.add_row(*views.diag_row(d, cols), key=views.diag_key(d))
        if self.diagnoses:
            row = min(row or 0, len(self.diagnoses) - 1)
            table.move_cursor(row=row)
            self._show_detail(self.diagnoses[row])
        else:
            self._placeholder()

    def _placeholder(self) -> None:
        """What the detail pane says while there is no diagnosis: what is running, or what to do."""
        if self.diagnoses:
            return
        if self.progress.busy():
            msg = self.progress.text().replace("probing", "probing the machine").capitalize()
            msg += "\nDiagnoses appear here as soon as they are found."
        elif self.result is not None:
            msg = "No known problem found." + ("" if self.result.scan or self.result.lines else
                                                "\nOpen a log (o) or paste one (p) to diagnose a job.")
        else:
            msg = "Open a log (o) or paste one (p) to diagnose a job."
        try:
            self.query_one("#diag-head", Static).update(msg)
        except NoMatches:
            return
        self.query_one("#diag-explain", Markdown).update("")
        self.query_one("#diag-evidence", Static).update("")
        self.query_one("#diag-fixes", Static).update("")

    @on(DataTable.RowHighlighted, "#diag-table")
    def _row(self, event: DataTable.RowHighlighted) -> None:
        d = self._diagnosis(event.row_key.value if event.row_key else None)
        if d and self.is_running:  # a highlight can arrive while the app shuts down
            self._show_detail(d)

    @on(DataTable.RowSelected, "#diag-table")
    def _row_selected(self) -> None:
        if self.diagnoses:
            self.query_one("#diag-pane").add_class("detail-only")
            self.query_one("#diag-detail").focus()
            self._render_keys()

    def _diagnosis(self, key: str | None):
        return next((d for d in self.diagnoses if views.diag_key(d) == key), None)

    def selected(self):
        table = self.query_one("#diag-table", DataTable)
        if not self.diagnoses or table.cursor_row is None or table.cursor_row >= len(self.diagnoses):
            return None
        return self.diagnoses[table.cursor_row]

    def _show_detail(self, d) -> None:
        from troubleshoot.report.text import action_line  # and the model: the rules job loads them, after the first frame

        head = Text()
        head.append(f"{views.SEV_MARK.get(d.severity, views.safe(d.severity))}  ",
                    style=views.SEV_STYLE.get(d.severity, ""))
        head.append(views.safe(d.title), style="bold")
        action = action_line(d)
        if action:
            head.append(f"\n{views.safe(action)}", style="bold")
        head.append(f"\nsymptom {views.safe(d.symptom)} · rule {views.safe(d.rule.id)} · confidence {d.confidence:.2f}")
        for n in d.notes:
            head.append(f"\nnote: {views.safe(n)}", style="italic")
        self.query_one("#diag-head", Static).update(head)
        self.query_one("#diag-explain", Markdown).update(d.explain or "")
        ev = Text("Evidence", style="bold underline")
        ev.append("  (l: the log, n/N jump)\n" if any(e.source == "log" for e in d.evidence) else "\n", style="dim")
        for e in d.evidence:
            if e.source == "log":
                ev.append(f"{e.line:>7} │ ", style="dim")
                a, b = e.span or (0, 0)
                ev.append(views.safe(e.text[:a]))
                ev.append(views.safe(e.text[a:b]), style="bold reverse")
                ev.append(views.safe(e.text[b:]) + "\n")
            else:
                ev.append("   fact │ ", style="dim")
                ev.append(views.safe(e.text) + "\n")
        self.query_one("#diag-evidence", Static).update(ev)
        fx = Text("Fixes (f: preview)\n", style="bold underline")
        for f in d.fixes:
            fx.append(f"• {views.safe(f.title or f.fixer)}  ({views.safe(f.fixer)})\n")
        if not d.fixes:
            fx.append("none\n")
        self.query_one("#diag-fixes", Static).update(fx)
        # Another diagnosis starts at its top, not where the previous one was scrolled to.
        self.query_one("#diag-detail", VerticalScroll).scroll_home(animate=False)

    FOCUS = {"diagnoses": "#diag-table", "machine": "#machine-scroll", "log": "#log-view", "rules": "#rules-table",
             "history": "#history-table"}

    def action_show_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab
        if tab == "log":
            self.query_one("#log-switch", ContentSwitcher).current = "log-view"
        # Focus moves with the tab: a focused widget left in a hidden pane would pull it back.
        self.query_one(self.FOCUS[tab]).focus()
        self._render_keys()

    def action_back(self) -> None:
        pane = self.query_one("#diag-pane")
        if pane.has_class("detail-only"):
            pane.remove_class("detail-only")
            self.query_one("#diag-table").focus()
            self._render_keys()
            return
        focused = self.screen.focused
        if focused is not None and focused.id == "rules-filter" and focused.value:
            focused.value = ""
            return
        if focused is not None and focused.id in ("rules-filter",):
            self.query_one("#rules-table").focus()
            return
        if focused is not None and focused.id in ("log-path", "log-text"):
            self.action_show_tab("log")
            return
        self.action_show_tab("diagnoses")

    def action_preview_fix(self) -> None:
        d = self.selected()
        if d is None:
            self.notify("Select a diagnosis first.", severity="warning")
            return
        if not d.fixes:
            self.notify("This diagnosis names no fix.", severity="warning")
            return
        facts = self.facts  # the facts the diagnosis was made with plan its fixes
        self.push_screen(FixScreen(d, self.ctx, lambda needed: facts), callback=lambda _: self._modal_closed())

    def _modal_closed(self) -> None:
        self._stale.add("history")
        self._fill_visible()
        if self.unseen:
            self.notify(f"{self.unseen} new diagnosis(es) arrived meanwhile.", title="New diagnosis")
            self.unseen = 0
            self._render_status()

    # ------------------------------------------------------------ log: open, paste, view

    def action_open_log(self) -> None:
        self.query_one(TabbedContent).active = "log"
        self.query_one("#log-path", Input).focus()
        self._render_keys()

    @on(Input.Submitted, "#log-path")
    def _open_log(self, event: Input.Submitted) -> None:
        from troubleshoot.errors import TroubleshootError

        path = os.path.expanduser(event.value.strip())
        if not path:
            return
        try:
            self.ctx.log_sources([path])  # as `diagnose --log` takes it: a file, a folder of rank logs, a glob
        except TroubleshootError as exc:
            self.notify(views.safe(exc), severity="error", markup=False)
            return
        self.log_path, self.pasted = path, None
        self.diagnose()
        self.action_show_tab("diagnoses")

    def action_paste(self) -> None:
        self.query_one(TabbedContent).active = "log"
        self.query_one("#log-switch", ContentSwitcher).current = "log-text"
        self.query_one("#log-text", TextArea).focus()
        self._render_keys()

    def _paste_open(self) -> bool:
        return (self.query_one(TabbedContent).active == "log"
                and self.query_one("#log-switch", ContentSwitcher).current == "log-text")

    def action_diagnose(self) -> None:
        """ctrl+r: the paste area's text when it is open, else the same log again (read anew)."""
        if self._paste_open():
            self._diagnose_paste()
            return
        if self.do_probe and self.query_one(TabbedContent).active == "machine":
            self.progress.probes_done = 0
            self._run_probes()
            return
        self.scan_key = None
        self.diagnose()

    @on(Button.Pressed, "#diagnose-paste")
    def _diagnose_paste(self) -> None:
        text = self.query_one("#log-text", TextArea).text
        if not text.strip():
            self.action_paste()
            self.notify("Paste a log into the text area first.", severity="warning")
            return
        if len(text) > PASTE_LIMIT:
            self.notify("Pasted text is larger than 50 MB: save it to a file and open that.", severity="error")
            return
        self.pasted = text
        self.diagnose()
        self.action_show_tab("diagnoses")

    @on(Button.Pressed, "#clear-paste")
    def action_clear_paste(self) -> None:
        self.query_one("#log-text", TextArea).text = ""
        self.action_paste()

    def _show_log(self) -> None:
        """The Log tab: the log just diagnosed with its evidence lines highlighted."""
        path, pasted = self.scan_key or (None, None)
        view = self.query_one("#log-view", LogView)
        if path is None and pasted is None:
            view.show([], [])
            self.query_one("#log-note", Static).update("No log yet: o opens a file, p pastes one.")
            return
        if pasted is None and len(self.scan_logs) > 1:
            rows, note = rows_for_logs(self.diagnoses, len(self.scan_logs))
        else:
            rows, note = rows_for(pasted, path, self.diagnoses)
        ev = views.evidence_lines(self.diagnoses)
        view.show(rows, ev)
        name = "pasted log" if pasted is not None else path
        what = f"{len(ev)} evidence line(s): n/N jump" if ev else "no evidence line"
        self.query_one("#log-note", Static).update(views.plain(f"{name} · {what}" + (f" · {note}" if note else "")))

    # ------------------------------------------------------------ machine

    def _render_probe_status(self) -> None:
        parts = [f"{a}: {s}" for a, s in self.probe_status.items()]
        try:
            status = self.query_one("#probe-status", Static)
        except NoMatches:  # a probe reported while the app was shutting down
            return
        if not self.do_probe and not self.snapshot_path:
            status.update("Probes not run (--no-probe): diagnoses use the log alone.")
            return
        status.update(views.plain("Probes  " + "  ·  ".join(parts)) if parts else "Probes starting…")

    def _render_machine(self) -> None:
        from troubleshoot.report.probe_text import render as probe_text

        try:
            gpu = self.query_one("#gpu-table", Static)
        except NoMatches:
            return
        facts = self.facts or {}
        gpu.update(views.gpu_view(self.facts, probing=self.do_probe and self.progress.probes_total > 0))
        text = terminal_safe(probe_text(facts)) if facts else ("No facts yet." if self.do_probe or self.snapshot_path
                                                                  else "No machine facts (--no-probe).")
        used = self._facts_used()
        if used:
            text += "\nFacts used by the diagnoses:\n" + "\n".join(
                f"  ★ {views.safe(path)} = {views.safe(val)}   ({views.safe(rule)})" for path, val, rule in used)
        self.query_one("#machine-facts", Static).update(text)

    def _facts_used(self) -> list[tuple[str, str, str]]:
        out = []
        for d in self.diagnoses:
            for e in d.evidence:
                if e.source == "fact":
                    out.append((e.path, e.text.split(" = ", 1)[-1], d.rule.id))
        return out

    # ------------------------------------------------------------ rules, history, export

    def action_filter_rules(self) -> None:
        self.query_one(TabbedContent).active = "rules"
        self.query_one("#rules-filter", Input).focus()

    @on(Input.Changed, "#rules-filter")
    def _filter_changed(self) -> None:
        self._fill_rules()

    @on(Input.Submitted, "#rules-filter")
    def _filter_done(self) -> None:
        self.query_one("#rules-table").focus()

    def _fill_rules(self) -> None:
        if self.ruleset is None:
            return
        query = self.query_one("#rules-filter", Input).value
        rules = [r for r in sorted(self.ruleset.rules, key=lambda r: (r.symptom, r.id)) if views.rule_matches(r, query)]
        table = self.query_one("#rules-table", DataTable)
        cols = views.rule_columns(rules, table.size.width or self.size.width)
        table.clear(columns=True)
        table.add_column("id", width=cols.id)
        table.add_column("symptom", width=cols.symptom)
        table.add_column("sev.", width=cols.severity)
        for r in rules:
            table.add_row(*views.rule_row(r, cols), key=r.id)
        self.query_one("#rules-count", Static).update(f"{len(rules)} of {len(self.ruleset.rules)}" if query.strip() else "")
        if not rules:
            self.query_one("#rule-text", Static).update("No rule matches the filter." if query.strip() else "")

    @on(DataTable.RowHighlighted, "#rules-table")
    def _rule_row(self, event: DataTable.RowHighlighted) -> None:
        rule = self.ruleset.get(event.row_key.value) if self.ruleset and event.row_key else None
        if rule is None:
            return
        self.query_one("#rule-text", Static).update(views.rule_detail(rule))
        self.query_one("#rule-detail", VerticalScroll).scroll_home(animate=False)

    def action_reload_rules(self) -> None:
        self._load_rules(again=True)
        self.notify("Reloading rules…")

    def refresh_history(self) -> None:
        from troubleshoot.fixes import journal

        table = self.query_one("#history-table", DataTable)
        width = table.size.width or self.size.width
        table.clear(columns=True)
        table.add_columns("id", "status", "where", "fix")
        for eid, e in journal.entries():
            table.add_row(*views.history_row(eid, e, width), key=eid)

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
            from troubleshoot.fixes import service

            try:
                res = service.undo(eid)
            except TroubleshootError as exc:
                self.notify(views.safe(exc), severity="error", timeout=10, markup=False)
                return
            msg = f"Restored {len(res.restored)} file(s), removed {len(res.removed)}."
            if res.not_reversed:
                msg += " Not reversed (commands): " + "; ".join(views.safe(c) for c in res.not_reversed)
            self.notify(msg, title=f"Undid {eid}", timeout=10, markup=False)
            self.refresh_history()

        self.push_screen(ConfirmScreen(f"Undo {eid}? Every file it changed is restored byte for byte."), callback=done)

    def action_export(self) -> None:
        default = Path(f"troubleshoot-report-{time.strftime('%Y%m%d-%H%M%S')}.md").resolve()
        self.push_screen(ExportScreen(str(default)), callback=self._export_to)

    def _export_to(self, path: str | None) -> None:
        from troubleshoot import safeio
        from troubleshoot.tui.export import report_markdown

        if not path:
            return
        source = self.log_path or ("pasted log" if self.pasted else "machine facts")
        body = report_markdown(self.diagnoses, source, self.facts, with_log=bool(self.pasted or self.log_path))
        try:
            safeio.atomic_write(path, body.encode())
        except OSError as exc:
            self.notify(f"cannot write {views.safe(path)}: {exc.strerror or exc}", severity="error", markup=False)
            return
        self.notify(f"Report saved to {views.safe(path)}", title="Export", timeout=8, markup=False)

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):  # F1 again closes it
            self.screen.dismiss(None)
            return
        self.push_screen(HelpScreen())

    async def action_quit(self) -> None:
        # Stop first: probes stop waiting and their children die, a scan stops at its next chunk.
        self.bg.stop()
        if hasattr(self._driver, "exit_now"):  # the `tui` command: the process ends in there
            self._driver.exit_now()
        self.exit()

    def on_unmount(self) -> None:
        self.bg.stop()
        for s in [self.scanned, *self._old_scans]:
            if s is not None:
                s.close()

    def get_system_commands(self, screen):
        yield from super().get_system_commands(screen)
        for title, help_, action in (
            ("Paste a log", "Open the paste area (p); ctrl+r diagnoses it", self.action_paste),
            ("Open a log file", "Type a path to a log (o)", self.action_open_log),
            ("Diagnose again", "Read the log again and re-run the diagnosis (ctrl+r)", self.action_diagnose),
            ("Clear the paste area", "Empty the pasted text (ctrl+l)", self.action_clear_paste),
            ("Preview fix", "Preview the fixes of the selected diagnosis (f)", self.action_preview_fix),
            ("Next evidence line", "In the Log tab: jump to the next quoted line (n)",
             lambda: (self.action_show_tab("log"), self.query_one(LogView).action_next())),
            ("Previous evidence line", "In the Log tab: jump to the previous quoted line (N)",
             lambda: (self.action_show_tab("log"), self.query_one(LogView).action_previous())),
            ("Export report", "Save a Markdown report; asks for the path (e)", self.action_export),
            ("Filter rules", "Show rules whose id, symptom or text match (/)", self.action_filter_rules),
            ("Reload rules", "Reload rule files after editing them (R)", self.action_reload_rules),
            ("Undo selected fix", "Undo the fix selected in History (u)", self.action_undo_selected),
            ("Show diagnoses", "Ranked diagnoses (d)", lambda: self.action_show_tab("diagnoses")),
            ("Show machine", "GPUs, driver, CUDA, frameworks, Docker, IO (m)", lambda: self.action_show_tab("machine")),
            ("Show log", "The log with its evidence lines (l)", lambda: self.action_show_tab("log")),
            ("Show rules", "Browse loaded rules and lint problems (r)", lambda: self.action_show_tab("rules")),
            ("Show history", "Applied fixes; undo (h)", lambda: self.action_show_tab("history")),
            ("Help", "Keys and what each view shows (? or F1)", self.action_help),
        ):
            yield SystemCommand(title, help_, action)


def run_tui(ctx: CommandContext | None = None, fast_exit: bool = False, early=None, **kwargs) -> int:
    """Run the TUI on the command's context (or on one built from `kwargs`, TroubleshootApp's);
    the exit code is non-zero when it crashed (Textual prints the error once the terminal is
    restored). `fast_exit`: `q` ends the process as soon as the terminal is restored
    (tui.driver.quick_exit_driver): only for the `tui` command. `early` (tui.early.EarlyKeys):
    the keys watched since the command started."""
    app = TroubleshootApp(ctx, driver_class=quick_exit_driver(early) if fast_exit else None, **kwargs)
    app.run()
    code = app.return_code or 0
    if early is not None:
        early.finish()
    return code
