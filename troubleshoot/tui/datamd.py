"""The Markdown widget for rule text filled in with log and snapshot text (explanations, advice).

The rule's emphasis, lists, code and tables render; nothing in it becomes a link, an image or
HTML, which are shown as written instead: a log line captured as `[Fix it](https://...)` keeps
its URL in sight, and `kill <pid>` keeps its word (Textual drops HTML). Control characters are
made visible, as everywhere text reaches the terminal."""

from __future__ import annotations

from markdown_it import MarkdownIt
from textual.await_complete import AwaitComplete
from textual.widgets import Markdown

from troubleshoot.textsafe import terminal_safe

_AS_TEXT = ["link", "image", "autolink", "linkify", "reference", "html_inline", "html_block"]


def data_parser() -> MarkdownIt:
    return MarkdownIt("gfm-like", {"html": False, "linkify": False}).disable(_AS_TEXT, ignoreInvalid=True)


class DataMarkdown(Markdown):
    def __init__(self, markdown: str = "", **kwargs) -> None:
        super().__init__(markdown, parser_factory=data_parser, open_links=False, **kwargs)

    def update(self, markdown: str) -> AwaitComplete:
        return super().update(terminal_safe(markdown))
