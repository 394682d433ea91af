"""The Textual front door: machine, log, ranked diagnoses, fixes, rules, history.

It takes the command's `context.CommandContext` like every CLI command (plugins, probes, the
snapshot, rules, lint and the fix service all come from it); its background jobs (tui/jobs.py)
drive the same pipeline, so input never blocks and `q` never waits for them; it holds no
diagnosis logic of its own. A log (a file, a folder of rank logs, pasted text) is scanned once:
facts that arrive later (probes finishing) re-run only the diagnosis over the kept scan; a
followed log is read again when `sources.LogTail` says it gained complete lines. Designed at
80x24: below 120 columns the panes stack, from 120 they sit side by side.

Each tab is a widget of its own module (tui/diagnoses.py, machine.py, logtab.py, rules.py,
history.py) that owns its widgets, its selection and its local keys; this app holds what they
share (the facts, the diagnoses and their views, the rules), the keys that work from every tab,
the status line and the footer.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from textual import on
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.screen import ModalScreen
from textual.widgets import Input, Static, TabbedContent, TabPane, TextArea

from troubleshoot.tui import views
from troubleshoot.tui.background import Background
from troubleshoot.tui.diagnoses import DiagnosesPane
from troubleshoot.tui.driver import quick_exit_driver
from troubleshoot.tui.history import HistoryPane
from troubleshoot.tui.jobs import Jobs
from troubleshoot.tui.keybar import KeyBar
from troubleshoot.tui.logtab import LogPane
from troubleshoot.tui.machine import MachinePane
from troubleshoot.tui.notices import Notice, Notices, default_timeout
from troubleshoot.tui.rules import RulesPane
from troubleshoot.tui.screens import ExportScreen, FixScreen, HelpScreen

if TYPE_CHECKING:
    from troubleshoot.context import CommandContext

# Actions that make no sense under a modal (a confirmation, the fix preview): the app ignores them there.
BASE_ONLY = {"show_tab", "preview_fix", "paste", "open_log", "diagnose", "clear_paste", "filter_rules",
             "reload_rules", "export", "undo_selected", "back"}
# The widget each tab gives the focus to: a focused widget left in a hidden tab would pull it back.
FOCUS = {"diagnoses": "#diag-table", "machine": "#machine-scroll", "log": "#log-view", "rules": "#rules-table",
         "history": "#history-table"}


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
        self.do_probe = opts.probe and opts.snapshot is None
        self.tail = None  # the followed log (sources.LogTail), once the first scan of it is done
        self.scan_logs: list = []  # the logs of the kept scan (sources.LogSource)
        self.facts: dict | None = None
        self.ruleset = None
        self.diagnoses: list = []
        self.diagnosis_views: list = []  # what the tabs show of each diagnosis (report.views)
        self.result = None
        self.pasted: str | None = None
        self.probe_status: dict[str, str] = {}  # probe name -> its state, once the probes are known
        self.progress = views.Progress(rules=True)
        self.bg = Background(self)
        self.scanned = None  # the kept scan of the current log (pipeline.Scanned)
        self._facts_told: tuple | None = None  # the log whose facts were last told, and what was said
        self.facts_word = ""  # whose facts judged the log shown, for the status line
        self._old_scans: list = []  # replaced scans, closed once a newer diagnosis is shown
        self.scan_key: tuple | None = None  # (path, pasted text) the kept scan is of
        self.scanning_key: tuple | None = None  # the one being scanned now
        self.scans = 0  # how many times a log was read (facts arriving later never add one)
        self.unseen = 0  # new diagnoses that arrived while a modal was up
        self.linted = False
        self._laid_out_width = 0
        self.notices = Notices()  # told while a dialog was up, told again when it closes

    # ------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        yield Static("", id="status", markup=False)
        with TabbedContent(initial="diagnoses"):
            with TabPane("Diagnoses", id="diagnoses"):
                yield DiagnosesPane()
            with TabPane("Machine", id="machine"):
                yield MachinePane()
            with TabPane("Log", id="log"):
                yield LogPane()
            with TabPane("Rules", id="rules"):
                yield RulesPane()
            with TabPane("History", id="history"):
                yield HistoryPane()
        yield KeyBar("", id="keys", markup=False)

    @property
    def diagnoses_pane(self) -> DiagnosesPane:
        return self.query_one(DiagnosesPane)

    @property
    def machine_pane(self) -> MachinePane:
        return self.query_one(MachinePane)

    @property
    def log_pane(self) -> LogPane:
        return self.query_one(LogPane)

    @property
    def rules_pane(self) -> RulesPane:
        return self.query_one(RulesPane)

    @property
    def history_pane(self) -> HistoryPane:
        return self.query_one(HistoryPane)

    @property
    def tab(self) -> str:
        return self.query_one(TabbedContent).active

    def on_mount(self) -> None:
        if hasattr(self._driver, "app_mounted"):  # tui.early: a `q` before the first frame ends it at once
            self._driver.app_mounted(self.bg.stop)  # before any job starts: that exit stops them too
            self.call_after_refresh(self._driver.app_drawn)
        self.watch(self.screen, "focused", lambda _: self._render_keys())
        self.screen_change_signal.subscribe(self, self._screen_changed)
        self.ctx.warn = self._warn  # a hook that fails, a snapshot's warnings: on the screen, not under it
        self._render_probe_status()
        self._render_machine()
        self._render_status()
        self.call_after_refresh(self._start_jobs)
        if self.log_path:
            self.log_pane.set_path(self.log_path)
        self._placeholder()
        self.query_one("#diag-table").focus()
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
        self.rules_pane.stale = self.history_pane.stale = True
        self._fill_diagnoses(keep_cursor=True)
        self._fill_visible()
        self._render_keys()

    def _fill_visible(self) -> None:
        if self.tab == "rules":
            self.rules_pane.fill_if_stale()
        elif self.tab == "history":
            self.history_pane.fill_if_stale()

    @on(TabbedContent.TabActivated)
    def _tab_changed(self) -> None:
        self._render_keys()
        self._fill_visible()
        if self.tab == "rules":
            self._lint()

    # ------------------------------------------------------------ status line and footer

    def _render_status(self) -> None:
        r = self.result
        count = len(self.diagnoses) if r is not None else None
        lines = (r.scan.total_lines if r.scan else r.lines) if r is not None and (r.scan or r.lines) else None
        extra = " · ".join(w for w in (f"{self.unseen} new" if self.unseen else "", self.facts_word) if w)
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
        if self.tab == "diagnoses" and self.diagnoses_pane.detail_only:
            return "detail", typing
        return self.tab or "diagnoses", typing

    def _render_keys(self) -> None:
        try:
            bar = self.query_one("#keys", KeyBar)
        except NoMatches:
            return
        bar.show(*self._key_context(), self.size.width)

    def on_key_bar_changed(self) -> None:
        self._render_keys()

    def notify(self, message: str, *, title: str = "", severity="information", timeout: float | None = None,
               markup: bool = True) -> None:
        """Textual's notification, except while a dialog is up: held until the last one closes
        (tui.notices), for no toast to cover a dialog. Unless told, an acknowledgement stays 3 s,
        a warning or an error 10 s."""
        if threading.get_ident() != self._thread_id:  # Textual's notify may be called from any thread
            self.call_later(self.notify, message, title=title, severity=severity, timeout=timeout, markup=markup)
            return
        timeout = default_timeout(severity) if timeout is None else timeout
        if self.screen_stack and isinstance(self.screen_stack[-1], ModalScreen):
            self.notices.hold(Notice(message, title, severity, timeout, markup))
            return
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)

    def _screen_changed(self, screen) -> None:
        """Back on the main screen: what was told meanwhile, and the diagnoses that arrived."""
        if isinstance(screen, ModalScreen):
            return
        for n in self.notices.release():
            super().notify(n.message, title=n.title, severity=n.severity, timeout=n.timeout, markup=n.markup)
        if self.unseen:
            many = f"{self.unseen} new diagnoses" if self.unseen > 1 else "1 new diagnosis"
            self.notify(f"{many} arrived meanwhile.", title="New diagnosis")
            self.unseen = 0
            self._render_status()

    def check_action(self, action: str, parameters) -> bool | None:
        if action in BASE_ONLY and isinstance(self.screen, ModalScreen):
            return False
        return True

    # ------------------------------------------------------------ what the jobs found, shown

    def _show_diagnoses(self, result) -> None:
        from troubleshoot.report.views import diagnosis_view

        old = {v.key for v in self.diagnosis_views}
        had_result = self.result is not None
        self.result, self.diagnoses = result, result.diagnoses
        self.diagnosis_views = [diagnosis_view(d) for d in self.diagnoses]
        for s in self._old_scans:
            s.close()
        self._old_scans.clear()
        new = [v for v in self.diagnosis_views if v.key not in old]
        if had_result and new:
            if isinstance(self.screen, ModalScreen):  # a toast there would cover the modal
                self.unseen += len(new)
            else:
                self.notify("New: " + "; ".join(v.title for v in new[:3]), title="New diagnosis", markup=False)
        self._fill_diagnoses(keep_cursor=False)
        self._render_machine()
        self._render_status()

    def _fill_diagnoses(self, keep_cursor: bool) -> None:
        if not self.diagnoses_pane.show(self.diagnosis_views, keep_cursor, self.size.width):
            self._placeholder()

    def _placeholder(self) -> None:
        """What the detail pane says while there is no diagnosis: what is running, or what to do."""
        if not self.diagnoses:
            try:
                self.diagnoses_pane.placeholder(views.waiting(self.progress, self.result))
            except NoMatches:  # the app is shutting down
                return

    def selected(self):
        """The diagnosis selected in the Diagnoses tab, or None."""
        row = self.diagnoses_pane.selected_row()
        return None if row is None or row >= len(self.diagnoses) else self.diagnoses[row]

    def _show_log(self) -> None:
        path, pasted = self.scan_key or (None, None)
        self.log_pane.show_log(path, pasted, self.diagnosis_views, len(self.scan_logs))

    def _render_probe_status(self) -> None:
        try:
            pane = self.machine_pane
        except NoMatches:  # a probe reported while the app was shutting down
            return
        pane.show_probes(self.probe_status, probed=self.do_probe or bool(self.snapshot_path))

    def _render_machine(self) -> None:
        try:
            pane = self.machine_pane
        except NoMatches:
            return
        pane.show_facts(self.facts, self.diagnosis_views, probed=self.do_probe or bool(self.snapshot_path),
                        probing=self.do_probe and self.progress.probes_total > 0)

    # ------------------------------------------------------------ keys of every tab

    def action_show_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab
        if tab == "log":
            self.log_pane.show_view()
        self.query_one(FOCUS[tab]).focus()
        self._render_keys()

    def action_back(self) -> None:
        """esc where no tab took it: back from the full-size detail, else to the diagnoses."""
        if not self.diagnoses_pane.leave_detail():
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
        self.history_pane.stale = True
        self._fill_visible()

    def action_open_log(self) -> None:
        self.query_one(TabbedContent).active = "log"
        self.log_pane.focus_path()
        self._render_keys()

    @on(LogPane.Open)
    def _open_log(self, event: LogPane.Open) -> None:
        from troubleshoot.errors import TroubleshootError

        try:
            self.ctx.log_sources([event.path])  # as `diagnose --log` takes it: a file, a folder of rank logs, a glob
        except TroubleshootError as exc:
            self.notify(views.safe(exc), severity="error", markup=False)
            return
        self.log_path, self.pasted = event.path, None
        self.diagnose()
        self.action_show_tab("diagnoses")

    def action_paste(self) -> None:
        self.query_one(TabbedContent).active = "log"
        self.log_pane.open_paste()
        self._render_keys()

    def action_diagnose(self) -> None:
        """ctrl+r: the paste area's text when it is open, else the same log again (read anew)."""
        if self.tab == "log" and self.log_pane.paste_open():
            text = self.log_pane.checked_paste()
            if text is not None:
                self._diagnose_paste(LogPane.Paste(text))
            return
        if self.do_probe and self.tab == "machine":
            self.progress.probes_done = 0
            self._run_probes()
            return
        self.scan_key = None
        self.diagnose()

    @on(LogPane.Paste)
    def _diagnose_paste(self, event: LogPane.Paste) -> None:
        self.pasted = event.text
        self.diagnose()
        self.action_show_tab("diagnoses")

    def action_clear_paste(self) -> None:
        self.log_pane.clear_paste()
        self.action_paste()

    def action_filter_rules(self) -> None:
        self.query_one(TabbedContent).active = "rules"
        self.rules_pane.focus_filter()

    def action_reload_rules(self) -> None:
        self._load_rules(again=True)
        self.notify("Reloading rules…")

    def action_undo_selected(self) -> None:
        if self.tab != "history" or not self.history_pane.has_entries():
            self.notify("Open History (h) and select an applied fix to undo.", severity="warning")
            return
        self.history_pane.undo_selected()

    def action_export(self) -> None:
        from troubleshoot.tui.export import default_path

        self.push_screen(ExportScreen(default_path()), callback=self._export_to)

    def _export_to(self, path: str | None) -> None:
        from troubleshoot.tui.export import save

        if path:
            source = self.log_path or ("pasted log" if self.pasted else "machine facts")
            save(self, path, self.diagnoses, source, self.facts, with_log=bool(self.pasted or self.log_path))

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
        from troubleshoot.tui.commands import palette

        yield from super().get_system_commands(screen)
        for title, help_, action in palette(self):
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
