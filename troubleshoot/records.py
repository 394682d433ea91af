"""`record`: a dataclass whose methods are not generated as source code.

On Python 3.11 `@dataclass` writes `__init__`, `__repr__`, `__eq__`, `__hash__`, and for a
frozen class `__setattr__` and `__delattr__`, as source text and compiles each with `exec`,
every time the class is defined: about 5 million instructions a class, and the 48 classes a
small diagnosis defines were 40 % of its start (more than importing every module they live
in). A record is a real dataclass (`dataclasses.fields`, `replace`, `asdict` and
`is_dataclass` work as ever; `field(default=..., default_factory=..., init=, repr=,
compare=, hash=)` means what it means there) whose `__init__`, `__repr__`, `__eq__` and
`__hash__` are shared functions that read the class's fields, built once per class as
closures, and so are a frozen record's `__setattr__` and `__delattr__` (the dataclass's own,
written as source, cost a quarter of a millisecond a class). Its fields are declared as
dataclasses declares them, by recordfields, which shows them to dataclasses only when asked:
a program that never asks never imports dataclasses (nor inspect with it). Modules that define
records take `field` and `replace` from here. A class that is made often (HOT instances) then
gets the `__init__` a dataclass writes, compiled once.

What a record does not take: `order`, `slots`, `kw_only`, `InitVar` (refused) and
`unsafe_hash` (a class that needs them stays a plain dataclass). Its `__doc__` is not the
signature a dataclass writes for a class without one, and its first `__init__` writes the
instance's `__dict__` as a frozen dataclass's does (a custom `__setattr__` is not called
there). `__post_init__` is called as a dataclass calls it; a method the class defines itself
is kept, as a dataclass keeps it.
"""

from __future__ import annotations

import reprlib
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from troubleshoot.recordfields import MISSING, declare, field, fields_of, frozen_bases, frozen_error, replace

if TYPE_CHECKING:
    from troubleshoot.recordfields import Field

__all__ = ["DEFERRED", "HOT", "MISSING", "deferrable", "field", "record", "replace"]

T = TypeVar("T", bound=type)

# Instances of one class after which its __init__ is compiled (see _compiled_init). A compiled
# __init__ saves ~0.9 µs an instance; compiling costs 0.2 ms, and the first compile of a process
# 1.5 ms more (Python builds its syntax tree types then). So a class made a few thousand times
# (the scan's 1,300 patterns, a rule set's) keeps the shared one, and no small diagnosis compiles.
HOT = 4096
# Where an instance keeps the loader of its held-back fields (see `deferrable`).
DEFERRED = "__deferred__"


def record(cls: T | None = None, /, *, frozen: bool = False) -> Any:
    """Make `cls` a dataclass (frozen, when asked) without generating its methods' source."""

    def wrap(c: T) -> T:
        return _record(c, frozen)

    return wrap if cls is None else wrap(cls)


def _record(cls: T, frozen: bool) -> T:
    if cls.__dict__.get("__doc__") is None:
        cls.__doc__ = cls.__name__  # a dataclass writes its signature there, with inspect
    bases = frozen_bases(cls)
    if frozen and bases is False:
        raise TypeError("cannot inherit frozen dataclass from a non-frozen one")
    if not frozen and bases:
        raise TypeError("cannot inherit non-frozen dataclass from a frozen one")
    fields = declare(cls, frozen)
    own = cls.__dict__
    _check(cls, fields)
    methods: dict[str, Callable] = {
        "__init__": _init(cls, fields),
        "__repr__": _repr([f.name for f in fields if f.repr]),
        "__eq__": _eq([f.name for f in fields if f.compare]),
    }
    if frozen:
        hashed = [f.name for f in fields if (f.compare if f.hash is None else f.hash)]
        methods["__hash__"] = _hash(hashed)
        for name in ("__setattr__", "__delattr__"):
            if name in own:
                raise TypeError(f"Cannot overwrite attribute {name} in class {cls.__name__}")
        methods["__setattr__"], methods["__delattr__"] = _frozen(cls, [f.name for f in fields])
    # A class that defines __eq__ gets __hash__ = None from Python itself: not a hash of its own.
    implicit = own.get("__hash__", 0) is None and "__eq__" in own
    for name, method in methods.items():
        if name not in own or (name == "__hash__" and implicit):
            method.__qualname__ = f"{cls.__qualname__}.{name}"
            setattr(cls, name, method)
    if not frozen and "__hash__" not in own:
        cls.__hash__ = None  # type: ignore[assignment]  # as a dataclass with eq and no frozen
    return cls


