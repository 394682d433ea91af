"""The tree a condition parses into, and the values of the condition language that Python
lacks: UNKNOWN (a fact nobody measured) and a number that remembers how it was written."""

from __future__ import annotations

from typing import Any

from troubleshoot.records import record

# The longest text literal a rule file may write (a `matches` pattern is one).
MAX_STRING = 1000


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


@record(frozen=True)
class Node:
    pass


@record(frozen=True)
class Lit(Node):
    value: Any


@record(frozen=True)
class ListLit(Node):
    items: tuple


@record(frozen=True)
class Path(Node):
    parts: tuple  # str keys and int indices

    @property
    def dotted(self) -> str:
        out = ""
        for p in self.parts:
            out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else p)
        return out


@record(frozen=True)
class BinOp(Node):
    op: str
    left: Node
    right: Node


@record(frozen=True)
class Not(Node):
    operand: Node


@record(frozen=True)
class Neg(Node):
    operand: Node


@record(frozen=True)
class Call(Node):
    name: str
    args: tuple


@record(frozen=True)
class Quant(Node):
    kind: str
    var: str
    seq: Node
    body: Node

