"""The condition language of `match.facts`: a small, safe expression evaluator.

Conditions are parsed into a tree once, when rules load (condparse), and evaluated here against
plain data (the probe snapshot, captured log values). Nothing reaches Python's `eval`, and paths
walk only dict keys and list indices, never attributes. Missing facts make a condition UNKNOWN
(Kleene three-valued logic), so a rule never fires on facts nobody measured. The fact paths a
condition reads are listed for diagnoses (what was looked at) and for lint.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from troubleshoot.engine.condfuncs import FUNCTIONS, as_version, is_number
from troubleshoot.engine.condtree import UNKNOWN, BinOp, Call, ListLit, Lit, Neg, Node, Not, Path, Quant
from troubleshoot.records import field, record
from troubleshoot.values import Version

# The longest text a `matches` reads: a fact is data from the machine, of any length.
MAX_MATCH_SUBJECT = 1 << 16


@functools.lru_cache(maxsize=4096)
def parse(src: str) -> Node:
    """Parse a condition; raises condparse.ConditionError with a column on bad input."""
    from troubleshoot.engine.condparse import Parser  # rules read from their cache come parsed

    return Parser(src).parse()


# The fact paths of each condition tree asked for, by identity: a diagnosis lists what every
# condition read, per rule and per log or node. The tree is kept with its paths (an id is not
# reused while its object lives); the table is emptied when it fills (a rule set reloaded by the TUI).
_PATHS: dict[int, tuple[Node, tuple[Path, ...]]] = {}
_PATHS_KEPT = 8192


def tree_reads(node: Node, facts: dict) -> tuple[tuple[str, object], ...]:
    """(dotted path, its value in `facts` or None) for each fact path the condition reads, as
    `paths` lists them: what a trace says a condition read."""
    kept = _PATHS.get(id(node))
    if kept is None or kept[0] is not node:
        if len(_PATHS) >= _PATHS_KEPT:
            _PATHS.clear()
        kept = _PATHS[id(node)] = (node, tuple(_path_nodes(node, frozenset())))
    ctx = Context(facts=facts)
    return tuple((p.dotted, None if (v := _resolve(p, ctx, record=False)) is UNKNOWN else v) for p in kept[1])


def paths(node: Node, bound: frozenset = frozenset()) -> list[str]:
    """Dotted fact paths a condition reads (bound quantifier variables excluded)."""
    return [p.dotted for p in _path_nodes(node, bound)]


def _path_nodes(node: Node, bound: frozenset) -> list[Path]:
    out: list[Path] = []
    if isinstance(node, Path):
        if node.parts[0] not in bound:
            out.append(node)
    elif isinstance(node, BinOp):
        out += _path_nodes(node.left, bound) + _path_nodes(node.right, bound)
    elif isinstance(node, (Not, Neg)):
        out += _path_nodes(node.operand, bound)
    elif isinstance(node, Call):
        for a in node.args:
            out += _path_nodes(a, bound)
    elif isinstance(node, ListLit):
        for a in node.items:
            out += _path_nodes(a, bound)
    elif isinstance(node, Quant):
        out += _path_nodes(node.seq, bound) + _path_nodes(node.body, bound | {node.var})
    return out


def qualified_paths(node: Node, bound: dict | None = None) -> list[str]:
    """Fact paths with quantifier variables resolved to their lists: `any(g in nvml.gpus:
    g.temperature_c > 85)` reads `nvml.gpus` and `nvml.gpus[].temperature_c` (for lint)."""
    bound = bound or {}
    out: list[str] = []
    if isinstance(node, Path):
        head = node.parts[0]
        if head in bound:
            if bound[head] is not None:
                rest = Path(("_",) + node.parts[1:]).dotted[1:]
                out.append(bound[head] + rest)
        else:
            out.append(node.dotted)
    elif isinstance(node, BinOp):
        out += qualified_paths(node.left, bound) + qualified_paths(node.right, bound)
    elif isinstance(node, (Not, Neg)):
        out += qualified_paths(node.operand, bound)
    elif isinstance(node, (Call, ListLit)):
        for a in (node.args if isinstance(node, Call) else node.items):
            out += qualified_paths(a, bound)
    elif isinstance(node, Quant):
        seq = qualified_paths(node.seq, bound)
        out += seq
        inner = dict(bound)
        inner[node.var] = seq[0] + "[]" if isinstance(node.seq, Path) and seq else None
        out += qualified_paths(node.body, inner)
    return out


@record
class Context:
    facts: dict
    bound: dict = field(default_factory=dict)
    missing: list = field(default_factory=list)


def evaluate(node: Node, facts: dict, missing: list | None = None):
    """Value of a condition: True, False, UNKNOWN (or a plain value for sub-expressions)."""
    ctx = Context(facts=facts)
    value = _eval(node, ctx)
    if missing is not None:
        missing.extend(p for p in ctx.missing if p not in missing)
    return value


def _eval(node: Node, ctx: Context):
    if isinstance(node, Lit):
        return node.value
    if isinstance(node, ListLit):
        return [_eval(i, ctx) for i in node.items]
    if isinstance(node, Path):
        return _resolve(node, ctx)
    if isinstance(node, Not):
        v = _truth(_eval(node.operand, ctx))
        return UNKNOWN if v is UNKNOWN else not v
    if isinstance(node, Neg):
        v = _eval(node.operand, ctx)
        return -v if is_number(v) else UNKNOWN
    if isinstance(node, BinOp):
        if node.op in ("and", "or"):
            return _logic(node, ctx)
        return _binary(node.op, _eval(node.left, ctx), _eval(node.right, ctx))
    if isinstance(node, Call):
        if node.name == "exists":
            return _resolve(node.args[0], ctx, record=False) is not UNKNOWN
        args = [_eval(a, ctx) for a in node.args]
        if any(a is UNKNOWN for a in args):
            return UNKNOWN
        try:
            return FUNCTIONS[node.name](*args)
        except (TypeError, ValueError):
            return UNKNOWN
    if isinstance(node, Quant):
        return _quantify(node, ctx)
    raise TypeError(f"unknown node {node!r}")  # pragma: no cover


def _resolve(node: Path, ctx: Context, record: bool = True):
    parts = node.parts
    if parts[0] in ctx.bound:
        cur = ctx.bound[parts[0]]
        parts = parts[1:]
    else:
        cur = ctx.facts
    for p in parts:
        if isinstance(p, int) and isinstance(cur, list) and -len(cur) <= p < len(cur):
            cur = cur[p]
        elif isinstance(cur, dict) and str(p) in cur:
            cur = cur[str(p)]
        else:
            if record:
                ctx.missing.append(node.dotted)
            return UNKNOWN
    return cur


def _truth(v):
    if v is UNKNOWN:
        return UNKNOWN
    return bool(v)


def _logic(node: BinOp, ctx: Context):
    left = _truth(_eval(node.left, ctx))
    if node.op == "and":
        if left is False:
            return False
        right = _truth(_eval(node.right, ctx))
        if right is False:
            return False
        return UNKNOWN if UNKNOWN in (left, right) else True
    if left is True:
        return True
    right = _truth(_eval(node.right, ctx))
    if right is True:
        return True
    return UNKNOWN if UNKNOWN in (left, right) else False


def _quantify(node: Quant, ctx: Context):
    seq = _eval(node.seq, ctx)
    if seq is UNKNOWN or seq is None:
        return UNKNOWN
    if isinstance(seq, dict):
        seq = list(seq.values())
    if not isinstance(seq, list):
        return UNKNOWN
    results = []
    saved = ctx.bound.get(node.var, _MISSING)
    try:
        for item in seq:
            ctx.bound[node.var] = item
            results.append(_truth(_eval(node.body, ctx)))
    finally:
        if saved is _MISSING:
            ctx.bound.pop(node.var, None)
        else:
            ctx.bound[node.var] = saved
    if node.kind == "count":
        return sum(1 for r in results if r is True)
    if node.kind == "any":
        if True in results:
            return True
        return UNKNOWN if UNKNOWN in results else False
    if False in results:
        return False
    return UNKNOWN if UNKNOWN in results else True


_MISSING = object()

_ORDER: dict[str, Callable[[Any, Any], bool]] = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}


def _binary(op: str, a, b):
    try:
        return _binary_op(op, a, b)
    except (OverflowError, ValueError):  # a huge number met a float: no answer, not a crash
        return UNKNOWN


def _binary_op(op: str, a, b):
    if op in ("+", "-", "*", "/"):
        if not (is_number(a) and is_number(b)):
            return UNKNOWN
        if op == "/" and b == 0:
            return UNKNOWN
        return {"+": a + b, "-": a - b, "*": a * b, "/": a / b if b else 0}[op]
    if a is UNKNOWN or b is UNKNOWN:
        return UNKNOWN
    if op in ("in", "not in"):
        if isinstance(b, (list, dict)):
            found = a in b
        elif isinstance(b, str) and isinstance(a, str):
            found = a in b
        elif b is None:
            found = False
        else:
            return UNKNOWN
        return found if op == "in" else not found
    if op == "matches":
        if not isinstance(b, str) or a is None:
            return UNKNOWN
        text = str(a)
        if len(text) > MAX_MATCH_SUBJECT:
            text = text[:MAX_MATCH_SUBJECT]
        from troubleshoot.engine import condregex  # RE2 or a guarded `re`: for conditions that match

        return condregex.compiled(b).search(text) is not None
    return _compare(op, a, b)


def _compare(op: str, a, b):
    fn = _ORDER[op]
    if a is None or b is None or isinstance(a, bool) or isinstance(b, bool):
        return fn(a, b) if op in ("==", "!=") else UNKNOWN
    if isinstance(a, (str, Version)) or isinstance(b, (str, Version)):
        # Versions never compare as floats: "12.10" > "12.9", "470.82.01" < 525.
        va, vb = as_version(a), as_version(b)
        if va is not None and vb is not None:
            return fn(va, vb)
        if isinstance(a, str) and isinstance(b, str):
            return fn(a, b)
        return fn(a, b) if op in ("==", "!=") else UNKNOWN
    if is_number(a) and is_number(b):
        return fn(a, b)
    return fn(a, b) if op in ("==", "!=") else UNKNOWN

