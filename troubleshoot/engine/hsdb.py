"""Hyperscan databases for the scanner: built from the patterns' prefilter forms, cached on
disk keyed by those forms, loaded in well under a millisecond.

A database is only a prefilter: it proposes lines, and the scanner verifies each with the
pattern's own regex. So a prefilter form may match more than its pattern, never less — that
is what lets anchors go (see `prefilter_source`).

The cache lives under `$XDG_CACHE_HOME/troubleshoot/hyperscan/`. Deserialising a database is
native code reading bytes, so a file is used only when it and its folder belong to this user
and nobody else can write them; otherwise the database is compiled in memory.
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

try:  # wheels bundle the library on x86_64 Linux; everything works without it
    import hyperscan as _hs
except ImportError:  # pragma: no cover - exercised where the wheel is absent
    _hs = None


def available() -> bool:
    return _hs is not None


# One UTF-8 encoded character of two to four bytes. Hyperscan scans bytes, while the
# verifier (RE2 or `re` on decoded text) reads '.', a negated class, \W, \S or \D as one
# character: the prefilter lets each of them also take a whole multi-byte character.
_MB = r"[\xc0-\xff][\x80-\xbf]{1,3}"


def prefilter_source(source: str) -> str:
    r"""The pattern as the hyperscan prefilter reads it: a superset of what it matches.

    - `^` and `$` outside character classes go: the scanner matches each `\r`-separated
      segment of a line on its own, so an anchor may sit in the middle of a raw line;
    - constructs that match one character (`.`, negated classes, `\W`, `\S`, `\D`, classes
      with non-ASCII members) also take one multi-byte UTF-8 character.
    Widening can only add candidate lines, and the verifier decides each, so the database may
    scan raw bytes as they are."""
    out: list[str] = []
    i, n = 0, len(source)
    while i < n:
        c = source[i]
        if c == "\\":
            esc = source[i : i + 2]
            out.append(f"(?:{esc}|{_MB})" if esc in ("\\W", "\\S", "\\D") else esc)
            i += 2
            continue
        if c == "[":
            j = _class_end(source, i)
            out.append(_widen_class(source[i:j]))
            i = j
            continue
        if c == ".":
            out.append(f"(?:.|{_MB})")
        elif c not in "^$":
            out.append(c)
        i += 1
    return "".join(out)


def _widen_class(cls: str) -> str:
    if not cls.isascii():
        return f"(?:[^\\n]|{_MB})"
    if cls.startswith("[^") or any(e in cls for e in ("\\W", "\\S", "\\D")):
        return f"(?:{cls}|{_MB})"
    return cls


def _class_end(source: str, i: int) -> int:
    """Index just after the character class that starts at source[i] == '['."""
    n = len(source)
    j = i + 1
    if j < n and source[j] == "^":
        j += 1
    if j < n and source[j] == "]":  # a leading ']' is a literal
        j += 1
    while j < n:
        c = source[j]
        if c == "\\":
            j += 2
            continue
        if c == "[" and j + 1 < n and source[j + 1] in ":.=":
            close = source.find(source[j + 1] + "]", j + 2)
            j = n if close < 0 else close + 2
            continue
        if c == "]":
            return j + 1
        j += 1
    return n


def _flags() -> int:
    # No MULTILINE: prefilter forms have no anchors. No DOTALL: '.' stays within a line.
    return 0


def _key(sources: list[str]) -> str:
    h = hashlib.sha256()
    h.update(f"hs {getattr(_hs, '__version__', '?')} {os.uname().machine}\n".encode())
    for s in sources:
        h.update(s.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()[:32]


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "troubleshoot" / "hyperscan"


def _trusted(path: Path) -> bool:
    """Owned by this user and writable by nobody else (the file and its folder)."""
    uid = os.getuid()
    try:
        for p in (path.parent, path):
            st = os.stat(p, follow_symlinks=False)
            if st.st_uid != uid or st.st_mode & 0o022:
                return False
    except OSError:
        return False
    return True


def _compile(sources: list[str], ids: list[int]):
    db = _hs.Database(mode=_hs.HS_MODE_BLOCK)
    db.compile(expressions=[sources[i].encode("utf-8", "surrogatepass") for i in ids], ids=ids,
               flags=[_flags()] * len(ids))
    return db


@functools.lru_cache(maxsize=8)
def _database_cached(key: str, sources: tuple[str, ...], compile_if_missing: bool):
    path = _cache_dir() / f"{key}.hsdb"
    if _trusted(path):
        try:
            blob = path.read_bytes()
            rejected = set()
            head, _, body = blob.partition(b"\n")
            if head.startswith(b"rejected:"):
                rejected = {int(x) for x in head[9:].split(b",") if x}
                db = _hs.loadb(body, _hs.HS_MODE_BLOCK)
                db.scratch = _hs.Scratch(db)  # a loaded database comes without one
                return db, rejected
        except Exception:  # a damaged or foreign file: compile instead
            pass
    if not compile_if_missing:
        return None
    ids = list(range(len(sources)))
    rejected: set[int] = set()
    try:
        db = _compile(list(sources), ids)
    except Exception:
        for i in ids:
            try:
                _compile(list(sources), [i])
            except Exception:
                rejected.add(i)
        kept = [i for i in ids if i not in rejected]
        if not kept:
            return None
        try:
            db = _compile(list(sources), kept)
        except Exception:
            return None
    _save(path, db, rejected)
    return db, rejected


def _save(path: Path, db, rejected: set[int]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not _trusted_dir(path.parent):
            return
        from troubleshoot.safeio import atomic_write

        head = b"rejected:" + ",".join(str(i) for i in sorted(rejected)).encode() + b"\n"
        atomic_write(path, head + _hs.dumpb(db))
        os.chmod(path, 0o600)
    except Exception:
        pass  # a read-only cache only costs the next run a compile


def _trusted_dir(d: Path) -> bool:
    try:
        st = os.stat(d, follow_symlinks=False)
    except OSError:
        return False
    return st.st_uid == os.getuid() and not st.st_mode & 0o022


def database(sources: list[str], compile_if_missing: bool = True):
    """(database, rejected pattern indices), or None when there is none to be had cheaply
    (not cached and `compile_if_missing` false) or hyperscan takes none of the patterns."""
    if _hs is None or not sources:
        return None
    return _database_cached(_key(sources), tuple(sources), compile_if_missing)
