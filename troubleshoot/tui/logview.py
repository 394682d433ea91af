"""A read-only view of the log with the lines a diagnosis quotes highlighted; `n`/`N` jump.

It draws only the visible lines (the Line API), so a log of a hundred thousand lines costs no
more to show than one screen. Lines are data: control characters are made visible, never sent.
"""

from __future__ import annotations

import bisect
import os
from typing import TYPE_CHECKING

from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from troubleshoot.textsafe import terminal_safe
from troubleshoot.tui.views import plural

if TYPE_CHECKING:
    from troubleshoot.report.views import DiagnosisView

MAX_SHOWN = 8 << 20  # a larger log is shown as its evidence lines only

_NUMBER = Style(dim=True)
_EVIDENCE = Style(bold=True, bgcolor="dark_red", color="white")
_CURRENT = Style(bold=True, bgcolor="yellow", color="black")
_GAP = Style(dim=True, italic=True)


class LogView(ScrollView, can_focus=True):
    BINDINGS = [Binding("n", "next", "Next evidence"), Binding("N", "previous", "Previous evidence")]

    DEFAULT_CSS = "LogView { background: $surface; }"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.rows: list[tuple[int | None, str]] = []  # (line number, text); None: a gap marker
        self.evidence: list[int] = []  # row indexes of evidence lines
        self.current: int | None = None  # index into self.evidence
        self._gutter = 6

    def show(self, rows: list[tuple[int | None, str]], evidence_lines: list[int]) -> None:
        self.rows = [(n, terminal_safe(t, keep_newlines=False)) for n, t in rows]
        wanted = set(evidence_lines)
        self.evidence = [i for i, (n, _) in enumerate(self.rows) if n in wanted]
        self.current = None
        last = max((n for n, _ in self.rows if n), default=1)
        self._gutter = len(str(last)) + 3
        widest = max((len(t) for _, t in self.rows), default=0)
        self.virtual_size = Size(widest + self._gutter, len(self.rows))
        self.scroll_to(0, 0, animate=False)
        self.refresh()

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        i = scroll_y + y
        width = self.scrollable_content_region.width
        if i >= len(self.rows):
            return Strip.blank(width, self.rich_style)
        number, text = self.rows[i]
        if number is None:
            return Strip([Segment(text, _GAP)]).crop_extend(0, width, self.rich_style)
        hit = _contains(self.evidence, i)
        style = (_CURRENT if self.current is not None and self.evidence[self.current] == i
                 else _EVIDENCE if hit else self.rich_style)
        gutter = Segment(f"{number:>{self._gutter - 3}} {'▶' if hit else '│'} ", _NUMBER)
        body = Strip([Segment(text, style)]).crop(scroll_x, scroll_x + max(0, width - self._gutter))
        return Strip([gutter, *body]).crop_extend(0, width, self.rich_style)

    def action_next(self) -> None:
        self._jump(+1)

    def action_previous(self) -> None:
        self._jump(-1)

    def _jump(self, step: int) -> None:
        if not self.evidence:
            self.notify("No evidence line in this log.", severity="warning")
            return
        if self.current is None:
            self.current = 0 if step > 0 else len(self.evidence) - 1
        else:
            self.current = (self.current + step) % len(self.evidence)
        row = self.evidence[self.current]
        self.scroll_to(y=max(0, row - self.scrollable_content_region.height // 3), animate=False)
        self.refresh()


def _contains(sorted_list: list[int], value: int) -> bool:
    i = bisect.bisect_left(sorted_list, value)
    return i < len(sorted_list) and sorted_list[i] == value


def rows_for_logs(diagnoses: list[DiagnosisView], count: int) -> tuple[list[tuple[int | None, str]], str]:
    """Several logs read together (a folder of rank logs): the lines the diagnoses quote, under
    the name of the log each comes from (line numbers are each log's own)."""
    by_file: dict[str, set[tuple[int, str]]] = {}
    for v in diagnoses:
        for e in v.evidence:
            if e.source == "log" and e.line:
                name = e.file or (v.files[0] if v.files else "the logs")
                by_file.setdefault(name, set()).add((e.line, e.text))
    rows: list[tuple[int | None, str]] = []
    for name in sorted(by_file):
        rows.append((None, f"── {name}"))
        rows += sorted(by_file[name])
    return rows, f"{count} logs: the evidence lines of each"


def rows_for(text: str | None, path: str | None,
             diagnoses: list[DiagnosisView]) -> tuple[list[tuple[int | None, str]], str]:
    """The rows to show and a note: the whole log when it is small enough, else the lines the
    diagnoses quote with markers for what is left out."""
    if text is None and path is not None:
        try:
            size = os.path.getsize(path)
            if size <= MAX_SHOWN:
                with open(path, "rb") as f:
                    text = f.read().decode("utf-8", "replace")
        except OSError as exc:
            return [], f"cannot read {path}: {exc.strerror or exc}"
    if text is not None:
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return list(enumerate(lines, 1)), ""
    quoted = sorted({(e.line, e.text) for v in diagnoses for e in v.evidence if e.source == "log" and e.line})
    rows: list[tuple[int | None, str]] = []
    last = 0
    for n, t in quoted:
        if n > last + 1:
            rows.append((None, f"      … {plural(n - last - 1, 'line')} …"))
        rows.append((n, t))
        last = n
    return rows, "large log: showing the evidence lines only"
