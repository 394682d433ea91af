"""The whole effective rule set kept across runs: building 300 rules from their cached YAML
(patterns checked, conditions parsed, Xid catalog joined) was a third of a cold start, for a
result that changes only when a rule file, a shipped table or this code does.

The stamp is everything the build reads: each pack's name and folder, the stamp (size, mtime,
ctime, inode, device) of every file the loader would read in it, the shipped tables, the source
files of the modules that build rules and of RE2, and the interpreter. One cache entry per set
of packs and interpreter (two venvs, or a team folder given or not, do not overwrite each
other's), in the per-user cache (usercache.Cache).

The rule set is stored as marshal of plain tuples, like each file's YAML (documents), never as a
pickle: reading it back makes instances of the rule model's own dataclasses (`classes`, by
position) and sets only their declared fields, so a cache file, already trusted only when it is
this user's and private (usercache), can neither run code nor change a class.
"""

from __future__ import annotations

import dataclasses
import marshal
import sys
from pathlib import Path, PurePath
from typing import Sequence

from troubleshoot import usercache

FORMAT = 3
KEEP = 8  # rule sets kept (sets of packs: with and without a team folder, per venv...)
CACHE = usercache.Cache("rulesets", format=FORMAT, keep=KEEP)


def code_stamps() -> list:
    """The source of every module that takes part in building rules (a changed loader, model or
    parser makes every cached rule set stale, even at the same version)."""
    engine = Path(__file__).resolve().parent
    package = engine.parent
    files = sorted(engine.glob("*.py")) + [package / "model.py", package / "errors.py", package / "values.py"]
    from troubleshoot.scan import engines

    # `matches` regexes are checked by RE2 while rules build. Asked of the scan's RE2 setup, not
    # of sys.modules: whether a command had imported RE2 yet must not change the stamp (it did:
    # a command that had not kept overwriting the rule set of one that had, and both rebuilt it).
    re2 = engines.re2_module()
    for module in (re2, getattr(re2, "_re2", None)):
        if getattr(module, "__file__", None):
            files.append(Path(module.__file__))
    return list(usercache.file_stamps(files))


# What comes before the packs' own parts in a stamp (key): the interpreter, the code, the tables.
_HEAD = 4


def key(packs: Sequence, files_of, also: Sequence[Path] = ()) -> tuple:
    """The stamp of what the build of `packs` reads: `files_of(pack)` lists the files the loader
    reads in one; `also`, files it reads whatever the packs (the shipped tables)."""
    parts: list = [sys.version, sys.executable, code_stamps(), usercache.file_stamps(also)]
    for pack in packs:
        path = Path(pack.path)
        parts.append((pack.name, str(path), path.is_dir(), usercache.file_stamps(files_of(pack))))
    return tuple(parts)


def first_packs(stamp: tuple, n: int) -> tuple:
    """The stamp `key` gives the first `n` of the packs `stamp` was made for, without reading
    their files again."""
    return stamp[:_HEAD + n]


def _slot(packs: Sequence) -> tuple:
    """One entry per set of packs and interpreter."""
    return (sys.executable, tuple((p.name, str(p.path)) for p in packs))


def load(packs: Sequence, stamp: tuple, own: tuple[type, ...]):
    """The cached rule set of these packs if it was built from exactly `stamp`, else None.
    `own`: the rule set's class and its pack's (see `classes`)."""
    blob = CACHE.get(_slot(packs), stamp)
    if blob is None:
        return None
    try:
        found = _Decoder(classes(own)).decode(marshal.loads(blob))
    except (ValueError, EOFError, TypeError, IndexError, KeyError, RecursionError):  # a damaged cache is a missing one
        return None
    return found if isinstance(found, own[0]) else None


def save(packs: Sequence, stamp: tuple, ruleset, own: tuple[type, ...]) -> None:
    """Never raises: a rule set that cannot be kept only costs the next run its build."""
    try:
        data = marshal.dumps(_Encoder(classes(own)).encode(ruleset))
    except (TypeError, ValueError, RecursionError):  # something the codec does not know: not kept
        return
    CACHE.put(_slot(packs), stamp, data)  # each rule set is 0.7 MB: the folder keeps KEEP of them


# ------------------------------------------------------------------ the codec

