"""Hyperscan databases for the scanner: built from the patterns' prefilter forms (prefilter.py),
cached on disk keyed by the patterns (and the version of the forms), loaded in well under a
millisecond; scratch spaces for the threads that scan with one; and a one-pass search for many
literals at once.

A database is only a prefilter: it proposes lines, and the scanner verifies each with the
pattern's own regex. So a prefilter form may match more than its pattern, never less.

The cache is the per-user one (usercache.Cache, under `$XDG_CACHE_HOME/troubleshoot/hyperscan/`).
Deserialising a database is native code reading bytes, so a file is used only when it and its
folder belong to this user and nobody else can write them; otherwise the database is compiled
in memory.
"""

from __future__ import annotations

import functools
import marshal
import os

from troubleshoot import usercache
from troubleshoot.records import record

try:  # wheels bundle the library on x86_64 Linux; everything works without it
    import hyperscan as _hs
except ImportError:  # pragma: no cover - exercised where the wheel is absent
    _hs = None


def available() -> bool:
    return _hs is not None


def _flags(single: bool) -> int:
    # MULTILINE: anchors hold at each line (see prefilter.prefilter_source). No DOTALL: '.' stays within
    # a line. SINGLEMATCH: a pattern that only needs to be seen once reports once per scan.
    return _hs.HS_FLAG_MULTILINE | (_hs.HS_FLAG_SINGLEMATCH if single else 0)


# Databases kept (0.7 MB each for the shipped rules): a rule set scanned from files and from
# pipes has two (see database(defer=...)), and rulecache keeps 8 rule sets.
KEEP = 16
# The cache's format: bump it whenever prefilter.py changes what it makes of a pattern (10: the
# database's ids in marshal, not JSON, a part of the entry of their own; 11: the database's
# bytes out of the entry's CRC, since hyperscan checks them as it loads them).
FORMS_VERSION = 11
CACHE = usercache.Cache("hyperscan", format=FORMS_VERSION, keep=KEEP, self_checked=1)


@record(frozen=True)
class Database:
    """A compiled database and how its reports map back to patterns. Patterns with the same
    prefilter form (and the same `single` flag) share one expression, whose id is the first
    of them: `shared[id]` lists them all. `rejected`: patterns hyperscan would not take."""

    db: object
    rejected: frozenset[int]
    shared: dict[int, tuple[int, ...]]
    deferred: frozenset[int] = frozenset()  # left out of `db`: see database(defer=...)


class Stack:
    """Databases scanned one after another as one: each was compiled with the ids of its
    patterns in the whole list, so their reports need no translating. A team's few patterns
    compile in milliseconds beside the shipped rules' database, which is reused as it is."""

    def __init__(self, parts: tuple):
        self.parts = parts

    def scan(self, data, match_event_handler, scratch=None) -> None:
        for db, own in zip(self.parts, scratch or (None,) * len(self.parts)):
            if own is None:
                db.scan(data, match_event_handler=match_event_handler)
            else:
                db.scan(data, match_event_handler=match_event_handler, scratch=own)


def _key(sources: list[str], single: frozenset[int], defer: tuple[tuple[int, ...], ...] = (), offset: int = 0) -> str:
    # Each pattern's length and which are `single` go in a head of their own, the patterns in one
    # join: a key of the shipped rules' 1,500 patterns in a fifth of a millisecond, not half of one
    # (the head keeps ["a\0b", "c"] apart from ["a", "b\0c"]). `offset`: a database of the
    # patterns after the first `offset` (see database(stable=...)).
    head = marshal.dumps((offset, defer, tuple(sorted(single)), tuple(map(len, sources))))
    return usercache.digest(head + "\0".join(sources).encode("utf-8", "surrogatepass"))


def _compile(forms: list[str], ids: list[int], single: frozenset[int]):
    db = _hs.Database(mode=_hs.HS_MODE_BLOCK)
    db.compile(expressions=[forms[i].encode("utf-8", "surrogatepass") for i in ids], ids=ids,
               flags=[_flags(i in single) for i in ids])
    return db



