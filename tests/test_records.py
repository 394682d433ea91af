"""A record behaves as the dataclass it stands for: the same instances, errors and comparisons,
before and after its __init__ is compiled (records.HOT instances)."""

from __future__ import annotations

import copy
import dataclasses
import math
import pickle
import subprocess
import sys
import textwrap
import typing  # at the top too: for the string annotations that name typing.ClassVar
from collections import deque
from dataclasses import field
from typing import ClassVar  # at the top: dataclasses finds it here when it reads a string annotation

import pytest

from troubleshoot import records
from troubleshoot.records import record


def _sample(make):
    @make
    class Sample:
        """A sample."""

        a: int
        b: str = "b"
        c: deque = field(default_factory=lambda: deque(maxlen=2))
        d: float = field(default=1.5, compare=False, repr=False)
        e: list = field(default_factory=list, init=False, compare=False)

    return Sample


# Module-level, so that pickle finds them by name.
Plain, FrozenPlain = _sample(dataclasses.dataclass), _sample(dataclasses.dataclass(frozen=True))
Rec, FrozenRec = _sample(record), _sample(record(frozen=True))
for _cls, _name in ((Plain, "Plain"), (FrozenPlain, "FrozenPlain"), (Rec, "Rec"), (FrozenRec, "FrozenRec")):
    _cls.__qualname__ = _cls.__name__ = _name


def _pair(frozen: bool):
    """The same class made by @dataclass and by @record."""
    return (FrozenPlain, FrozenRec) if frozen else (Plain, Rec)


CALLS = [((1,), {}), ((1, "x"), {}), ((1,), {"b": "y", "d": 2.5}), ((), {"a": 3}), ((1, "x", deque([1]), 9.0), {})]
BAD = [((), {}), ((1,), {"a": 2}), ((1,), {"zz": 1}), ((1, 2, 3, 4, 5), {})]


def _outcome(cls, args, kwargs):
    try:
        obj = cls(*args, **kwargs)
    except TypeError as exc:
        return ("TypeError", str(exc).split("()", 1)[1])  # the class's name aside
    return ("ok", repr(obj).split("(", 1)[1], dataclasses.asdict(obj))


@pytest.mark.parametrize("frozen", [False, True])
@pytest.mark.parametrize("hot", [False, True])
def test_a_record_is_made_and_refused_as_its_dataclass_is(frozen, hot, monkeypatch):
    if hot:
        monkeypatch.setattr(records, "HOT", 1)  # the compiled __init__ from the second instance on
    plain, rec = _pair(frozen)
    for _ in range(3):
        for args, kwargs in CALLS + BAD:
            assert _outcome(rec, args, kwargs) == _outcome(plain, args, kwargs), (args, kwargs)


@pytest.mark.parametrize("frozen", [False, True])
def test_a_record_compares_hashes_copies_and_replaces_as_its_dataclass(frozen):
    plain, rec = _pair(frozen)
    for cls in (plain, rec):
        x, y = cls(1, d=9.0), cls(1)
        assert x == y and x != cls(2) and (x == plain(1)) is (cls is plain)
        assert dataclasses.replace(x, b="z").b == "z" and dataclasses.is_dataclass(cls)
        assert [f.name for f in dataclasses.fields(cls)] == ["a", "b", "c", "d", "e"]
        assert cls.__match_args__ == ("a", "b", "c", "d")
        assert pickle.loads(pickle.dumps(x)) == x and copy.deepcopy(x) == x
        nan = cls(1, b=math.nan)  # the same object in both: equal, as tuples compare
        assert nan == copy.copy(nan)
    if frozen:
        assert hash(rec(1, "q", (1,))) == hash(rec(1, "q", (1,))) == hash(plain(1, "q", (1,)))
        with pytest.raises(dataclasses.FrozenInstanceError):
            rec(1).a = 2
        with pytest.raises(dataclasses.FrozenInstanceError):
            del rec(1).b
    else:
        with pytest.raises(TypeError):
            hash(rec(1))
        obj = rec(1)
        obj.a = 5
        assert obj.a == 5


def test_a_record_keeps_what_its_class_defines_and_calls_post_init():
    @record(frozen=True)
    class Kept:
        x: int

        def __repr__(self) -> str:
            return "mine"

        def __post_init__(self) -> None:
            object.__setattr__(self, "seen", self.x * 2)

    assert repr(Kept(2)) == "mine" and Kept(2).seen == 4


def test_a_frozen_record_is_frozen_and_refused_as_a_frozen_dataclass_is():
    """Its __setattr__ and __delattr__ are the record's own: they refuse what the dataclass's do,
    with the same errors, and the same class definitions are refused."""
    for make in (dataclasses.dataclass(frozen=True), record(frozen=True)):
        @make
        class Point:
            x: int

        class Named(Point):  # a plain subclass may set what is not a field
            pass

        p, n = Point(1), Named(2)
        n.label = "here"
        for target, name in ((p, "x"), (p, "other"), (n, "x")):
            with pytest.raises(dataclasses.FrozenInstanceError, match=f"cannot assign to field '{name}'"):
                setattr(target, name, 3)
            with pytest.raises(dataclasses.FrozenInstanceError, match=f"cannot delete field '{name}'"):
                delattr(target, name)
        assert n.label == "here" and dataclasses.is_dataclass(Point) and Point.__dataclass_params__.frozen

        @dataclasses.dataclass
        class Loose:
            y: int = 0

        with pytest.raises(TypeError, match="cannot inherit frozen dataclass from a non-frozen one"):
            make(type("Bad", (Loose,), {"__annotations__": {"z": int}, "z": 0}))
        with pytest.raises(TypeError, match="Cannot overwrite attribute __setattr__"):
            make(type("Own", (), {"__annotations__": {"z": int}, "__setattr__": lambda self, k, v: None}))


