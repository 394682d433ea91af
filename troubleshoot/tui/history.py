"""The History tab: the applied fixes, newest first (report.historyview.HistoryView); `u` undoes the
selected one through the fix service, after a confirmation."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from troubleshoot.tui.screens import ConfirmScreen
from troubleshoot.tui.views import history_row, plural, safe

if TYPE_CHECKING:
    from troubleshoot.report.historyview import HistoryView


class HistoryPane(Vertical):
    def __init__(self) -> None:
        super().__init__()
        self.stale = True  # read from the journal when next shown (it changes behind the app)
        self.views: dict[str, HistoryView] = {}  # by journal id, as last read

    def compose(self) -> ComposeResult:
        yield Static("Applied fixes, newest first. Select one and press u to undo it.", id="history-help")
        yield DataTable(id="history-table", cursor_type="row", zebra_stripes=True)

    def fill_if_stale(self) -> None:
        if self.stale:
            self.stale = False
            self.fill()

    def fill(self) -> None:
        from troubleshoot.fixes import journal
        from troubleshoot.report.historyview import history_view

        table = self.query_one("#history-table", DataTable)
        width = table.size.width or self.app.size.width
        table.clear(columns=True)
        table.add_columns("id", "status", "where", "fix")
        self.views = {eid: history_view(eid, entry) for eid, entry in journal.entries()}
        for eid, view in self.views.items():
            table.add_row(*history_row(view, width), key=eid)

    def has_entries(self) -> bool:
        return self.query_one("#history-table", DataTable).row_count > 0

    def undo_selected(self) -> None:
        """Ask, then restore every file the selected fix changed."""
        table = self.query_one("#history-table", DataTable)
        eid = table.coordinate_to_cell_key((table.cursor_row, 0)).row_key.value
        view = self.views.get(eid)
        if view is not None and not view.undoable:  # nothing to confirm: say why at once
            why = view.title if view.status == "corrupt" else f"{view.id} was already undone."
            self.notify(why, severity="error", timeout=10, markup=False)
            return

        def done(confirmed: bool | None) -> None:
            if not confirmed:
                return
            from troubleshoot.errors import TroubleshootError
            from troubleshoot.fixes import service

            try:
                res = service.undo(eid)
            except TroubleshootError as exc:
                self.notify(safe(exc), severity="error", timeout=10, markup=False)
                return
            msg = f"Restored {plural(len(res.restored), 'file')}, removed {plural(len(res.removed), 'file')}."
            if res.not_reversed:
                msg += " Not reversed (commands): " + "; ".join(safe(c) for c in res.not_reversed)
            self.notify(msg, title=f"Undid {eid}", timeout=10, markup=False)
            self.fill()

        self.app.push_screen(ConfirmScreen(f"Undo {eid}? Every file it changed is restored byte for byte."),
                             callback=done)
