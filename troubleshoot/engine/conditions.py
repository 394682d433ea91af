"""The condition language of `match.facts`: a small, safe expression evaluator.

Conditions are parsed into a tree once, when rules load, and evaluated against plain data
(the probe snapshot, captured log values). Nothing reaches Python's `eval`, and paths walk
only dict keys and list indices, never attributes. Missing facts make a condition UNKNOWN
(Kleene three-valued logic), so a rule never fires on facts nobody measured.

Grammar (lowest precedence first):
    expr    := and ('or' and)*
    and     := not ('and' not)*
    not     := 'not' not | cmp
    cmp     := sum (('=='|'!='|'<'|'<='|'>'|'>='|'in'|'not' 'in'|'matches') sum)?
    sum     := term (('+'|'-') term)*
    term    := unary (('*'|'/') unary)*
    unary   := '-' unary | atom
    atom    := NUMBER | STRING | 'true' | 'false' | 'null' | '[' [expr (',' expr)*] ']'
             | '(' expr ')' | QUANT '(' NAME 'in' expr ':' expr ')' | FUNC '(' [expr (',' expr)*] ')'
             | path
    path    := NAME ('.' NAME | '[' INT ']' | '.' INT)*
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from troubleshoot.values import Version, parse_bytes, parse_version, looks_like_version

try:  # linear-time matching: a condition's regex never backtracks (google-re2, a dependency)
    import re2 as _re2
except ImportError:  # pragma: no cover - platforms without a wheel
    _re2 = None

# Bounds on what a rule file (team-written data) can ask of the parser and the evaluator.
MAX_CHARS = 2000
MAX_DEPTH = 32
MAX_NUMBER_DIGITS = 40
MAX_STRING = 1000
MAX_MATCH_SUBJECT = 1 << 16
_NESTED_REPEAT = re.compile(r"\((?:[^()\\]|\\.)*[+*}](?:[^()\\]|\\.)*\)\s*(?:[+*]|\{\d*,)")


class ConditionError(ValueError):
    """A condition that does not parse; `column` is 1-based within the condition text."""

    def __init__(self, message: str, column: int):
        self.column = column
        super().__init__(f"{message} (column {column})")


class _Unknown:
    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "unknown"

    def __bool__(self) -> bool:  # an unknown must never be mistaken for true
        return False


UNKNOWN = _Unknown()


class NumLit(float):
    """A numeric literal that remembers how it was written, for version comparisons."""

    text: str

    def __new__(cls, text: str):
        obj = super().__new__(cls, float(text))
        obj.text = text
        return obj


# ---------------------------------------------------------------- tokens

_TOKEN = re.compile(
    r"""\s*(?:
      (?P<num>\d+(?:\.\d+)*)
    | (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
    | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<op>==|!=|<=|>=|<|>|\(|\)|\[|\]|,|:|\.|\+|-|\*|/)
    )""",
    re.VERBOSE,
)
KEYWORDS = {"and", "or", "not", "in", "matches", "true", "false", "null"}
QUANTIFIERS = {"any", "all", "count"}


@dataclass(frozen=True)
class Tok:
    kind: str
    text: str
    col: int


def tokenize(src: str) -> list[Tok]:
    toks: list[Tok] = []
    pos = 0
    src = src.rstrip()
    while pos < len(src):
        m = _TOKEN.match(src, pos)
        if not m or m.end() == pos:
            while src[pos].isspace():
                pos += 1
            raise ConditionError(f"unexpected character {src[pos]!r}", pos + 1)
        kind = m.lastgroup or ""
        text = m.group(kind)
        col = m.start(kind) + 1
        if kind == "name" and text in KEYWORDS:
            kind = "kw"
        toks.append(Tok(kind, text, col))
        pos = m.end()
    toks.append(Tok("end", "", len(src) + 1))
    return toks


# ---------------------------------------------------------------- tree

@dataclass(frozen=True)
class Node:
    pass


@dataclass(frozen=True)
class Lit(Node):
    value: Any


@dataclass(frozen=True)
class ListLit(Node):
    items: tuple


@dataclass(frozen=True)
class Path(Node):
    parts: tuple  # str keys and int indices

    @property
    def dotted(self) -> str:
        out = ""
        for p in self.parts:
            out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else p)
        return out


@dataclass(frozen=True)
class BinOp(Node):
    op: str
    left: Node
    right: Node


@dataclass(frozen=True)
class Not(Node):
    operand: Node


@dataclass(frozen=True)
class Neg(Node):
    operand: Node


@dataclass(frozen=True)
class Call(Node):
    name: str
    args: tuple


@dataclass(frozen=True)
class Quant(Node):
    kind: str
    var: str
    seq: Node
    body: Node


class _Parser:
    def __init__(self, src: str):
        if len(src) > MAX_CHARS:
            raise ConditionError(f"condition longer than {MAX_CHARS} characters", MAX_CHARS)
        self.toks = tokenize(src)
        self.i = 0
        self.depth = 0

    def _deeper(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ConditionError(f"nested deeper than {MAX_DEPTH} levels", self.tok.col)

    @property
    def tok(self) -> Tok:
        return self.toks[self.i]

    def take(self, text: str | None = None, kind: str | None = None) -> Tok:
        t = self.tok
        if (text is not None and t.text != text) or (kind is not None and t.kind != kind):
            want = repr(text) if text else kind
            got = repr(t.text) if t.kind != "end" else "end of condition"
            raise ConditionError(f"expected {want}, found {got}", t.col)
        self.i += 1
        return t

    def at(self, *texts: str) -> bool:
        return self.tok.kind in ("kw", "op") and self.tok.text in texts

    def parse(self) -> Node:
        node = self.expr()
        if self.tok.kind != "end":
            raise ConditionError(f"unexpected {self.tok.text!r}", self.tok.col)
        return node

    def expr(self) -> Node:
        self._deeper()
        node = self.and_()
        while self.at("or"):
            self.i += 1
            node = BinOp("or", node, self.and_())
        self.depth -= 1
        return node

    def and_(self) -> Node:
        node = self.not_()
        while self.at("and"):
            self.i += 1
            node = BinOp("and", node, self.not_())
        return node

    def not_(self) -> Node:
        if self.at("not"):
            self.i += 1
            self._deeper()
            node = Not(self.not_())
            self.depth -= 1
            return node
        return self.cmp()

    def cmp(self) -> Node:
        left = self.sum()
        if self.at("==", "!=", "<", "<=", ">", ">=", "in", "matches"):
            op = self.take().text
            right = self.sum()
            if op == "matches" and isinstance(right, Lit) and isinstance(right.value, str):
                problem = regex_problem(right.value)
                if problem:
                    raise ConditionError(f"bad regex after 'matches': {problem}", self.tok.col)
            return BinOp(op, left, right)
        if self.at("not") and self.toks[self.i + 1].text == "in":
            self.i += 2
            return BinOp("not in", left, self.sum())
        return left

    def sum(self) -> Node:
        node = self.term()
        while self.at("+", "-"):
            op = self.take().text
            node = BinOp(op, node, self.term())
        return node

    def term(self) -> Node:
        node = self.unary()
        while self.at("*", "/"):
            op = self.take().text
            node = BinOp(op, node, self.unary())
        return node

    def unary(self) -> Node:
        if self.at("-"):
            self.i += 1
            self._deeper()
            node = Neg(self.unary())
            self.depth -= 1
            return node
        return self.atom()

    def atom(self) -> Node:
        t = self.tok
        if t.kind == "num":
            self.i += 1
            if len(t.text) > MAX_NUMBER_DIGITS:
                raise ConditionError(f"number longer than {MAX_NUMBER_DIGITS} characters", t.col)
            if t.text.count(".") > 1:  # 525.60.13: a version, never a float
                version = parse_version(t.text)
                if version is None:
                    raise ConditionError(f"{t.text!r} is not a version", t.col)
                return Lit(version)
            return Lit(NumLit(t.text) if "." in t.text else int(t.text))
        if t.kind == "str":
            self.i += 1
            if len(t.text) > MAX_STRING + 2:
                raise ConditionError(f"text longer than {MAX_STRING} characters", t.col)
            return Lit(_unquote(t.text))
        if t.kind == "kw" and t.text in ("true", "false", "null"):
            self.i += 1
            return Lit({"true": True, "false": False, "null": None}[t.text])
        if self.at("("):
            self.i += 1
            node = self.expr()
            self.take(")")
            return node
        if self.at("["):
            self.i += 1
            items = []
            if not self.at("]"):
                items.append(self.expr())
                while self.at(","):
                    self.i += 1
                    items.append(self.expr())
            self.take("]")
            return ListLit(tuple(items))
        if t.kind == "name":
            nxt = self.toks[self.i + 1]
            if nxt.text == "(" and t.text in QUANTIFIERS:
                self.i += 2
                var = self.take(kind="name").text
                self.take("in")
                seq = self.expr()
                self.take(":")
                body = self.expr()
                self.take(")")
                return Quant(t.text, var, seq, body)
            if nxt.text == "(":
                if t.text not in FUNCTIONS:
                    raise ConditionError(f"unknown function {t.text!r} (known: {', '.join(sorted(FUNCTIONS))})", t.col)
                self.i += 2
                args = []
                if not self.at(")"):
                    args.append(self.expr())
                    while self.at(","):
                        self.i += 1
                        args.append(self.expr())
                self.take(")")
                if t.text == "exists" and (len(args) != 1 or not isinstance(args[0], Path)):
                    raise ConditionError("exists() takes one fact path", t.col)
                return Call(t.text, tuple(args))
            return self.path()
        got = repr(t.text) if t.kind != "end" else "end of condition"
        raise ConditionError(f"expected a value, found {got}", t.col)

    def path(self) -> Path:
        parts: list = [self.take(kind="name").text]
        while True:
            if self.at("."):
                self.i += 1
                t = self.tok
                if t.kind in ("name", "kw"):
                    parts.append(t.text)
                elif t.kind == "num" and t.text.isdigit():
                    parts.append(int(t.text))
                else:
                    raise ConditionError("expected a name after '.'", t.col)
                self.i += 1
            elif self.at("["):
                self.i += 1
                t = self.take(kind="num")
                if not t.text.isdigit():
                    raise ConditionError("list index must be a whole number", t.col)
                parts.append(int(t.text))
                self.take("]")
            else:
                return Path(tuple(parts))


def _unquote(text: str) -> str:
    body = text[1:-1]
    return re.sub(r"\\(.)", r"\1", body)


@functools.lru_cache(maxsize=4096)
def parse(src: str) -> Node:
    """Parse a condition; raises ConditionError with a column on bad input."""
    return _Parser(src).parse()


def paths(node: Node, bound: frozenset = frozenset()) -> list[str]:
    """Dotted fact paths a condition reads (bound quantifier variables excluded)."""
    out: list[str] = []
    if isinstance(node, Path):
        if node.parts[0] not in bound:
            out.append(node.dotted)
    elif isinstance(node, BinOp):
        out += paths(node.left, bound) + paths(node.right, bound)
    elif isinstance(node, (Not, Neg)):
        out += paths(node.operand, bound)
    elif isinstance(node, Call):
        for a in node.args:
            out += paths(a, bound)
    elif isinstance(node, ListLit):
        for a in node.items:
            out += paths(a, bound)
    elif isinstance(node, Quant):
        out += paths(node.seq, bound) + paths(node.body, bound | {node.var})
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


# ---------------------------------------------------------------- evaluation

@dataclass
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
        return -v if _is_number(v) else UNKNOWN
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


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _as_version(v) -> Version | None:
    if isinstance(v, Version):
        return v
    if isinstance(v, NumLit):
        return parse_version(v.text)
    if isinstance(v, str) and looks_like_version(v):
        return parse_version(v)
    if _is_number(v):
        return parse_version(repr(v) if isinstance(v, float) else str(v))
    return None


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
        if not (_is_number(a) and _is_number(b)):
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
        return _regex(b).search(text) is not None
    return _compare(op, a, b)


def _compare(op: str, a, b):
    fn = _ORDER[op]
    if a is None or b is None or isinstance(a, bool) or isinstance(b, bool):
        return fn(a, b) if op in ("==", "!=") else UNKNOWN
    if isinstance(a, (str, Version)) or isinstance(b, (str, Version)):
        # Versions never compare as floats: "12.10" > "12.9", "470.82.01" < 525.
        va, vb = _as_version(a), _as_version(b)
        if va is not None and vb is not None:
            return fn(va, vb)
        if isinstance(a, str) and isinstance(b, str):
            return fn(a, b)
        return fn(a, b) if op in ("==", "!=") else UNKNOWN
    if _is_number(a) and _is_number(b):
        return fn(a, b)
    return fn(a, b) if op in ("==", "!=") else UNKNOWN


def regex_problem(src: str) -> str | None:
    """Why a `matches` pattern is refused (None: fine). With RE2 every pattern it compiles runs
    in linear time; without it, nested repetition (catastrophic backtracking) is refused."""
    if len(src) > MAX_STRING:
        return f"longer than {MAX_STRING} characters"
    if _re2 is not None:
        try:
            _re2.compile(src, _re2_options())
        except Exception as exc:  # re2 raises its own error type
            return str(exc) or "RE2 cannot compile it"
        return None
    try:
        re.compile(src)
    except re.error as exc:
        return str(exc)
    if _NESTED_REPEAT.search(src):
        return "nested repetition (like (a+)+) can take exponential time; simplify it"
    return None


@functools.lru_cache(maxsize=1)
def _re2_options():
    opts = _re2.Options()
    opts.log_errors = False
    return opts


@functools.lru_cache(maxsize=256)
def _regex(src: str):
    """A compiled pattern (RE2 when present); a pattern that is refused matches itself literally."""
    if regex_problem(src) is not None:
        return re.compile(re.escape(src[:MAX_STRING]))
    if _re2 is not None:
        return _re2.compile(src, _re2_options())
    return re.compile(src)


def _len(x):
    if isinstance(x, (list, dict, str)):
        return len(x)
    raise TypeError


def _version(x):
    v = _as_version(x)
    if v is None:
        raise ValueError
    return v


def _number(x):
    if _is_number(x):
        return x
    return float(str(x).strip())


FUNCTIONS: dict[str, Callable] = {
    "version": _version,
    "bytes": parse_bytes,
    "len": _len,
    "lower": lambda x: str(x).lower(),
    "number": _number,
    "exists": lambda x: x is not UNKNOWN,  # evaluated specially: its argument is a path
}