def _frozen(cls: type, names: list[str]) -> tuple[Callable, Callable]:
    """`__setattr__` and `__delattr__` as a frozen dataclass has them: no field of the class,
    and nothing at all on an instance of the class itself, is set or deleted."""
    fields = frozenset(names)

    def __setattr__(self, name, value):
        if type(self) is cls or name in fields:
            raise frozen_error(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self, name):
        if type(self) is cls or name in fields:
            raise frozen_error(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    return __setattr__, __delattr__


def _check(cls: type, fields: list[Field]) -> None:
    """What a dataclass refuses when it writes __init__, and what a record does not do."""
    seen_default = None
    for f in fields:
        if getattr(f, "kw_only", False) is True:
            raise TypeError(f"{cls.__qualname__}: a record has no keyword-only fields ({f.name!r})")
        if not f.init:
            continue
        if f.default is not MISSING or f.default_factory is not MISSING:
            seen_default = f.name
        elif seen_default is not None:
            raise TypeError(f"non-default argument {f.name!r} follows default argument")


def _init(cls: type, fields: list[Field]) -> Callable:
    given = [f for f in fields if f.init]
    names = [f.name for f in given]
    rest = [f for f in fields if not f.init and (f.default is not MISSING or f.default_factory is not MISSING)]
    post_init = hasattr(cls, "__post_init__")
    title = cls.__qualname__
    count = len(names)
    # Each field with what fills it when no argument does: (name, default, factory), MISSING where
    # there is none.
    specs = [(f.name, f.default, f.default_factory) for f in given]

    calls = [0]

    def __init__(self, *args, **kwargs) -> None:
        calls[0] += 1
        if calls[0] == HOT and cls.__dict__.get("__init__") is __init__:
            cls.__init__ = _compiled_init(cls, given, rest, post_init)  # from the next instance on
        d = self.__dict__  # as a dataclass's __init__ sets fields, frozen or not (no __slots__)
        if len(args) == count and not kwargs:  # every field given by position: most calls at run time
            d.update(zip(names, args))
        else:
            _fill(d, args, kwargs, names, specs, title)
        for f in rest:
            d[f.name] = f.default if f.default is not MISSING else f.default_factory()
        if post_init:
            self.__post_init__()

    return __init__


def _compiled_init(cls: type, given: list[Field], rest: list[Field],
                   post_init: bool) -> Callable:
    """The __init__ a dataclass would write, compiled once the class is in use: a class made
    thousands of times (a hit of a scan) pays the compile once, a class made a few times never."""
    space: dict[str, Any] = {"MISSING": MISSING}
    params, body = [], []
    for i, f in enumerate(given):
        if f.default is not MISSING:
            space[f"d{i}"] = f.default
            params.append(f"{f.name}=d{i}")
        elif f.default_factory is not MISSING:
            space[f"f{i}"] = f.default_factory
            params.append(f"{f.name}=MISSING")
            body.append(f"    if {f.name} is MISSING: {f.name} = f{i}()")
        else:
            params.append(f.name)
    body.append("    d = self.__dict__")
    body += [f"    d[{f.name!r}] = {f.name}" for f in given]
    for i, f in enumerate(rest):
        if f.default is not MISSING:
            space[f"r{i}"] = f.default
            body.append(f"    d[{f.name!r}] = r{i}")
        else:
            space[f"rf{i}"] = f.default_factory
            body.append(f"    d[{f.name!r}] = rf{i}()")
    if post_init:
        body.append("    self.__post_init__()")
    source = f"def __init__(self, {', '.join(params)}):\n" + "\n".join(body) + "\n"
    exec(compile(source, f"<record {cls.__qualname__}.__init__>", "exec"), space)
    init = space["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


def _fill(d: dict, args: tuple, kwargs: dict, names: list[str], specs: list, title: str) -> None:
    """A record's fields from positional and keyword arguments, defaults and factories, with the
    errors a dataclass's __init__ raises."""
    if len(args) > len(names):
        least = sum(1 for _, default, factory in specs if default is MISSING and factory is MISSING)
        takes = f"from {least + 1} to {len(names) + 1}" if least < len(names) else str(len(names) + 1)
        raise TypeError(f"{title}.__init__() takes {takes} positional arguments but {len(args) + 1} were given")
    for name, value in zip(names, args):
        if name in kwargs:
            raise TypeError(f"{title}.__init__() got multiple values for argument '{name}'")
        d[name] = value
    if kwargs:
        kwargs = dict(kwargs)  # taken apart below; the caller's dict stays as it was
    for name, default, factory in specs[len(args):]:
        if name in kwargs:
            d[name] = kwargs.pop(name)
        elif default is not MISSING:
            d[name] = default
        elif factory is not MISSING:
            d[name] = factory()
        else:
            raise TypeError(f"{title}.__init__() missing 1 required positional argument: '{name}'")
    if kwargs:  # every field's was taken out: what is left names none
        raise TypeError(f"{title}.__init__() got an unexpected keyword argument '{next(iter(kwargs))}'")


def _repr(names: list[str]) -> Callable:
    @reprlib.recursive_repr()
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


def deferrable(*names: str) -> Callable[[T], T]:
    """Let an instance of a record hold the fields `names` back until one of them is first read.

    A record made the usual way holds every field. One made by a reader that puts a loader in
    its `__dict__` under DEFERRED (a callable returning {field: value} for every field named
    here) and leaves these fields out has them filled by that loader at the first read of any of
    them: a rule set read back from its cache holds each rule's long texts (explanation, fixes,
    examples) as bytes, and a diagnosis reads them for the few rules that fire."""

    def wrap(cls: T) -> T:
        for f in fields_of(cls):
            if f.name in names:
                setattr(cls, f.name, _Deferred(f.name, f.default))
        cls.__deferrable__ = names
        return cls

    return wrap


class _Deferred:
    """A non-data descriptor: the instance's own value, once in its `__dict__`, is found before
    it, so it is called only while the field is still held back."""

    __slots__ = ("name", "default")

    def __init__(self, name: str, default: Any):
        self.name, self.default = name, default

    def __get__(self, obj, cls=None):
        if obj is None:
            if self.default is MISSING:
                raise AttributeError(self.name)
            return self.default
        d = obj.__dict__
        load = d.get(DEFERRED)
        if load is None:
            raise AttributeError(f"{type(obj).__qualname__!r} object has no attribute {self.name!r}")
        # Filled before the loader is dropped: a thread reading at the same time either loads
        # the same values again or finds them in place, never a missing field.
        d.update(load())
        d.pop(DEFERRED, None)
        return d[self.name]
