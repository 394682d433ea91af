"""`record`: a dataclass whose methods are not generated as source code.

On Python 3.11 `@dataclass` writes `__init__`, `__repr__`, `__eq__`, `__hash__`, and for a
frozen class `__setattr__` and `__delattr__`, as source text and compiles each with `exec`,
every time the class is defined: about 5 million instructions a class, and the 48 classes a
small diagnosis defines were 40 % of its start (more than importing every module they live
in). A record is a real dataclass (`dataclasses.fields`, `replace`, `asdict` and
`is_dataclass` work as ever; `field(default=..., default_factory=..., init=, repr=,
compare=, hash=)` means what it means there) whose methods are shared functions that read the
class's fields, built once per class as closures: nothing is compiled.

What a record does not take: `order`, `slots`, `kw_only`, `InitVar` and `unsafe_hash` (a
class that needs them stays a plain dataclass). `__post_init__` is called as a dataclass
calls it. A method the class defines itself is kept, as a dataclass keeps it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import MISSING, FrozenInstanceError
from typing import Any, Callable, TypeVar

T = TypeVar("T", bound=type)


def record(cls: T | None = None, /, *, frozen: bool = False) -> Any:
    """Make `cls` a dataclass (frozen, when asked) without generating its methods' source."""

    def wrap(c: T) -> T:
        return _record(c, frozen)

    return wrap if cls is None else wrap(cls)


def _record(cls: T, frozen: bool) -> T:
    if cls.__dict__.get("__doc__") is None:
        cls.__doc__ = cls.__name__  # else dataclasses computes one with inspect.signature
    cls = dataclasses.dataclass(cls, init=False, repr=False, eq=False)
    fields = list(dataclasses.fields(cls))
    own = cls.__dict__
    methods: dict[str, Callable] = {
        "__init__": _init(cls, fields),
        "__repr__": _repr([f.name for f in fields if f.repr]),
        "__eq__": _eq([f.name for f in fields if f.compare]),
    }
    if frozen:
        hashed = [f.name for f in fields if (f.compare if f.hash is None else f.hash)]
        names = frozenset(f.name for f in fields)
        methods.update(__hash__=_hash(hashed), __setattr__=_frozen_set(cls, names),
                       __delattr__=_frozen_del(cls, names))
    for name, method in methods.items():
        if name not in own:
            method.__qualname__ = f"{cls.__qualname__}.{name}"
            setattr(cls, name, method)
    if not frozen and "__hash__" not in own:
        cls.__hash__ = None  # type: ignore[assignment]  # as a dataclass with eq and no frozen
    return cls


def _init(cls: type, fields: list[dataclasses.Field]) -> Callable:
    given = [f for f in fields if f.init]
    names = [f.name for f in given]
    rest = [f for f in fields if not f.init and (f.default is not MISSING or f.default_factory is not MISSING)]
    post_init = hasattr(cls, "__post_init__")
    title = cls.__qualname__

    def __init__(self, *args, **kwargs) -> None:
        if len(args) > len(names):
            raise TypeError(f"{title}.__init__() takes {len(names) + 1} positional arguments but {len(args) + 1} were given")
        d = self.__dict__  # as a dataclass's __init__ sets fields, frozen or not (no __slots__)
        for name, value in zip(names, args):
            if name in kwargs:
                raise TypeError(f"{title}.__init__() got multiple values for argument '{name}'")
            d[name] = value
        for f in given[len(args):]:
            if f.name in kwargs:
                d[f.name] = kwargs.pop(f.name)
            elif f.default is not MISSING:
                d[f.name] = f.default
            elif f.default_factory is not MISSING:
                d[f.name] = f.default_factory()
            else:
                raise TypeError(f"{title}.__init__() missing 1 required positional argument: '{f.name}'")
        if kwargs:  # every field's was taken out: what is left names none
            raise TypeError(f"{title}.__init__() got an unexpected keyword argument '{next(iter(kwargs))}'")
        for f in rest:
            d[f.name] = f.default if f.default is not MISSING else f.default_factory()
        if post_init:
            self.__post_init__()

    return __init__


def _repr(names: list[str]) -> Callable:
    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in names)
        return f"{type(self).__qualname__}({inner})"

    return __repr__


def _eq(names: list[str]) -> Callable:
    def __eq__(self, other) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        # As tuples, as a dataclass compares: a field holding the same object (a NaN) is equal.
        return tuple([getattr(self, n) for n in names]) == tuple([getattr(other, n) for n in names])

    return __eq__


def _hash(names: list[str]) -> Callable:
    def __hash__(self) -> int:
        return hash(tuple([getattr(self, n) for n in names]))

    return __hash__


def _frozen_set(cls: type, names: frozenset[str]) -> Callable:
    def __setattr__(self, name: str, value) -> None:
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    return __setattr__


def _frozen_del(cls: type, names: frozenset[str]) -> Callable:
    def __delattr__(self, name: str) -> None:
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    return __delattr__
