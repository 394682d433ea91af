"""The Diagnoses tab: the ranked diagnoses above (or beside) the detail of the selected one.

It renders report.views.DiagnosisView objects and owns its table, the selection and the
full-size detail (`enter` opens it, `esc` closes it); the app hands it the views of each
diagnosis and the words to show while there is none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual import on
from textual.actions import SkipAction
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.css.query import NoMatches
from textual.widgets import DataTable, Markdown, Static

from troubleshoot.tui.datamd import DataMarkdown
from troubleshoot.tui.keybar import KeyBar
from troubleshoot.tui.views import SEV_MARK, SEV_STYLE, diag_columns, diag_row

if TYPE_CHECKING:
    from troubleshoot.report.views import DiagnosisView


class DiagnosesPane(Horizontal):
    BINDINGS = [Binding("escape", "back", "Back", show=False)]

    def __init__(self) -> None:
        super().__init__(id="diag-pane", classes="pane")
        self.views: list[DiagnosisView] = []

    def compose(self) -> ComposeResult:
        yield DataTable(id="diag-table", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(id="diag-detail"):
            yield Static("", id="diag-head", markup=False)
            yield DataMarkdown("", id="diag-explain")
            yield Static("", id="diag-evidence", markup=False)
            yield Static("", id="diag-fixes", markup=False)

    @property
    def detail_only(self) -> bool:
        return self.has_class("detail-only")

    def show(self, views: list[DiagnosisView], keep_cursor: bool, width: int) -> bool:
        """Fill the table (cut to `width` when it has none yet); False when there is nothing to
        show, for the caller to say why."""
        table = self.query_one("#diag-table", DataTable)
        row = table.cursor_row if keep_cursor else 0
        self.views = views
        cols = diag_columns([v.symptom for v in views], table.size.width or width)
        table.clear(columns=True)
        table.add_column("severity", width=cols.severity, key="sev")
        table.add_column("symptom", width=cols.symptom, key="symptom")
        table.add_column("title", width=cols.title, key="title")
        for v in views:
            table.add_row(*diag_row(v, cols), key=v.key)
        if not views:
            return False
        row = min(row or 0, len(views) - 1)
        table.move_cursor(row=row)
        self.show_detail(views[row])
        return True

    def placeholder(self, message: str) -> None:
        """What the detail says while there is no diagnosis: what is running, or what to do."""
        try:
            self.query_one("#diag-head", Static).update(message)
        except NoMatches:  # the app is shutting down
            return
        self.query_one("#diag-explain", Markdown).update("")
        self.query_one("#diag-evidence", Static).update("")
        self.query_one("#diag-fixes", Static).update("")

    def selected_row(self) -> int | None:
        """The index of the selected diagnosis in the last views shown, or None."""
        row = self.query_one("#diag-table", DataTable).cursor_row
        return row if self.views and row is not None and row < len(self.views) else None

    @on(DataTable.RowHighlighted, "#diag-table")
    def _row(self, event: DataTable.RowHighlighted) -> None:
        key = event.row_key.value if event.row_key else None
        v = next((v for v in self.views if v.key == key), None)
        if v and self.app.is_running:  # a highlight can arrive while the app shuts down
            self.show_detail(v)

    @on(DataTable.RowSelected, "#diag-table")
    def _row_selected(self) -> None:
        if self.views:
            self.add_class("detail-only")
            self.query_one("#diag-detail").focus()
            self.post_message(KeyBar.Changed())

    def leave_detail(self) -> bool:
        """Back from the full-size detail to the list; False when it was not open."""
        if not self.detail_only:
            return False
        self.remove_class("detail-only")
        self.query_one("#diag-table").focus()
        self.post_message(KeyBar.Changed())
        return True

    def action_back(self) -> None:
        if not self.leave_detail():
            raise SkipAction()  # the app's: back to this tab

    def show_detail(self, v: DiagnosisView) -> None:
        self.query_one("#diag-head", Static).update(detail_head(v))
        self.query_one("#diag-explain", Markdown).update(v.explain)
        self.query_one("#diag-evidence", Static).update(evidence_text(v))
        self.query_one("#diag-fixes", Static).update(fixes_text(v))
        # Another diagnosis starts at its top, not where the previous one was scrolled to.
        self.query_one("#diag-detail", VerticalScroll).scroll_home(animate=False)


def detail_head(v: DiagnosisView) -> Text:
    head = Text()
    head.append(f"{SEV_MARK.get(v.severity, v.severity)}  ", style=SEV_STYLE.get(v.severity, ""))
    head.append(v.title, style="bold")
    if v.action:
        head.append(f"\n{v.action}", style="bold")
    head.append(f"\nsymptom {v.symptom} · rule {v.rule} · confidence {v.confidence:.2f}")
    for n in v.notes:
        head.append(f"\nnote: {n}", style="italic")
    return head


def evidence_text(v: DiagnosisView) -> Text:
    out = Text("Evidence", style="bold underline")
    out.append("  (l: the log, n/N jump)\n" if any(e.source == "log" for e in v.evidence) else "\n", style="dim")
    for e in v.evidence:
        if e.source == "log":
            out.append(f"{e.line:>7} │ ", style="dim")
            out.append(e.before)
            out.append(e.match, style="bold reverse")
            out.append(e.after + "\n")
        else:
            out.append("   fact │ ", style="dim")
            out.append(e.text + "\n")
    return out


def fixes_text(v: DiagnosisView) -> Text:
    out = Text("Fixes (f: preview)\n", style="bold underline")
    for f in v.fixes:
        out.append(f"• {f.title}  ({f.fixer})\n")
    if not v.fixes:
        out.append("none\n")
    return out
