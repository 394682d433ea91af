"""The Log tab: the log diagnosed with its evidence lines highlighted, a box to open another log
by its path, and the paste area (`p`; ctrl+r diagnoses what was pasted, ctrl+l clears it).

It owns what is shown and typed here and posts what the user asks for (`Open`, `Paste`); the
app reads the log and diagnoses it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from textual import on
from textual.actions import SkipAction
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Button, ContentSwitcher, Input, Static, TextArea

from troubleshoot.tui.keybar import KeyBar
from troubleshoot.tui.logview import LogView, rows_for, rows_for_logs
from troubleshoot.tui.views import evidence_lines, plain, plural

if TYPE_CHECKING:
    from troubleshoot.report.views import DiagnosisView

PASTE_LIMIT = 50 << 20
PASTE_HINT = ("Paste a log here (your terminal's paste: ctrl+shift+v, shift+insert or the mouse), "
              "then ctrl+r to diagnose it.  ctrl+l clears.  esc leaves.")


class LogPane(Vertical):
    BINDINGS = [Binding("escape", "leave", "Leave", show=False)]

    class Open(Message):
        """Open this log (a file, a folder of rank logs, a glob) and diagnose it."""

        def __init__(self, path: str) -> None:
            super().__init__()
            self.path = path

    class Paste(Message):
        """Diagnose this pasted text."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def compose(self) -> ComposeResult:
        with Horizontal(id="log-bar"):
            yield Input(placeholder="path to a log file, Enter to open (o)", id="log-path", compact=True)
            yield Button("Diagnose ^r", id="diagnose-paste", variant="primary", compact=True)
            yield Button("Clear ^l", id="clear-paste", compact=True)
        yield Static("", id="log-note", markup=False)
        with ContentSwitcher(initial="log-view", id="log-switch"):
            yield LogView(id="log-view")
            yield TextArea(id="log-text", soft_wrap=False, show_line_numbers=True, placeholder=PASTE_HINT)

    def set_path(self, path: str) -> None:
        self.query_one("#log-path", Input).value = path

    def focus_path(self) -> None:
        self.query_one("#log-path", Input).focus()

    def open_paste(self) -> None:
        self.query_one("#log-switch", ContentSwitcher).current = "log-text"
        self.query_one("#log-text", TextArea).focus()

    def paste_open(self) -> bool:
        return self.query_one("#log-switch", ContentSwitcher).current == "log-text"

    def show_view(self) -> None:
        """The log itself, not the paste area, in view and in focus."""
        self.query_one("#log-switch", ContentSwitcher).current = "log-view"
        self.query_one("#log-view", LogView).focus()

    def clear_paste(self) -> None:
        self.query_one("#log-text", TextArea).text = ""

    def checked_paste(self) -> str | None:
        """The pasted text when it can be diagnosed; else None, and the user is told why."""
        text = self.query_one("#log-text", TextArea).text
        if not text.strip():
            self.open_paste()
            self.post_message(KeyBar.Changed())
            self.notify("Paste a log into the text area first.", severity="warning")
            return None
        if len(text) > PASTE_LIMIT:
            self.notify("Pasted text is larger than 50 MB: save it to a file and open that.", severity="error")
            return None
        return text

    @on(Input.Submitted, "#log-path")
    def _open(self, event: Input.Submitted) -> None:
        path = os.path.expanduser(event.value.strip())
        if path:
            self.post_message(self.Open(path))

    @on(Button.Pressed, "#diagnose-paste")
    def _diagnose_paste(self) -> None:
        text = self.checked_paste()
        if text is not None:
            self.post_message(self.Paste(text))

    @on(Button.Pressed, "#clear-paste")
    def _clear(self) -> None:
        self.clear_paste()
        self.open_paste()
        self.post_message(KeyBar.Changed())

    def action_leave(self) -> None:
        """esc in the path box or the paste area: back to the log."""
        focused = self.screen.focused
        if focused is None or focused.id not in ("log-path", "log-text"):
            raise SkipAction()
        self.show_view()
        self.post_message(KeyBar.Changed())

    def show_log(self, path: str | None, pasted: str | None, diagnoses: list[DiagnosisView], logs: int) -> None:
        """The log just diagnosed (`path`, or the `pasted` text; `logs` read from it) with the
        lines `diagnoses` quote highlighted."""
        view = self.query_one("#log-view", LogView)
        if path is None and pasted is None:
            view.show([], [])
            self.query_one("#log-note", Static).update("No log yet: o opens a file, p pastes one.")
            return
        if pasted is None and logs > 1:
            rows, note = rows_for_logs(diagnoses, logs)
        else:
            rows, note = rows_for(pasted, path, diagnoses)
        ev = evidence_lines(diagnoses)
        view.show(rows, ev)
        name = "pasted log" if pasted is not None else path
        what = f"{plural(len(ev), 'evidence line')}: n/N jump" if ev else "no evidence line"
        self.query_one("#log-note", Static).update(plain(f"{name} · {what}" + (f" · {note}" if note else "")))