def _build(sources: tuple[str, ...], single: frozenset[int],
           defer: tuple[tuple[int, ...], ...] = (), offset: int = 0) -> Database | None:
    """`sources` are the patterns from index `offset` on: ids, `single` and `defer` are in the
    whole list's numbering."""
    from troubleshoot.scan import prefilter  # its rewriting runs on a cache miss only

    forms = {offset + k: prefilter.prefilter_source(s) for k, s in enumerate(sources)}
    deferred = frozenset(i for unit in defer if all(prefilter.weak(forms[i]) for i in unit) for i in unit)
    groups: dict[tuple[str, bool], list[int]] = {}
    for i, form in forms.items():
        if i in deferred:
            continue
        groups.setdefault((form, i in single), []).append(i)
    shared = {members[0]: tuple(members) for members in groups.values()}
    ids = sorted(shared)
    rejected: set[int] = set()
    try:
        db = _compile(forms, ids, single)
    except Exception:
        for i in ids:
            try:
                _compile(forms, [i], single)
            except Exception:
                rejected.add(i)
        kept = [i for i in ids if i not in rejected]
        if not kept:
            return None
        try:
            db = _compile(forms, kept, single)
        except Exception:
            return None
    rejected_all = frozenset(j for i in rejected for j in shared.pop(i))
    return Database(db, rejected_all, shared, deferred)


def _load(parts: list[bytes]) -> Database | None:
    """A database from its cache entry's two parts: the ids (marshal) and hyperscan's bytes."""
    try:
        meta, body = parts
        rejected, shared, deferred = marshal.loads(meta)
        if not (type(rejected) is type(deferred) is tuple and type(shared) is dict):
            return None
        db = _hs.loadb(body, _hs.HS_MODE_BLOCK)
        db.scratch = _hs.Scratch(db)  # a loaded database comes without one
        return Database(db, frozenset(rejected), shared, frozenset(deferred))
    except Exception:  # a damaged or foreign file: compile instead
        return None


def _stamp() -> tuple:
    """A database is read back only by the hyperscan version and machine that wrote it."""
    return (str(getattr(_hs, "__version__", "?")), os.uname().machine)


# Databases a scan looked for and went without (not cached, not worth compiling for its input):
# key -> what compiling it takes. `compile_later` builds them after the command, off its path.
_WANTED: dict[str, tuple[tuple[str, ...], frozenset[int], tuple[tuple[int, ...], ...]]] = {}


@functools.lru_cache(maxsize=8)
def _database_cached(key: str, sources: tuple[str, ...], single: frozenset[int], compile_if_missing: bool,
                     defer: tuple[tuple[int, ...], ...] = (), offset: int = 0):
    parts = CACHE.get_parts(key, _stamp())
    if parts is not None:
        found = _load(parts)
        if found is not None:
            return found
    if not compile_if_missing:
        _WANTED[key] = (sources, single, defer, offset)
        return None
    found = _build(sources, single, defer, offset)
    if found is not None:
        _save(key, found)
    return found


def _save(key: str, found: Database) -> None:
    try:
        # marshal, not JSON: a thousand shared ids read back in a tenth of the time
        meta = marshal.dumps((tuple(sorted(found.rejected)), {k: tuple(v) for k, v in found.shared.items()},
                              tuple(sorted(found.deferred))))
        body = _hs.dumpb(found.db)
    except Exception:
        return  # a database hyperscan cannot serialise only costs the next run a compile
    CACHE.put_parts(key, _stamp(), (meta, body))  # read back as two objects: the megabyte is not copied


# A missing database of at most this many patterns is compiled at once, whatever the input:
# ~1 ms a pattern, less than RE2 takes to build the program of all the patterns.
QUICK_COMPILE = 64


def database(sources: list[str], compile_if_missing: bool = True,
             single: frozenset[int] = frozenset(), defer: tuple[tuple[int, ...], ...] = (),
             stable: int = 0) -> Database | None:
    """The database for the patterns `sources` (as RE2 reads them), or None when there is none
    to be had cheaply (not cached and `compile_if_missing` false) or hyperscan takes none of
    the patterns. Patterns whose index is in `single` report only their first match in each
    scan. `defer`: units of patterns the caller can look for later, in a second pass, if it
    needs them; a unit whose forms are all `weak` is left out of the database (`deferred`).
    `stable`: the first patterns that other pattern lists begin with as well (the shipped
    rules', before a team's): they get a database of their own, the one those lists share, and
    the rest one beside it (Stack). The prefilter forms are worked out on a cache miss only."""
    if _hs is None or not sources:
        return None
    single = frozenset(single)
    defer = tuple(tuple(sorted(u)) for u in sorted(defer))
    if 0 < stable < len(sources):
        return _stacked(sources, compile_if_missing, single, defer, stable)
    return _part(sources, 0, len(sources), compile_if_missing, single, defer)


def _part(sources: list[str], start: int, stop: int, compile_if_missing: bool, single: frozenset[int],
          defer: tuple[tuple[int, ...], ...]) -> Database | None:
    """The database of sources[start:stop], keyed by those patterns alone (and `start`)."""
    inside = range(start, stop)
    own_single = frozenset(i for i in single if start <= i < stop)
    own_defer = tuple(u for u in defer if all(i in inside for i in u))  # a unit across parts: not deferred
    part = tuple(sources[start:stop])
    return _database_cached(_key(list(part), frozenset(i - start for i in own_single),
                                 tuple(tuple(i - start for i in u) for u in own_defer), start),
                            part, own_single, compile_if_missing, own_defer, start)


