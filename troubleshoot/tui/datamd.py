"""The Markdown widget for rule text filled in with log and snapshot text (explanations, advice).

The rule's emphasis, lists, code and tables render; nothing in it becomes a link, an image or
HTML, which are shown as written instead: a log line captured as `[Fix it](https://...)` keeps
its URL in sight, and `kill <pid>` keeps its word (Textual drops HTML). Control characters are
made visible, as everywhere text reaches the terminal.

Code blocks (the commands a rule tells the user to run) wrap instead of running off the right
edge: a long `ldd /opt/conda/.../_ext.cpython-310-x86_64-linux-gnu.so` is read whole at 80
columns. A wrapped line continues on rows marked `↪` under its text (indented code under its
indent), and a mouse selection copies the lines as written, without those marks or breaks."""

from __future__ import annotations

from dataclasses import dataclass

from markdown_it import MarkdownIt
from rich.cells import get_character_cell_size
from textual.await_complete import AwaitComplete
from textual.content import Content
from textual.css.query import NoMatches
from textual.selection import Selection
from textual.widget import Widget
from textual.widgets import Markdown
from textual.widgets.markdown import MarkdownFence

from troubleshoot.textsafe import terminal_safe

_AS_TEXT = ["link", "image", "autolink", "linkify", "reference", "html_inline", "html_block"]
MARK = "  ↪ "  # starts a continuation row, as in the fix preview's diffs (screens.DiffLines)


def data_parser() -> MarkdownIt:
    return MarkdownIt("gfm-like", {"html": False, "linkify": False}).disable(_AS_TEXT, ignoreInvalid=True)


@dataclass(frozen=True)
class Row:
    """One screen row of a code block: its text, and the width of the mark that starts it
    when it continues the line above (0 on a line's first row)."""

    content: Content
    mark: int = 0


def _fit(text: str, start: int, cells: int) -> int:
    """The end of the longest run of `text` from `start` that fits in `cells` (at least one character)."""
    used, end = 0, start
    while end < len(text):
        size = get_character_cell_size(text[end])
        if used + size > cells and end > start:
            break
        used += size
        end += 1
    return end


def line_cuts(text: str, width: int, mark: int = len(MARK)) -> list[int]:
    """Where a code line is cut into rows of `width` cells, the rows after the first narrower by
    their `mark`: after the last space or `/` in the second half of a row (a command's arguments,
    a path's folders), else at the edge. The rows put together are the line, character for character."""
    cuts: list[int] = []
    start, room = 0, max(1, width)
    while True:
        end = _fit(text, start, room)
        if end >= len(text):
            return cuts
        soft = max(text.rfind(" ", start, end), text.rfind("/", start, end)) + 1
        if soft > start + room // 2:
            end = soft
        cuts.append(end)
        start, room = end, max(1, width - mark)


def wrap_rows(code: Content, width: int) -> list[Row]:
    rows: list[Row] = []
    for line in code.split("\n", allow_blank=True):
        line = line.expand_tabs(8)
        indent = len(line.plain) - len(line.plain.lstrip(" "))
        mark = " " * min(indent, width // 2) + MARK  # a loop's body continues under the body
        for n, piece in enumerate(line.divide(line_cuts(line.plain, width, len(mark)))):
            rows.append(Row(Content.assemble((mark, "dim"), piece), len(mark)) if n else Row(piece))
    return rows


class CodeBlock(Widget):
    """A code block's lines, wrapped to the width (`wrap_rows`)."""

    DEFAULT_CSS = """
    CodeBlock {
        width: 1fr;
        height: auto;
        padding: 0 1;
        text-wrap: nowrap;
    }
    """

    def __init__(self, code: Content) -> None:
        super().__init__()
        self.code = code
        self._rows: tuple[int, list[Row]] | None = None  # (width, its rows)

    def set_code(self, code: Content) -> None:
        self.code, self._rows = code, None
        self.refresh(layout=True)

    def rows(self, width: int) -> list[Row]:
        if self._rows is None or self._rows[0] != width:
            self._rows = (width, wrap_rows(self.code, width))
        return self._rows[1]

    def get_content_width(self, container, viewport) -> int:
        return max((line.cell_length for line in self.code.split("\n", allow_blank=True)), default=0)

    def get_content_height(self, container, viewport, width: int) -> int:
        return len(self.rows(width))

    def render(self) -> Content:
        return Content("\n").join(r.content for r in self.rows(self.size.width))

    def get_selection(self, selection: Selection) -> tuple[str, str] | None:
        """The selected text as written: a continuation row's mark dropped, its row joined to the one above."""
        rows = self.rows(self.size.width)
        picked = selection.extract("\n".join(r.content.plain for r in rows)).split("\n")
        y0, x0 = (selection.start.y, selection.start.x) if selection.start else (0, 0)
        out = ""
        for i, piece in enumerate(picked):
            mark = rows[y0 + i].mark if y0 + i < len(rows) else 0
            if mark:
                out += piece[max(0, mark - (x0 if i == 0 else 0)):]
            else:
                out += ("\n" if i else "") + piece
        return out, "\n"


class WrappedFence(MarkdownFence):
    """A fenced or indented code block whose lines wrap (CodeBlock) instead of scrolling sideways."""

    DEFAULT_CSS = """
    WrappedFence, WrappedFence:ansi {
        overflow: hidden hidden;
        margin: 1 0;
    }
    """

    @property
    def allow_horizontal_scroll(self) -> bool:
        return False

    def set_content(self, content: Content) -> None:
        self._content = content
        try:
            self.query_one(CodeBlock).set_code(content)
        except NoMatches:  # not composed yet: compose() shows it
            return

    def compose(self):
        yield CodeBlock(self._highlighted_code)


class DataMarkdown(Markdown):
    BLOCKS = {**Markdown.BLOCKS, "fence": WrappedFence, "code_block": WrappedFence}

    def __init__(self, markdown: str = "", **kwargs) -> None:
        super().__init__(markdown, parser_factory=data_parser, open_links=False, **kwargs)

    def update(self, markdown: str) -> AwaitComplete:
        return super().update(terminal_safe(markdown))
