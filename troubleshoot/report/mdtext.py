"""The Markdown of explanations and advice, for a terminal (rendered by Rich) or as plain text
(its marks removed) when piped. The text is data from rules and logs: control characters are
made visible first, and Rich renders it as Markdown only, never as console markup."""

from __future__ import annotations

import io
import re

from troubleshoot.textsafe import terminal_safe

_FENCE = re.compile(r"^\s*(```|~~~)")
_INLINE_CODE = re.compile(r"(`+)(.+?)\1")
_STRONG = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_EMPHASIS = re.compile(r"(?<![\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])")
_LINK = re.compile(r"\[([^\]\n]+)\]\(([^)\s]+)\)")
_AUTOLINK = re.compile(r"<(https?://[^>\s]+)>")
_HEADING = re.compile(r"^(\s*)#{1,6}\s+")
_STAR_BULLET = re.compile(r"^(\s*)[*+]\s+")


def to_plain(markdown: str) -> str:
    """Markdown as a person would type it in a plain-text mail: no `**`, no backticks, no
    fences (code indented by four spaces), links as `text (url)`."""
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
    parts = _INLINE_CODE.split(line)
    text = []
    for i in range(0, len(parts), 3):
        plain = parts[i]
        plain = _HEADING.sub(r"\1", plain) if i == 0 else plain
        plain = _STAR_BULLET.sub(r"\1- ", plain) if i == 0 else plain
        plain = _LINK.sub(r"\1 (\2)", plain)
        plain = _AUTOLINK.sub(r"\1", plain)
        plain = _STRONG.sub(r"\2", plain)
        plain = _EMPHASIS.sub(r"\1", plain)
        text.append(plain)
        if i + 2 < len(parts):
            text.append(parts[i + 2])
    return "".join(text)


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