def test_a_record_on_a_record_has_the_fields_and_refusals_of_a_dataclass_on_a_dataclass():
    """A record declares its fields itself (not through dataclasses.dataclass): inherited fields,
    defaults, ClassVar names, `field()` defaults left on the class, and what dataclasses refuses
    come out as they do for dataclasses."""
    for make in (dataclasses.dataclass, record):
        for frozen in (False, True):
            deco = make(frozen=True) if frozen else make

            @deco
            class Base:
                a: int
                b: str = "b"
                tag: ClassVar[str] = "kept"
                c: tuple = field(default=())

            @deco
            class Child(Base):
                d: float = 1.0
                b: str = "child"

            assert [f.name for f in dataclasses.fields(Child)] == ["a", "b", "c", "d"]
            assert Child.__match_args__ == ("a", "b", "c", "d") and Child.tag == "kept" and Child.c == ()
            x = Child(1)
            assert (x.b, x.c, x.d) == ("child", (), 1.0) and dataclasses.replace(x, d=2.0).d == 2.0
            assert dataclasses.fields(Child)[1].default == "child" and "tag" not in [f.name for f in dataclasses.fields(Base)]
            if frozen:
                with pytest.raises(dataclasses.FrozenInstanceError):
                    x.a = 3
                with pytest.raises(TypeError, match="cannot inherit non-frozen dataclass from a frozen one"):
                    make(type("Thawed", (Base,), {"__annotations__": {"z": int}, "z": 0}))
            with pytest.raises(ValueError, match="mutable default <class 'list'> for field z is not allowed"):
                deco(type("Mutable", (), {"__annotations__": {"z": list}, "z": []}))
            with pytest.raises(TypeError, match="'z' is a field but has no type annotation"):
                deco(type("Bare", (), {"__annotations__": {}, "z": field(default=1)}))
            with pytest.raises(TypeError, match="non-default argument 'z' follows default argument"):
                deco(type("Order", (Base,), {"__annotations__": {"z": int}}))


def test_records_replace_is_dataclasses_replace():
    for frozen in (False, True):
        plain, rec = _pair(frozen)
        for cls, replace in ((plain, dataclasses.replace), (rec, records.replace)):
            x = cls(1, "x", d=2.0)
            y = replace(x, b="y")
            assert (y.a, y.b, y.d) == (1, "y", 2.0) and y is not x and x.b == "x"
            with pytest.raises(ValueError, match="field e is declared with init=False, it cannot be specified with replace"):
                replace(x, e=[1])
            with pytest.raises(TypeError, match="unexpected keyword argument 'zz'"):
                replace(x, zz=1)
    assert records.replace(Plain(1), b="p").b == "p"  # a dataclass: dataclasses.replace


def test_a_program_that_only_defines_and_uses_records_never_imports_dataclasses():
    """dataclasses (and inspect, which it imports) is loaded when something asks for a record's
    dataclass view, and the view is then what a dataclass has."""
    code = textwrap.dedent("""
        import sys
        from typing import ClassVar
        from troubleshoot.records import field, record, replace

        @record(frozen=True)
        class Base:
            a: int
            tag: ClassVar[str] = "t"
            b: tuple = field(default=())

        @record(frozen=True)
        class Child(Base):
            c: list = field(default_factory=list, compare=False)

        x = replace(Child(1), c=[2])
        assert (x.a, x.b, x.c, Child.tag) == (1, (), [2], "t") and x == Child(1)
        print(sorted(m for m in ("dataclasses", "inspect", "ast") if m in sys.modules))
        import dataclasses
        shown = [(f.name, f.default is dataclasses.MISSING, f.compare) for f in dataclasses.fields(x)]
        print(shown, Child.__dataclass_params__.frozen, dataclasses.fields(Child)[0] is dataclasses.fields(Base)[0],
              dataclasses.asdict(x), dataclasses.is_dataclass(x))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    before, after = done.stdout.splitlines()
    assert before == "[]"
    assert after == ("[('a', True, True), ('b', False, True), ('c', True, False)] True True "
                     "{'a': 1, 'b': (), 'c': [2]} True")


@pytest.mark.parametrize("annotation", ["ClassVar[int]", "typing.ClassVar[int]", " typing . ClassVar", "ClassVar",
                                        "Optional[ClassVar[int]]", "MyClassVar", "t.ClassVar[int]", "ClassVar.x",
                                        "int  # ClassVar", "   "])
def test_a_string_annotation_is_a_classvar_where_dataclasses_says_so(annotation):
    made = {}
    for make in (dataclasses.dataclass, record):
        cls = make(type("Strings", (), {"__annotations__": {"x": annotation, "y": "int"}, "x": 1, "y": 2,
                                        "__module__": __name__}))
        made[make] = [f.name for f in dataclasses.fields(cls)]
    assert made[record] == made[dataclasses.dataclass]
