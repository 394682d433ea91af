"""The whole effective rule set kept across runs: building 300 rules from their cached YAML
(patterns checked, conditions parsed, Xid catalog joined) was a third of a cold start, for a
result that changes only when a rule file, a shipped table or this code does.

The stamp is everything the build reads: each pack's name and folder, the stamp (size, mtime,
ctime, inode, device) of every file the loader would read in it, the shipped tables, the source
files of the modules that build rules and of RE2, and the interpreter. One cache entry per set
of packs and interpreter (two venvs, or a team folder given or not, do not overwrite each
other's), in the per-user cache (usercache.Cache).

The rule set is stored as a pickle, read back by an unpickler that resolves no name but the rule
model's own classes and the few value classes a rule set holds (`allowed`): a cache file,
already trusted only when it is this user's and private (usercache), can name no function, so it
can neither run code nor change a class; it can only make instances of those classes (their
`__init__`, or their fields set as a frozen dataclass's own `__init__` sets them). Pickle's C
reader makes the rule set's 5,000 instances in a quarter of the time that decoding marshalled
tuples in Python took. A rule's long texts (records.deferrable: explanation, fixes, examples...)
are a pickle of their own inside it, compressed, read when first used: a small diagnosis reads
them for the rules that fire. Compressed, they make the entry that every run reads, checks and
faults in page by page 0.65 MB instead of 1 MB.
"""

from __future__ import annotations

import functools
import io
import os
import sys
import zlib
from pathlib import Path, PosixPath, PurePosixPath
from typing import Sequence

try:  # the C pickler that pickle.py wraps: its own definitions cost every start 0.7 ms, unused here
    import _pickle as pickle
except ImportError:  # pragma: no cover - a Python built without it
    import pickle  # type: ignore[no-redef]

from troubleshoot import records, usercache

FORMAT = 5  # 3: marshalled tuples; 4: a pickle of the model's classes; 5: rule texts compressed
KEEP = 8  # rule sets kept (sets of packs: with and without a team folder, per venv...)
CACHE = usercache.Cache("rulesets", format=FORMAT, keep=KEEP)


def code_stamps() -> list:
    """The source of every module that takes part in building rules (a changed loader, model or
    parser makes every cached rule set stale, even at the same version)."""
    engine = os.path.dirname(os.path.realpath(__file__))
    package = os.path.dirname(engine)
    # listdir, not Path.glob: every start stamps the rule set with these (glob's regex costs more)
    files = [os.path.join(engine, n) for n in sorted(os.listdir(engine)) if n.endswith(".py")]
    files += [os.path.join(package, n) for n in ("model.py", "errors.py", "values.py")]
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
    `own`: the rule set's class and its pack's (see `allowed`)."""
    blob = CACHE.get(_slot(packs), stamp)
    if blob is None:
        return None
    found = _read(blob, own)
    return found if isinstance(found, own[0]) else None


def save(packs: Sequence, stamp: tuple, ruleset, own: tuple[type, ...]) -> None:
    """Never raises: a rule set that cannot be kept only costs the next run its build."""
    try:
        data = _write(ruleset)
    except (pickle.PicklingError, TypeError, ValueError, AttributeError, RecursionError):
        return
    # Read back once: a value of a class the reader does not resolve would make every later run
    # miss its cache and build again, silently. Not kept instead.
    if isinstance(_read(data, own), own[0]):
        CACHE.put(_slot(packs), stamp, data)  # each rule set is 0.65 MB: the folder keeps KEEP of them


# ------------------------------------------------------------------ the pickle

@functools.lru_cache(maxsize=None)
def allowed(own: tuple[type, ...] = ()) -> dict[tuple[str, str], object]:
    """Every name a cached rule set may hold, by (module, name): `own` (the rule set's and its
    pack's, given by the module that defines them), the rule model's and the condition tree's
    dataclasses, the values they hold, and `_restore` for a rule with its texts held back."""
    from troubleshoot import model
    from troubleshoot.engine import condtree
    from troubleshoot.errors import Problem
    from troubleshoot.values import Version

    kinds = (*own, model.Rule, model.Origin, model.LogPattern, model.Condition, model.ContextNote, model.FixRef,
             model.Examples, condtree.Lit, condtree.ListLit, condtree.Path, condtree.BinOp, condtree.Not,
             condtree.Neg, condtree.Call, condtree.Quant, condtree.NumLit, Problem, Version, PosixPath,
             PurePosixPath, _restore)
    return {(k.__module__, k.__qualname__): k for k in kinds}


class _Reader(pickle.Unpickler):
    def __init__(self, data: bytes, names: dict):
        super().__init__(io.BytesIO(data))
        self.names = names

    def find_class(self, module: str, name: str):
        found = self.names.get((module, name))
        if found is None:
            raise pickle.UnpicklingError(f"a rule set does not hold {module}.{name}")
        return found


def read_pickle(data: bytes, own: tuple[type, ...]):
    """What `data` holds when it is a pickle of the rule model's classes and `own` (see
    `allowed`), else None: for other cached values made of them (engine.catalogs)."""
    return _read(data, own)


def write_pickle(obj) -> bytes:
    """The pickle `read_pickle` reads back."""
    return _write(obj)


def _read(data: bytes, own: tuple[type, ...]):
    """What `data` holds, or None for anything that is not a pickle of allowed names."""
    try:
        return _Reader(data, allowed(own)).load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError, KeyError,
            RecursionError, MemoryError):  # a damaged cache is a missing one
        return None


class _Writer(pickle.Pickler):
    def reducer_override(self, obj):
        held = getattr(type(obj), "__deferrable__", None)
        if not held or isinstance(obj, type):
            return NotImplemented
        kept = {k: v for k, v in obj.__dict__.items() if k not in held and k != records.DEFERRED}
        load = obj.__dict__.get(records.DEFERRED)
        if isinstance(load, functools.partial) and load.func is _held_back:
            texts = load.args[1]  # a rule read from the cache, its texts still unread: kept as they are
        else:
            texts = zlib.compress(_write(tuple([getattr(obj, name) for name in held])), 6)
        return _restore, (type(obj), kept, texts)


def _write(obj) -> bytes:
    out = io.BytesIO()
    _Writer(out, protocol=-1).dump(obj)  # -1: the highest protocol
    return out.getvalue()


def _restore(kind: type, kept: dict, texts: bytes):
    """A rule (a records.deferrable class) with its fields `kept` in place and its long texts
    held back until first read."""
    held = getattr(kind, "__deferrable__", None)
    if not held or type(kept) is not dict or type(texts) is not bytes:
        raise pickle.UnpicklingError("not a rule set")
    obj = object.__new__(kind)
    obj.__dict__.update(kept)  # as a frozen dataclass's own __init__ sets its fields
    obj.__dict__[records.DEFERRED] = functools.partial(_held_back, kind, texts)
    return obj


def _held_back(kind: type, texts: bytes) -> dict:
    """The held-back fields of one rule, read at their first use. The texts were checked with
    the rest of the cache entry (usercache, and a read-back before it was kept): ones that do
    not read now were damaged since, which no caller can recover from, so this raises."""
    values = _Reader(zlib.decompress(texts), allowed()).load()
    if type(values) is not tuple or len(values) != len(kind.__deferrable__):
        raise pickle.UnpicklingError("damaged rule texts in the cache")
    return dict(zip(kind.__deferrable__, values))
