"""The fields of a record (records.record): declared without importing dataclasses, and shown to
dataclasses as a dataclass's fields are the first time anything asks for them.

A record is a dataclass to every function of dataclasses (`fields`, `replace`, `asdict`,
`is_dataclass`): its `__dataclass_fields__` and `__dataclass_params__` are the objects a
dataclass has. They are made at their first read (`_View`), which imports dataclasses then:
dataclasses imports inspect, and with it ast, dis and tokenize, 3-4 ms of the start of every
small diagnosis, which never asks. Until then a record's fields are this module's `Field`s
(`__record_fields__`): `field()` makes one as dataclasses.field makes its own, and a
dataclasses.field() written in a record's body is taken as well.

What dataclasses decides from private helpers (which annotation is a ClassVar, which default it
refuses) is decided here the same way; tests/test_records.py compares the two.
"""

from __future__ import annotations

import abc
import functools
import sys
import types
from typing import Any


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


# No value given: dataclasses.MISSING once the fields are shown to dataclasses.
MISSING: Any = _Missing()

_ATTRS = ("default", "default_factory", "init", "repr", "hash", "compare", "metadata", "kw_only")


class Field:
    """One field of a record, as dataclasses.Field describes one. `classvar`: the annotation is
    a ClassVar (dataclasses keeps those among its fields too, marked so)."""

    __slots__ = ("name", "type", *_ATTRS, "classvar", "shown")

    def __init__(self, default=MISSING, default_factory=MISSING, init=True, repr=True, hash=None,
                 compare=True, metadata=None, kw_only=MISSING):
        if default is not MISSING and default_factory is not MISSING:
            raise ValueError("cannot specify both default and default_factory")
        self.name: str | None = None
        self.type: Any = None
        self.default, self.default_factory, self.init, self.repr = default, default_factory, init, repr
        self.hash, self.compare, self.metadata, self.kw_only = hash, compare, metadata, kw_only
        self.classvar = False
        self.shown = None  # the dataclasses.Field made of it (_shown)

    def __repr__(self) -> str:
        return f"Field(name={self.name!r}, default={self.default!r}, default_factory={self.default_factory!r})"


def field(*, default=MISSING, default_factory=MISSING, init=True, repr=True, hash=None, compare=True,
          metadata=None, kw_only=MISSING) -> Any:
    """A record's field with what dataclasses.field takes (for records; a dataclass takes
    dataclasses.field)."""
    return Field(default, default_factory, init, repr, hash, compare, metadata, kw_only)


def _known(name: str):
    """dataclasses' `name`, where something imported dataclasses (an instance of its classes can
    exist only then), else None. Another thread may be importing it right now: a name it has
    not defined yet is None too."""
    return getattr(sys.modules.get("dataclasses"), name, None)


def _as_field(value) -> Field | None:
    """`value` as a record's Field: one of ours, a dataclasses.Field (kept as what it shows), else None."""
    if isinstance(value, Field):
        return value
    their_field = _known("Field")
    if their_field is None or not isinstance(value, their_field):
        return None
    made = Field(*(_ours(getattr(value, a, MISSING)) for a in _ATTRS))
    made.shown = value
    return made


def _ours(value):
    return MISSING if value is _known("MISSING") is not None else value


def declare(cls: type, frozen: bool) -> list[Field]:
    """Give `cls` its fields as `dataclasses.dataclass(init=False, repr=False, eq=False)` would
    (the fields, their class attributes, `__match_args__`), without dataclasses, and the views
    dataclasses reads; return those that are fields (not ClassVars)."""
    found: dict[str, Field] = {}
    for base in cls.__mro__[-1:0:-1]:
        found.update(_declared(base))
    annotations = cls.__dict__.get("__annotations__", {})
    for name, kind in annotations.items():
        f = found[name] = _field(cls, name, kind)
        if _as_field(cls.__dict__.get(name)) is not None:
            if f.default is MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, f.default)
    for name, value in cls.__dict__.items():
        if _as_field(value) is not None and name not in annotations:
            raise TypeError(f"{name!r} is a field but has no type annotation")
    cls.__record_fields__, cls.__record_frozen__ = found, frozen
    cls.__dataclass_fields__ = _View(cls, "__dataclass_fields__")
    cls.__dataclass_params__ = _View(cls, "__dataclass_params__")
    fields = [f for f in found.values() if not f.classvar]
    if "__match_args__" not in cls.__dict__:
        cls.__match_args__ = tuple(f.name for f in fields if f.init)
    abc.update_abstractmethods(cls)
    return fields


def _declared(base: type) -> dict[str, Field]:
    """The fields `base` declares itself: a record's, or a dataclass's as records' Fields."""
    own = base.__dict__.get("__record_fields__")
    if own is not None:
        return own
    shown = base.__dict__.get("__dataclass_fields__")
    if not isinstance(shown, dict):
        return {}
    out = {}
    for name, f in shown.items():
        mine = out[name] = _as_field(f)
        mine.name, mine.type, mine.classvar = f.name, f.type, f._field_type is not _known("_FIELD")
    return out