def _stacked(sources: list[str], compile_if_missing: bool, single: frozenset[int],
             defer: tuple[tuple[int, ...], ...], stable: int) -> Database | None:
    head = _part(sources, 0, stable, compile_if_missing, single, defer)
    quick = compile_if_missing or (head is not None and len(sources) - stable <= QUICK_COMPILE)
    tail = _part(sources, stable, len(sources), quick, single, defer)
    if head is None or tail is None:
        return None  # not cached (wanted for later), or hyperscan took none of a part's patterns
    return Database(Stack((head.db, tail.db)), head.rejected | tail.rejected, {**head.shared, **tail.shared},
                    head.deferred | tail.deferred)


def wanted() -> bool:
    """Whether a scan of this process went without a database it would have loaded had it been
    cached (see `compile_later`)."""
    return bool(_WANTED)


def compile_later() -> None:
    """Compile and cache the databases this process's scans went without, in a detached process
    at the lowest priority, so that the next command on a small log loads one in a millisecond
    instead of building RE2's programs (20-40 ms of its start). For a program's exit, where it
    may fork: one thread (the caller checks), Linux. The process outlives this one by the
    compile (0.5-1 s of CPU once per rule set) and writes only into the cache; one at a time per
    cache folder: it holds `.compiling` there locked (flock) from before this returns until it
    ends, so whoever takes that lock next finds the databases written. Any failure is silent:
    the next run compiles nothing or tries again."""
    wanted = list(_WANTED.items())
    _WANTED.clear()
    if not wanted or _hs is None:
        return
    try:
        pid = os.fork()
    except OSError:
        return
    if pid:
        try:
            os.waitpid(pid, 0)  # the first child leaves once the lock is held: no zombie left
        except ChildProcessError:
            pass
        return
    try:  # pragma: no cover - runs in the forked processes
        lock = _lock_compiling()
        if lock is not None and not os.fork():
            os.setsid()
            # Nothing of the command's stays held: a caller waiting for a pipe it passed to see
            # its end, or to unmount the folder it ran in, is not kept waiting by the compile.
            os.closerange(3, lock)
            os.closerange(lock + 1, os.sysconf("SC_OPEN_MAX"))
            os.chdir("/")
            _detached_compile(wanted)
    finally:  # pragma: no cover
        os._exit(0)


def _lock_compiling() -> int | None:  # pragma: no cover - runs in a forked process
    """`.compiling` in the cache folder opened and locked, the descriptor left open for the
    detached process (a lock lasts while any process holds the file open); None when another
    process holds it or the folder cannot be written."""
    import fcntl

    folder = usercache.cache_dir(CACHE.folder)
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        lock = os.open(folder / ".compiling", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return None
    return lock


def _detached_compile(wanted) -> None:  # pragma: no cover - runs in the detached process
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.nice(19)
    try:  # setsid made an autogroup of its own, which nice alone does not lower against others
        with open("/proc/self/autogroup", "w") as f:
            f.write("19")
    except OSError:
        pass
    for key, (sources, single, defer, offset) in wanted:
        if CACHE.get_parts(key, _stamp()) is None:
            found = _build(sources, single, defer, offset)
            if found is not None:
                _save(key, found)


def scratch(db):
    """Scratch space for one more thread scanning with `db` at the same time as others."""
    if isinstance(db, Stack):
        return tuple(_hs.Scratch(part) for part in db.parts)
    return _hs.Scratch(db)


# Literal sets whose database this process has: searching for them again costs one pass.
_LITERALS: dict[tuple[str, ...], Database | None] = {}


def literals_found(literals: tuple[str, ...], data) -> set[int] | None:
    """Indices of the `literals` that occur in the bytes `data`, found in one pass (a search per
    literal reads the data once each); None without hyperscan."""
    if _hs is None or not literals:
        return None
    if literals not in _LITERALS:
        # Every byte spelled \xHH: no character of a literal can be read as regex syntax.
        sources = ["".join(f"\\x{b:02x}" for b in lit.encode("utf-8", "surrogatepass")) for lit in literals]
        found = database(sources, single=frozenset(range(len(sources))))
        _LITERALS[literals] = None if found is None or found.rejected else found
    found = _LITERALS[literals]
    if found is None:
        return None
    seen: set[int] = set()
    shared = found.shared

    def on_match(index, _from, _to, _flags, _context):
        seen.update(shared.get(index, (index,)))

    found.db.scan(data, match_event_handler=on_match, scratch=scratch(found.db))
    return seen
