"""Text that stays data: what logs, snapshots, rules and file names hold never reaches a terminal
with its control sequences, and never becomes Markdown (a link that hides its URL, an image, HTML).
Every layer that prints such data uses `terminal_safe`; every place that puts it into Markdown
uses the `markdown_*` helpers, which are terminal-safe too."""

from __future__ import annotations

from troubleshoot.lazyre import lazy

_CONTROL = lazy(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# What can start Markdown inside a line: emphasis, code, links and images ([ ]), HTML and
# autolinks (< >), entities, tables, strikethrough, headings and issue links (#), math ($).
_MD_INLINE = lazy(r"([\\`*_\[\]<>&|~#$])")
# What starts a block only where a line starts: a list item or a setext heading's underline.
_MD_BLOCK = lazy(r"^(\s*)(?:([-+=])|(\d+)([.)]))")
_BACKTICKS = lazy(r"`+")


def terminal_safe(text: str, keep_newlines: bool = True) -> str:
    """Control characters (ESC, CR, BEL, C1...) shown as visible escapes; tabs kept, and
    newlines unless `keep_newlines` is False."""
    out = _CONTROL.sub(lambda m: f"\\x{ord(m.group(0)):02x}", text)
    return out if keep_newlines else out.replace("\n", "\\n")


def markdown_literal(text: str) -> str:
    """One line of Markdown that shows `text` as written, marks and all."""
    out = _MD_INLINE.sub(r"\\\1", terminal_safe(text, keep_newlines=False))
    return _MD_BLOCK.sub(lambda m: f"{m.group(1)}\\{m.group(2)}" if m.group(2)
                         else f"{m.group(1)}{m.group(3)}\\{m.group(4)}", out)


def markdown_inline(text: str) -> str:
    """A value placed inside a sentence of Markdown, shown as written: its inline marks escaped
    (a value never starts a line there, so block marks such as `1.` need nothing)."""
    return _MD_INLINE.sub(r"\\\1", terminal_safe(text, keep_newlines=False))


def markdown_code(text: str) -> str:
    """`text` as one inline code span, delimited by a backtick run it does not contain."""
    text = terminal_safe(text, keep_newlines=False)
    if not text:
        return ""
    runs = {len(r) for r in _BACKTICKS.findall(text)}
    bar = "`" * next(n for n in range(1, len(runs) + 2) if n not in runs)
    pad = " " if text[:1] in ("`", " ") or text[-1:] in ("`", " ") else ""
    return f"{bar}{pad}{text}{pad}{bar}"


def markdown_fence(text: str, info: str = "text") -> str:
    """`text` as a fenced code block that no line of it can close."""
    text = terminal_safe(text)
    longest = max((len(r) for r in _BACKTICKS.findall(text)), default=0)
    bar = "`" * max(3, longest + 1)
    return f"{bar}{info}\n{text}\n{bar}"