def classes(own: tuple[type, ...]) -> tuple[type, ...]:
    """The dataclasses a rule set is made of: `own` (the rule set's and its pack's, given by the
    module that defines them), then the rule model's and the condition tree's. A cache names each
    by its position here."""
    from troubleshoot import model
    from troubleshoot.engine import condtree

    return (*own, model.Rule, model.Origin, model.LogPattern, model.Condition, model.ContextNote, model.FixRef,
            model.Examples, condtree.Lit, condtree.ListLit, condtree.Path, condtree.BinOp, condtree.Not,
            condtree.Neg, condtree.Call, condtree.Quant)


class _Codec:
    """The classes both directions know: the model's dataclasses by position, with their field
    names, and the few other values a rule set holds."""

    def __init__(self, classes: tuple[type, ...]):
        from troubleshoot.engine.condtree import NumLit
        from troubleshoot.errors import Problem
        from troubleshoot.values import Version

        self.classes = classes
        self.fields = [tuple(f.name for f in dataclasses.fields(c)) for c in self.classes]
        self.NumLit, self.Version, self.Problem = NumLit, Version, Problem


class _Encoder(_Codec):
    """Plain values as themselves; everything else a tuple whose first item says what it is."""

    def __init__(self, classes: tuple[type, ...]):
        super().__init__(classes)
        self.dataclass = {c: (i, self.fields[i]) for i, c in enumerate(self.classes)}

    def encode(self, obj):
        kind = type(obj)
        if kind is str or kind is int or kind is float or kind is bool or obj is None:
            return obj
        enc = self.encode
        known = self.dataclass.get(kind)
        if known is not None:
            return ("D", known[0], tuple([enc(getattr(obj, name)) for name in known[1]]))
        if kind is tuple:
            return ("T", tuple([enc(x) for x in obj]))
        if kind is list:
            return ("L", tuple([enc(x) for x in obj]))
        if kind is dict:
            return ("M", tuple([(enc(k), enc(v)) for k, v in obj.items()]))
        if kind is self.NumLit:
            return ("N", obj.text)
        if kind is self.Version:
            return ("V", tuple(obj.parts), obj.text)
        if kind is self.Problem:
            return ("E", obj.path, obj.line, obj.message, obj.level)
        if isinstance(obj, PurePath):
            return ("P", str(obj))
        raise TypeError(f"a rule set does not hold {kind.__name__}")


_PLAIN = frozenset({str, int, float, bool, type(None)})


class _Decoder(_Codec):
    # The cache holds ~20000 values: a plain one is taken as it is without a call per value
    # (decoding took 11 ms of every command's start, about what unmarshalling takes).
    def decode(self, v):
        if type(v) is not tuple:
            if type(v) in _PLAIN:
                return v
            raise TypeError("not a rule set")
        tag = v[0]
        dec = self.decode
        if tag == "T":
            return tuple([x if type(x) in _PLAIN else dec(x) for x in v[1]])
        if tag == "D":
            index, values = v[1], v[2]
            if type(index) is not int or index < 0:
                raise ValueError("not a rule set")
            cls, names = self.classes[index], self.fields[index]
            if len(values) != len(names):
                raise ValueError("not a rule set")
            obj = object.__new__(cls)
            # Into the instance's dict, as a frozen dataclass's own __init__ sets its fields
            # (none of the model's classes has __slots__).
            obj.__dict__.update(zip(names, [x if type(x) in _PLAIN else dec(x) for x in values]))
            return obj
        if tag == "L":
            return [x if type(x) in _PLAIN else dec(x) for x in v[1]]
        if tag == "M":
            return {dec(k): dec(x) for k, x in v[1]}
        return self._other(v)

    def _other(self, v):
        tag = v[0]
        if tag == "N" and type(v[1]) is str:
            return self.NumLit(v[1])
        if tag == "V" and all(type(p) is int for p in v[1]) and type(v[2]) is str:
            return self.Version(tuple(v[1]), v[2])
        if tag == "E":
            return self.Problem(str(v[1]), v[2] if type(v[2]) is int else None, str(v[3]), str(v[4]))
        if tag == "P" and type(v[1]) is str:
            return Path(v[1])
        raise ValueError("not a rule set")