def _field(cls: type, name: str, kind: object) -> Field:
    """One annotated name of `cls` as dataclasses makes it a field (`dataclasses._get_field`)."""
    default = getattr(cls, name, MISSING)
    f = _as_field(default)
    if f is None:
        if isinstance(default, types.MemberDescriptorType):  # a slot, not a default
            default = MISSING
        f = Field(default=default)
    f.name, f.type = name, kind
    if _is_classvar(kind, cls):
        f.classvar = True
        if f.default_factory is not MISSING:
            raise TypeError(f"field {name} cannot have a default factory")
    init_var = _known("InitVar")
    if (isinstance(kind, str) and "InitVar" in kind) or (
            init_var is not None and (kind is init_var or isinstance(kind, init_var))):
        raise TypeError(f"{cls.__qualname__}: a record has no InitVar fields ({name!r}): use a dataclass")
    if not f.classvar and f.default is not MISSING and f.default.__class__.__hash__ is None:
        raise ValueError(f"mutable default {type(f.default)} for field {name} is not allowed: use default_factory")
    if f.kw_only is MISSING:
        f.kw_only = False
    return f


def _is_classvar(kind: object, cls: type) -> bool:
    """As dataclasses decides it: `typing.ClassVar` or `ClassVar[...]`; a string annotation
    names it when the class's module binds the name it uses to typing.ClassVar."""
    typing = sys.modules.get("typing")
    if typing is None:  # no ClassVar can have been written
        return False
    if not isinstance(kind, str):
        return _classvar_type(kind, typing)
    if "ClassVar" not in kind:
        return False
    module_name, name = _head(kind)
    module = sys.modules.get(cls.__module__)
    if name is None or module is None or (module_name and module.__dict__.get(module_name) is not typing):
        return False
    return _classvar_type(module.__dict__.get(name), typing)


def _classvar_type(kind: object, typing) -> bool:
    return kind is typing.ClassVar or (type(kind) is typing._GenericAlias and kind.__origin__ is typing.ClassVar)


def _head(text: str) -> tuple[str | None, str | None]:
    """What dataclasses' `^(?:\\s*(\\w+)\\s*\\.)?\\s*(\\w+)` finds at the start of an annotation:
    (module, name), (None, name), or (None, None); without a regex to compile."""
    start = _past(text, 0, str.isspace)
    end = _past(text, start, _wordy)
    if end == start:
        return None, None
    dot = _past(text, end, str.isspace)
    if text[dot : dot + 1] == ".":
        name = _past(text, dot + 1, str.isspace)
        name_end = _past(text, name, _wordy)
        if name_end > name:
            return text[start:end], text[name:name_end]
    return None, text[start:end]


def _wordy(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _past(text: str, at: int, test) -> int:
    while at < len(text) and test(text[at]):
        at += 1
    return at


def frozen_bases(cls: type) -> bool | None:
    """Whether a dataclass among `cls`'s bases is frozen; None when no base is a dataclass."""
    found = None
    for base in cls.__mro__[-1:0:-1]:  # as dataclasses looks at them
        frozen = base.__dict__.get("__record_frozen__")
        if frozen is None and isinstance(base.__dict__.get("__dataclass_fields__"), dict):
            frozen = base.__dict__["__dataclass_params__"].frozen  # a dataclass
        if frozen is not None:
            found = bool(found) or frozen
    return found


def fields_of(cls: type) -> list[Field]:
    """A record's fields, ClassVars left out (dataclasses.fields without dataclasses)."""
    return [f for f in cls.__record_fields__.values() if not f.classvar]


def replace(obj, /, **changes):
    """dataclasses.replace: a copy of `obj` with `changes`; for a record, without dataclasses."""
    fields = getattr(type(obj), "__record_fields__", None)
    if fields is None:
        import dataclasses

        return dataclasses.replace(obj, **changes)
    for f in fields.values():
        if f.classvar:
            continue
        if not f.init:
            if f.name in changes:
                raise ValueError(f"field {f.name} is declared with init=False, it cannot be specified with replace()")
            continue
        if f.name not in changes:
            changes[f.name] = getattr(obj, f.name)
    return obj.__class__(**changes)


def frozen_error(message: str) -> Exception:
    from dataclasses import FrozenInstanceError

    return FrozenInstanceError(message)


class _View:
    """`__dataclass_fields__` or `__dataclass_params__` of one record, made at the first read
    from the class or one of its instances, then kept on the class in its place."""

    def __init__(self, cls: type, name: str):
        self.cls, self.name = cls, name

    def __get__(self, obj, owner=None):
        cls = self.cls
        if self.name == "__dataclass_fields__":
            value = {name: _shown(f) for name, f in cls.__record_fields__.items()}
        else:
            value = _params(cls.__record_frozen__)
        setattr(cls, self.name, value)
        return value


def _shown(f: Field):
    """The dataclasses.Field of a record's Field, made once: a field a subclass inherits is the
    same object in both, as a dataclass's is."""
    import dataclasses

    if f.shown is None:
        f.shown = dataclasses.field(**{a: _theirs(getattr(f, a), dataclasses) for a in _ATTRS})
    made = f.shown
    if made._field_type is None:  # not yet declared (a dataclass base's fields are, by it)
        made.name, made.type = f.name, f.type
        made._field_type = dataclasses._FIELD_CLASSVAR if f.classvar else dataclasses._FIELD
        if getattr(made, "kw_only", None) is dataclasses.MISSING:
            made.kw_only = False
    return made


def _theirs(value, dataclasses):
    return dataclasses.MISSING if value is MISSING else value


@functools.cache
def _template():
    """A dataclass's own parameters (their fields change with the Python version)."""
    import dataclasses

    @dataclasses.dataclass(init=False, repr=False, eq=False)
    class Template:
        """Template."""

    return Template.__dataclass_params__


def _params(frozen: bool):
    """The class's dataclass parameters as a dataclass with these methods would have them: a
    copy of a dataclass's own."""
    made = _template()
    params = object.__new__(type(made))
    for name in type(made).__slots__:
        setattr(params, name, getattr(made, name))
    params.init = params.repr = params.eq = True
    params.frozen = frozen
    return params
