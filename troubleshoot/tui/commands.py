"""The command palette's entries (ctrl+p): every action of the app, found by its name."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterator

from troubleshoot.tui.logview import LogView

if TYPE_CHECKING:
    from textual.app import App


def palette(app: App) -> Iterator[tuple[str, str, Callable[[], object]]]:
    """(title, what it does, the action) for each entry of `app` (tui.app.TroubleshootApp, which
    imports this module), in the order the palette lists them."""
    def in_log(action: str) -> Callable[[], object]:
        return lambda: (app.action_show_tab("log"), getattr(app.query_one(LogView), action)())

    def show(tab: str) -> Callable[[], object]:
        return lambda: app.action_show_tab(tab)

    yield from (
        ("Paste a log", "Open the paste area (p); ctrl+r diagnoses it", app.action_paste),
        ("Open a log file", "Type a path to a log (o)", app.action_open_log),
        ("Diagnose again", "Read the log again and re-run the diagnosis (ctrl+r)", app.action_diagnose),
        ("Clear the paste area", "Empty the pasted text (ctrl+l)", app.action_clear_paste),
        ("Preview fix", "Preview the fixes of the selected diagnosis (f)", app.action_preview_fix),
        ("Next evidence line", "In the Log tab: jump to the next quoted line (n)", in_log("action_next")),
        ("Previous evidence line", "In the Log tab: jump to the previous quoted line (N)", in_log("action_previous")),
        ("Export report", "Save a Markdown report; asks for the path (e)", app.action_export),
        ("Filter rules", "Show rules whose id, symptom or text match (/)", app.action_filter_rules),
        ("Reload rules", "Reload rule files after editing them (R)", app.action_reload_rules),
        ("Undo selected fix", "Undo the fix selected in History (u)", app.action_undo_selected),
        ("Show diagnoses", "Ranked diagnoses (d)", show("diagnoses")),
        ("Show machine", "GPUs, driver, CUDA, frameworks, Docker, IO (m)", show("machine")),
        ("Show log", "The log with its evidence lines (l)", show("log")),
        ("Show rules", "Browse loaded rules and lint problems (r)", show("rules")),
        ("Show history", "Applied fixes; undo (h)", show("history")),
        ("Help", "Keys and what each view shows (? or F1)", app.action_help),
    )
