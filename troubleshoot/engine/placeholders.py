"""Which `{placeholders}` of a rule's texts are sure to be filled when the rule fires.

A placeholder is filled from a capture of the matched line, a fact, a followed number or a
catalog's words. The rule fires on any one of its log patterns, on facts its conditions only
read, and a context note shows when its own condition holds; so a `{name}` is guaranteed only
when every way to fire provides it:

- a capture: every `match.log` pattern has the group, outside any optional part (`?`, `*`,
  `{0,n}`, an alternative without it);
- a fact `{a.b}`: a condition of `match.facts` (or, in a context note, its `when`) can only
  hold with that path (or one below it) set: compared with a value (`==`, `<`, `matches`, `in`
  ..., not `!=` unless both sides are function calls such as `version()`, which are unknown on
  a missing value), inside arithmetic so compared, named by `exists` (a fact present but null
  still reads as missing), or the list an `any` walks — under `or` only when both sides need
  it, never under `not`; a capture a condition needs as `log.NAME` counts as well;
- `{series.X.KEY}`: X is a guaranteed capture;
- a catalog's words: what every entry has (an Xid's name and action; a message entry's key and
  the catalog's name, version and URL) — a message entry's code, message, doc and reason only
  where the catalog gives them to every entry the rule can name, which no rule can promise.

Braces that name nothing the engine fills (`f"cuda:{rank}"` in a code sample) stay as written
and need nothing. A parameter of a fix that is one placeholder is dropped when missing (the
fixer's default applies). Anything else needs the rule's own words for when it is missing, `{pci|the GPU}`; without them
the reports word it as missing ("[pci: not in the log]") and `rules lint` fails the rule.
"""

from __future__ import annotations

import re

from troubleshoot.engine.catalogs import rule_words
from troubleshoot.engine.condtree import BinOp, Call, Lit, Path, Quant

# A placeholder, with the rule's fallback words when it has them (`{pci|the GPU}`).
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)(\|[^{}\n]*)?\}")
_CODE_BLOCK = re.compile(r"```.*?```|`[^`\n]*`", re.DOTALL)
# The message catalog words every entry has (catalogs.ENTRY_WORDS; every Xid has all of its own).
ENTRY_SURE = frozenset({"entry_key", "catalog_name", "catalog_version", "catalog_url"})


def mandatory_groups(pattern: re.Pattern) -> set[str]:
    """The named groups that take part in every match of `pattern`."""
    try:
        import re._parser as sre_parse  # Python 3.11+
    except ImportError:  # pragma: no cover - 3.10
        import sre_parse  # type: ignore[no-redef]
    names = {v: k for k, v in pattern.groupindex.items()}
    try:
        tree = sre_parse.parse(pattern.pattern, pattern.flags)
    except re.error:
        return set()
    return _mandatory(tree, names, sre_parse)


def _mandatory(items, names: dict[int, str], sp) -> set[str]:
    out: set[str] = set()
    for op, av in items:
        if op is sp.SUBPATTERN:
            group, _, _, inner = av
            out |= _mandatory(inner, names, sp)
            if group in names:
                out.add(names[group])
        elif op is sp.BRANCH:
            branches = [_mandatory(b, names, sp) for b in av[1]]
            out |= set.intersection(*branches) if branches else set()
        elif op in (sp.MAX_REPEAT, sp.MIN_REPEAT, getattr(sp, "POSSESSIVE_REPEAT", None)) and av[0] >= 1:
            out |= _mandatory(av[2], names, sp)
        elif op is getattr(sp, "ATOMIC_GROUP", None):
            out |= _mandatory(av, names, sp)
    return out


def placeholders(text: str) -> list[str]:
    """The names of the placeholders that have no fallback words."""
    return [m.group(1) for m in _PLACEHOLDER.finditer(text or "") if m.group(2) is None]


