"""The condition language's parser: text -> tree (condtree), with a column on every error.

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

Bounds keep what a rule file (team-written data) can ask of the parser small: the length of a
condition, its nesting, the digits of a number and the length of a text.
"""

from __future__ import annotations

import re

from troubleshoot.engine.condfuncs import FUNCTIONS
from troubleshoot.engine.condregex import regex_problem
from troubleshoot.engine.condtree import (MAX_STRING, BinOp, Call, ListLit, Lit, Neg, Node, Not, NumLit, Path,
                                          Quant)
from troubleshoot.lazyre import lazy
from troubleshoot.records import record
from troubleshoot.values import parse_version

MAX_CHARS = 2000
MAX_DEPTH = 32
MAX_NUMBER_DIGITS = 40


class ConditionError(ValueError):
    """A condition that does not parse; `column` is 1-based within the condition text."""

    def __init__(self, message: str, column: int):
        self.column = column
        super().__init__(f"{message} (column {column})")


_TOKEN = lazy(
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


@record(frozen=True)
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



class Parser:
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
            return self._number(t)
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
            return ListLit(self._items("]"))
        if t.kind == "name":
            return self._named(t)
        got = repr(t.text) if t.kind != "end" else "end of condition"
        raise ConditionError(f"expected a value, found {got}", t.col)

    def _number(self, t: Tok) -> Lit:
        if len(t.text) > MAX_NUMBER_DIGITS:
            raise ConditionError(f"number longer than {MAX_NUMBER_DIGITS} characters", t.col)
        if t.text.count(".") > 1:  # 525.60.13: a version, never a float
            version = parse_version(t.text)
            if version is None:
                raise ConditionError(f"{t.text!r} is not a version", t.col)
            return Lit(version)
        return Lit(NumLit(t.text) if "." in t.text else int(t.text))

    def _items(self, closing: str) -> tuple:
        """Expressions separated by commas up to `closing` (taken)."""
        items = []
        if not self.at(closing):
            items.append(self.expr())
            while self.at(","):
                self.i += 1
                items.append(self.expr())
        self.take(closing)
        return tuple(items)

    def _named(self, t: Tok) -> Node:
        """A quantifier, a function call or a fact path."""
        if self.toks[self.i + 1].text != "(":
            return self.path()
        if t.text in QUANTIFIERS:
            self.i += 2
            var = self.take(kind="name").text
            self.take("in")
            seq = self.expr()
            self.take(":")
            body = self.expr()
            self.take(")")
            return Quant(t.text, var, seq, body)
        if t.text not in FUNCTIONS:
            raise ConditionError(f"unknown function {t.text!r} (known: {', '.join(sorted(FUNCTIONS))})", t.col)
        self.i += 2
        args = self._items(")")
        if t.text == "exists" and (len(args) != 1 or not isinstance(args[0], Path)):
            raise ConditionError("exists() takes one fact path", t.col)
        return Call(t.text, args)

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

