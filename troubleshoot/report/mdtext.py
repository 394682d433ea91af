"""The Markdown of explanations and advice, for a terminal (rendered by Rich) or as plain text
(its marks removed) when piped. The text is data from rules and logs: control characters are
made visible first, and Rich renders it as Markdown only, never as console markup."""

from __future__ import annotations

import io
import re

from troubleshoot.textsafe import terminal_safe

_FENCE = re.compile(r"^\s*(```|~~~)")
_BACKTICK_RUN = re.compile(r"`+")
_ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])")
# An escaped mark stands in for itself through the substitutions below, as a character of a
# private-use plane none of them matches, and is put back at the end.
_STAND_IN = 0xF0000
_PUT_BACK = {_STAND_IN + c: chr(c) for c in range(0x21, 0x7f)}
_STRONG = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_EMPHASIS = re.compile(r"(?<![\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])")
_LINK = re.compile(r"\[([^\]\n]+)\]\(([^)\s]+)\)")
_AUTOLINK = re.compile(r"<(https?://[^>\s]+)>")
_HEADING = re.compile(r"^(\s*)#{1,6}\s+")
_STAR_BULLET = re.compile(r"^(\s*)[*+]\s+")


def to_plain(markdown: str) -> str:
    """Markdown as a person would type it in a plain-text mail: no `**`, no backticks, no
    backslash escapes, no fences (code indented by four spaces), links as `text (url)`."""
    out: list[str] = []
    in_code = False
    for line in terminal_safe(markdown).splitlines():
        if _FENCE.match(line):
            in_code = not in_code
            continue
        if in_code:
            out.append("    " + line)
            continue
        out.append(_inline(line))
    return "\n".join(out)


def _inline(line: str) -> str:
    # Code spans first: what is inside them is literal (a `**kwargs` stays as written).
    pieces = _spans(line)
    return "".join(text if is_code else _prose(text, first=(i == 0)) for i, (is_code, text) in enumerate(pieces))


def _spans(line: str) -> list[tuple[bool, str]]:
    """(is code, text) pieces of a line, read as CommonMark does: a run of backticks that is
    not escaped opens a code span, which the next run as long closes; inside it a backslash is
    itself."""
    out: list[tuple[bool, str]] = []
    start = i = 0
    while i < len(line):
        if line[i] == "\\":
            i += 2
            continue
        if line[i] != "`":
            i += 1
            continue
        ticks = _BACKTICK_RUN.match(line, i).group()
        close = next((m for m in _BACKTICK_RUN.finditer(line, i + len(ticks)) if m.group() == ticks), None)
        if close is None:
            i += len(ticks)
            continue
        out += [(False, line[start:i]), (True, line[i + len(ticks) : close.start()])]
        start = i = close.end()
    out.append((False, line[start:]))
    return out


def _prose(text: str, first: bool) -> str:
    plain = _ESCAPED.sub(lambda m: chr(_STAND_IN + ord(m.group(1))), text)
    if first:
        plain = _HEADING.sub(r"\1", plain)
        plain = _STAR_BULLET.sub(r"\1- ", plain)
    plain = _LINK.sub(r"\1 (\2)", plain)
    plain = _AUTOLINK.sub(r"\1", plain)
    plain = _STRONG.sub(r"\2", plain)
    plain = _EMPHASIS.sub(r"\1", plain)
    return plain.translate(_PUT_BACK)


def to_terminal(markdown: str, width: int, colour: bool) -> str:
    """Markdown rendered by Rich for a terminal of `width` columns (ANSI styles when `colour`)."""
    from rich.console import Console
    from rich.markdown import Markdown

    buf = io.StringIO()
    console = Console(file=buf, force_terminal=colour, no_color=not colour, color_system="standard" if colour else None,
                      width=max(width, 20), markup=False, emoji=False, highlight=False, legacy_windows=False)
    text = terminal_safe(markdown)
    md = Markdown(text, hyperlinks=False, code_theme="ansi_dark")
    # Rich's parser takes HTML and drops it: `kill <pid>` or a `<host-1a2b>` placeholder would
    # lose words. Parsed again with HTML off, every `<...>` stays text.
    from markdown_it import MarkdownIt

    md.parsed = MarkdownIt("commonmark", {"html": False}).enable("strikethrough").enable("table").parse(text)
    console.print(md)
    return "\n".join(ln.rstrip() for ln in buf.getvalue().rstrip("\n").splitlines())  # Rich pads to the width
