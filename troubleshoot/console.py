"""What every command prints the same way: the program's name, one-line warnings on stderr,
a rule set's load problems, counted nouns, and the help of `--format`."""

from __future__ import annotations

import sys
from collections.abc import Iterable

from troubleshoot.textsafe import terminal_safe

PROG = "troubleshoot"
MAX_WARNINGS = 12  # a rule set's problems printed before a command's own output; the rest are counted

FORMAT_HELP = {"text": "text: for people (default)", "json": "json: the stable contract for scripts (docs/json-output.md)",
               "markdown": "markdown: a report to paste into an issue"}


def format_help(*choices: str) -> str:
    return "; ".join(FORMAT_HELP.get(c, c) for c in choices)


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def print_warning(message: object) -> None:
    """One line on stderr; the file names, keys and values it quotes are data."""
    print(f"{PROG}: warning: {terminal_safe(str(message), keep_newlines=False)}", file=sys.stderr)


def warn_problems(ruleset, ctx) -> None:
    """The rule set's load problems on stderr, at most MAX_WARNINGS of them."""
    problems = ruleset.problems
    for p in problems[:MAX_WARNINGS]:
        if p.level == "error":
            print_warning(p)
        else:  # a warning says so itself
            print(f"{PROG}: {terminal_safe(str(p), keep_newlines=False)}", file=sys.stderr)
    if len(problems) > MAX_WARNINGS:
        print_warning(f"... and {len(problems) - MAX_WARNINGS} more (run `{ctx.command_line('rules', 'lint')}`)")


def did_you_mean(word: str, known: Iterable[str], cutoff: float = 0.6, quoted: bool = False) -> str:
    """` (did you mean --log?)` for a misspelt option, command, key or id, else empty: the
    closest of `known` at least `cutoff` alike (difflib's ratio). `quoted`: the match as a
    Python literal ('confidence'), as rule-file messages quote keys."""
    import difflib  # only when a word was misspelt: no start pays for it

    close = difflib.get_close_matches(str(word), sorted(set(known)), n=1, cutoff=cutoff)
    if not close:
        return ""
    return f" (did you mean {close[0]!r}?)" if quoted else f" (did you mean {close[0]}?)"
