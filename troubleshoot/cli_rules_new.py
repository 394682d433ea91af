"""`troubleshoot rules new LOG_LINE`: scaffold a rule file, check it, then print or write it.

The scaffold (engine/scaffold.py) is loaded, linted and its examples run here before it is
shown: what a user gets passes `rules lint` and `rules test` as written.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from troubleshoot.errors import TroubleshootError
from troubleshoot.textsafe import terminal_safe
from troubleshoot.console import PROG

if TYPE_CHECKING:
    from troubleshoot.context import CommandContext



def _line(arg: str) -> str:
    """The log line as the scanner reads it: bytes that are not UTF-8 become U+FFFD (an
    argument carries them as surrogates, stdin as raw bytes)."""
    if arg != "-":
        return arg.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    text = sys.stdin.buffer.read().decode("utf-8", "replace")
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        raise TroubleshootError("rules new: stdin holds no log line")
    return lines[-1]  # `tail -n 1 train.log | ...`: the error is usually the last line


def _similar(ruleset, line: str):
    for r in ruleset.rules:
        if any(p.regex.search(line) for p in r.log):
            return r
    return None


def _symptom(args, ruleset, similar) -> str:
    from troubleshoot.engine.loader import did_you_mean

    if args.symptom is None:
        if similar is None:
            raise TroubleshootError("rules new: no loaded rule matches this line, so its symptom cannot be guessed: give "
                                    "--symptom ID (`troubleshoot rules symptoms` lists them; a team adds its own in "
                                    "a symptoms.yaml in its rule folder)")
        return similar.symptom
    if args.symptom not in ruleset.taxonomy:
        raise TroubleshootError(f"rules new: unknown symptom {args.symptom!r}{did_you_mean(args.symptom, ruleset.taxonomy)}"
                                f" (`troubleshoot rules symptoms` lists them; a team adds its own in a symptoms.yaml "
                                f"in its rule folder)")
    return args.symptom


def _destination(args, rid: str) -> Path | None:
    if args.out:
        return Path(args.out)
    if args.rules:
        folder = Path(args.rules[0])
        if not folder.is_dir():
            raise TroubleshootError(f"rules new: --rules {args.rules[0]} is not a folder; give --out FILE")
        return folder / f"{rid}.yaml"
    return None


def _self_check(text: str, where: Path, ruleset) -> None:
    """The scaffold must load, lint without a warning and pass its own examples; anything else
    is our bug, reported rather than written."""
    from troubleshoot import paste
    from troubleshoot.engine.examples import check_examples
    from troubleshoot.engine.lint import lint
    from troubleshoot.engine.loader import load_rule_text
    from troubleshoot.engine.ruleset import RuleSet

    rf = load_rule_text(text, where, "new", ruleset.taxonomy)
    problems = rf.problems + lint(RuleSet(rf.rules, ruleset.taxonomy))  # warnings too: it must lint clean
    _, failures = check_examples(rf.rules, facts_of=lambda t: paste.read(t).facts)
    if problems or failures or not rf.rules:
        detail = "; ".join(map(str, [*problems, *failures])) or "no rule loaded"
        raise TroubleshootError(f"rules new: the scaffold does not pass its own check ({detail}); please report this "
                                f"with the line")


def cmd_new(args, ctx: CommandContext) -> int:
    from troubleshoot.engine import scaffold
    from troubleshoot.engine.loader import ID_RE
    from troubleshoot.safeio import atomic_write

    line = _line(args.line)
    try:
        s = scaffold.generalise(line)
    except ValueError as exc:
        raise TroubleshootError(f"rules new: {exc}") from None
    ruleset = ctx.ruleset()
    similar = _similar(ruleset, s.line)
    symptom = _symptom(args, ruleset, similar)
    taken = {r.id for r in ruleset.rules}
    if args.id is not None:
        if not ID_RE.match(args.id):
            raise TroubleshootError(f"rules new: --id {args.id!r} is not kebab-case (a-z, 0-9, '-')")
        if args.id in taken:
            raise TroubleshootError(f"rules new: a rule {args.id!r} exists already (`troubleshoot rules show {args.id}`)")
    rid = args.id or scaffold.rule_id(s.words, taken)
    text = scaffold.render(s, rid, symptom, scaffold.severity(s.line), similar.id if similar else None)
    dest = _destination(args, rid)
    _self_check(text, dest or Path(f"{rid}.yaml"), ruleset)
    if dest is None:
        sys.stdout.write(text)
        return 0
    if dest.exists():
        raise TroubleshootError(f"rules new: {dest} exists; not overwritten (give --out FILE or --id)")
    try:
        atomic_write(dest, text.encode())
    except OSError as exc:
        raise TroubleshootError(f"rules new: cannot write {dest}: {exc.strerror or exc}") from None
    folder = str(dest.parent)
    extra = [a for p in ctx.options.plugins for a in ("-p", p)]
    check = shlex.join(["troubleshoot", "rules", "test", "--rules", folder, *extra])
    print(terminal_safe(f"{PROG}: wrote rule {rid} to {dest}; edit its title, explain and no_match, then: {check}",
                        keep_newlines=False), file=sys.stderr)
    return 0
