"""The footer: help and quit always, then the keys of the view in focus that fit (tui.views.KEYS)."""

from __future__ import annotations

from textual.message import Message
from textual.widgets import Static

from troubleshoot.tui.views import key_bar


class KeyBar(Static):
    class Changed(Message):
        """A view changed what its keys do without moving the focus (the app watches the focus
        itself): the footer is drawn again."""

    def show(self, context: str, typing: bool, width: int) -> None:
        """`context`: a view of tui.views.KEYS; `typing`: the focus is in a text field."""
        self.update(key_bar(context, max(20, width - 1), typing))
