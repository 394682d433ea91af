"""The whole effective rule set kept across runs: building 300 rules from their cached YAML
(patterns checked, conditions parsed, Xid catalog joined) was a third of a cold start, for a
result that changes only when a rule file, a shipped table or this code does.

The key is everything the build reads: each pack's name and folder, the stamp (size, mtime,
inode) of every file the loader would read in it, the shipped tables, the source files of the
modules that build rules, and the interpreter. One cache file per set of packs and interpreter
(two venvs, or a team folder given or not, do not overwrite each other's).

The rule set is stored pickled, and read back with an unpickler that can make nothing but the
rule model's own classes (the dataclasses of the modules below and pathlib paths): no function
is ever called and no other class made, so a cache file, already trusted only when it is this
user's and private (usercache), still cannot run code.
"""

from __future__ import annotations

import hashlib
import io
import marshal
import os
import pickle
import sys
from pathlib import Path
from typing import Sequence

FORMAT = 1
KEEP = 8  # rule sets kept (sets of packs: with and without a team folder, per venv...)
# The modules whose classes a rule set is made of, and whose code decides how rules are built.
MODEL_MODULES = ("troubleshoot.model", "troubleshoot.errors", "troubleshoot.engine.conditions",
                 "troubleshoot.engine.values", "troubleshoot.engine.ruleset")
_PATHS = {("pathlib", "PosixPath"), ("pathlib", "PurePosixPath"), ("pathlib", "WindowsPath"),
          ("pathlib", "PureWindowsPath")}


def _stamp(path: Path) -> tuple | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino)


def code_stamps() -> list:
    """The source of every module that takes part in building rules (a changed loader, model or
    parser makes every cached rule set stale, even at the same version)."""
    engine = Path(__file__).resolve().parent
    files = sorted(engine.glob("*.py")) + [engine.parent / "model.py", engine.parent / "errors.py"]
    return [(f.name, _stamp(f)) for f in files]


def key(packs: Sequence, files_of, also: Sequence[Path] = ()) -> str:
    """What the build of `packs` reads: `files_of(pack)` lists the files the loader reads in
    one; `also`, files it reads whatever the packs (the shipped taxonomy)."""
    from troubleshoot import __version__

    re2 = sys.modules.get("re2")
    parts: list = [FORMAT, __version__, sys.version, sys.executable, getattr(re2, "__version__", re2 is not None),
                   code_stamps(), [(str(f), _stamp(f)) for f in also]]
    for pack in packs:
        path = Path(pack.path)
        parts.append((pack.name, str(path), path.is_dir(), [(str(f), _stamp(f)) for f in files_of(pack)]))
    return repr(parts)


def _cache_path(packs: Sequence) -> Path:
    from troubleshoot import usercache

    name = repr([sys.executable, [(p.name, str(p.path)) for p in packs]])
    return usercache.cache_dir("rulesets") / (hashlib.sha256(name.encode()).hexdigest()[:24] + ".cache")


class _ModelUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if (module, name) in _PATHS:
            return super().find_class(module, name)
        if module in MODEL_MODULES:
            import importlib

            obj = getattr(importlib.import_module(module), name, None)
            if isinstance(obj, type) and obj.__module__ == module:
                return obj
        raise pickle.UnpicklingError(f"not part of a rule set: {module}.{name}")


def load(packs: Sequence, stamp: str):
    """The cached rule set of these packs if it was built from exactly `stamp`, else None."""
    from troubleshoot import usercache

    blob = usercache.read(_cache_path(packs))
    if not blob:
        return None
    try:
        fmt, saved, data = marshal.loads(blob)
    except (ValueError, EOFError, TypeError):
        return None
    if fmt != FORMAT or saved != stamp or not isinstance(data, bytes):
        return None
    from troubleshoot.engine.ruleset import RuleSet

    try:
        found = _ModelUnpickler(io.BytesIO(data)).load()
    except Exception:  # pickle's errors vary; a damaged cache is a missing one
        return None
    return found if isinstance(found, RuleSet) else None


def save(packs: Sequence, stamp: str, ruleset) -> None:
    """Never raises: a rule set that cannot be kept only costs the next run its build."""
    from troubleshoot import usercache

    try:
        data = pickle.dumps(ruleset, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        return
    path = _cache_path(packs)
    usercache.write(path, marshal.dumps((FORMAT, stamp, data)))
    _prune(path.parent, keep=path)


def _prune(folder: Path, keep: Path) -> None:
    """At most KEEP rule sets (each 0.7 MB), the least recently written going first: a script
    that passes a new temporary rule folder each run must not fill the disk."""
    try:
        found = [(f.stat().st_mtime_ns, f) for f in folder.glob("*.cache") if f != keep]
    except OSError:
        return
    for _, f in sorted(found, reverse=True)[KEEP - 1:]:
        try:
            f.unlink()
        except OSError:
            pass