def unguaranteed(rule) -> list[tuple[str, str]]:
    """(where, name) for each placeholder of `rule`'s texts that may be left unfilled."""
    sure = _sure(rule)
    fact_reads = _reads(rule.facts)
    out: list[tuple[str, str]] = []
    texts = [("title", rule.title), ("explain", rule.explain)]
    for f in rule.fixes:
        texts.append((f"fix {f.fixer!r}", f.title))
        # A parameter that is one placeholder is dropped when it is missing (the fixer's default
        # applies; a required one is the fix check's business), so only text around one counts.
        texts += [(f"fix {f.fixer!r} param {k!r}", v) for k, v in f.params.items()
                  if isinstance(v, str) and not _PLACEHOLDER.fullmatch(v)]
    known = set(rule.captures) | rule_words(rule.catalog)
    for where, text in texts:
        out += [(where, n) for n in placeholders(text) if _fills(n, known) and not _filled(n, sure, fact_reads)]
    for i, ctx in enumerate(rule.context):
        reads = fact_reads | _reads((ctx.when,))
        out += [(f"context note {i + 1}", n) for n in placeholders(ctx.note or "")
                if _fills(n, known) and not _filled(n, sure, reads)]
    return list(dict.fromkeys(out))


def unclosed(rule) -> list[str]:
    """Texts with a fallback that does not close on its line (`{name|words` ... `}`): neither
    filled nor worded, it would reach a reader as written."""
    texts = [rule.title, rule.explain, *(c.note or "" for c in rule.context)]
    texts += [f.title for f in rule.fixes]
    return [m.group(0) for t in texts for m in _UNCLOSED.finditer(t or "")]


_UNCLOSED = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*\|[^{}\n]*(?:\n|$)")


def _fills(name: str, known: set[str]) -> bool:
    """Whether the engine fills `{name}` at all: a capture, a catalog word, a dotted path. Other
    braces (`f"cuda:{rank}"` in a code sample) are left as written, so they need no words."""
    return "." in name or name in known


def _sure(rule) -> set[str]:
    if rule.log:
        sure = set.intersection(*(mandatory_groups(p.regex) for p in rule.log))
    else:
        sure = set()
    if rule.catalog == "xid":
        sure |= rule_words(rule.catalog)
    elif rule.catalog is not None:
        sure |= ENTRY_SURE
    return sure


def _reads(conds) -> set[str]:
    out: set[str] = set()
    for c in conds:
        out |= _needed(c.tree)
    return out


_NEEDS_VALUE = {"==", "<", "<=", ">", ">=", "matches", "in"}


def _needed(node) -> set[str]:
    """The fact paths a condition cannot be true without."""
    if isinstance(node, BinOp):
        if node.op == "and":
            return _needed(node.left) | _needed(node.right)
        if node.op == "or":
            return _needed(node.left) & _needed(node.right)
        sides = (node.left, node.right)
        if node.op in _NEEDS_VALUE and not any(isinstance(x, Lit) and x.value is None for x in sides):
            return _operand_paths(node.left) | _operand_paths(node.right)
        if node.op == "!=" and all(isinstance(x, Call) for x in sides):
            # version(a) != version(b): a function of a missing value is unknown, never true
            return _operand_paths(node.left) | _operand_paths(node.right)
        return set()
    if isinstance(node, Call) and node.name == "exists":
        return set().union(*(_operand_paths(a) for a in node.args)) if node.args else set()
    if isinstance(node, Quant) and node.kind == "any":
        return _operand_paths(node.seq)
    return set()


def _operand_paths(node) -> set[str]:
    if isinstance(node, Path):
        return {node.dotted}
    if isinstance(node, Call):
        return set().union(*(_operand_paths(a) for a in node.args)) if node.args else set()
    if isinstance(node, BinOp) and node.op in ("+", "-", "*", "/"):  # arithmetic on a missing value is unknown
        return _operand_paths(node.left) | _operand_paths(node.right)
    return set()


def _filled(name: str, sure: set[str], reads: set[str]) -> bool:
    if "." not in name:
        return name in sure or f"log.{name}" in reads  # a condition needs the capture
    head, _, rest = name.partition(".")
    if head == "series":
        return rest.split(".")[0] in sure
    if head == "log":
        return rest in sure
    return any(name == r or r.startswith(name + ".") for r in reads)
