"""Rule files -> Rule objects, with every problem reported as `file:line: message`.

A problem in one rule skips that rule; a file that is not valid YAML is skipped whole; nothing
here raises for bad input. The linter is this same loader plus checks that need the whole set.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from troubleshoot.engine import conditions
from troubleshoot.scan.backtrack import superlinear
from troubleshoot.engine.lazy import lazy_module

# YAML is parsed only when a rule file changed (see load_rule_file): most runs never import it.
yamldoc = lazy_module("troubleshoot.engine.yamldoc")
from troubleshoot.scan import re2_available, re2_compatible
from troubleshoot.errors import Problem
from troubleshoot.model import (SEVERITIES, Condition, ContextNote, Examples, FixRef, LogPattern, Origin, Rule,
                                compile_ascii)

RULE_KEYS = {
    "id", "symptom", "title", "severity", "confidence", "downstream_of", "refines", "match",
    "context", "explain", "fixes", "references", "examples", "action", "catalog",
}
CATALOGS = ("xid",)
CONTEXT_KEYS = {"when", "confidence", "note"}
MATCH_KEYS = {"log", "with_log", "without_log", "where", "facts"}
FIX_KEYS = {"fixer", "title", "params"}
EXAMPLE_KEYS = {"match", "no_match"}
FILE_KEYS = {"rules", "disable"}
ID_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
MAX_RULE_FILE_BYTES = 8 << 20


def did_you_mean(key, known) -> str:
    """` (did you mean 'confidence'?)` for a misspelt key, else empty."""
    import difflib

    close = difflib.get_close_matches(str(key), sorted(known), n=1, cutoff=0.7)
    return f" (did you mean {close[0]!r}?)" if close else ""


@dataclass
class RuleFile:
    path: str
    rules: list[Rule] = field(default_factory=list)
    disable: list[tuple[str, int]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def load_taxonomy(path: Path) -> dict[str, str]:
    """Symptom ids and descriptions; a broken taxonomy is a hard error (nothing can be checked)."""
    from troubleshoot.errors import TroubleshootError

    cached = _taxonomy_cache(path)
    if cached is not None:
        return cached
    data = yamldoc.load_data_file(path, "symptom taxonomy")
    if not isinstance(data, dict) or not isinstance(data.get("symptoms"), dict):
        raise TroubleshootError(f"{path}: expected a mapping with a 'symptoms:' mapping")
    taxonomy = {str(k): str(v) for k, v in data["symptoms"].items()}
    _taxonomy_cache(path, taxonomy)
    return taxonomy


def load_team_symptoms(path: Path, known: dict[str, str]) -> tuple[dict[str, tuple[str, int]], list[Problem]]:
    """A team folder's `symptoms.yaml` (`symptoms: {id: description}`, like the shipped one):
    {id: (description, line)} of the new ids. Unlike the shipped taxonomy, a broken team file is
    a problem that skips it, and an id the taxonomy already has is a warning (it keeps its meaning)."""
    problems: list[Problem] = []
    try:
        data, _ = yamldoc.load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        return {}, [Problem(path, None, f"cannot read symptoms: {getattr(exc, 'strerror', None) or exc}")]
    except yamldoc.YamlError as exc:
        return {}, [Problem(path, exc.line, exc.message)]
    symptoms = data.get("symptoms") if isinstance(data, yamldoc.LDict) else None
    if not isinstance(symptoms, yamldoc.LDict):
        return {}, [Problem(path, getattr(data, "line", None) or 1,
                            "expected a mapping with a 'symptoms:' mapping of id: description")]
    for key in data:
        if key != "symptoms":
            problems.append(Problem(path, data.line_of(key), f"unknown top-level key {key!r}{did_you_mean(key, {'symptoms'})}"
                                                              " (expected: symptoms)"))
    out: dict[str, tuple[str, int]] = {}
    for sid, desc in symptoms.items():
        line = symptoms.line_of(sid)
        if not isinstance(sid, str) or not ID_RE.match(sid):
            problems.append(Problem(path, line, f"symptom id {sid!r} is not kebab-case (a-z, 0-9, '-')"))
        elif not isinstance(desc, str) or not desc.strip():
            problems.append(Problem(path, line, f"symptom {sid!r} needs a one-line description (a string)"))
        elif sid in known:
            problems.append(Problem(path, line, f"symptom {sid!r} is already defined; this definition is ignored",
                                    level="warning"))
        else:
            out[sid] = (desc.strip(), line)
    return out, problems


def _taxonomy_cache(path: Path, taxonomy: dict[str, str] | None = None) -> dict[str, str] | None:
    """The parsed taxonomy of an unchanged file (JSON keyed by path and file_stamp); with
    `taxonomy`, store it."""
    import json

    from troubleshoot import usercache

    try:
        stamp = [str(path.resolve()), *file_stamp(path)]
    except OSError:
        return None
    # Its own folder: the rules folder holds one cache file per rule file and nothing else.
    import hashlib

    # One file per taxonomy path: two installs on one machine (two venvs) must not keep
    # overwriting each other's entry.
    name = hashlib.sha256(stamp[0].encode("utf-8", "surrogatepass")).hexdigest()[:16]
    cache = usercache.cache_dir("taxonomy") / f"taxonomy-{name}.json"
    if taxonomy is not None:
        usercache.write(cache, json.dumps({"stamp": stamp, "symptoms": taxonomy}).encode())
        return taxonomy
    blob = usercache.read(cache)
    try:
        doc = json.loads(blob) if blob else None
    except ValueError:
        return None
    if isinstance(doc, dict) and doc.get("stamp") == stamp and isinstance(doc.get("symptoms"), dict):
        return {str(k): str(v) for k, v in doc["symptoms"].items()}
    return None


CACHE_FORMAT = 2


def file_stamp(path: Path) -> tuple[int, ...]:
    """What says a file is the one a cache entry was made from. Size and mtime alone miss a file
    rewritten at the same size with its mtime kept (`cp -p`, `rsync -t`, an editor that restores
    it): the change time moves on any write and cannot be set back, and a file renamed over the
    old one has another inode."""
    st = path.stat()
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


def _cache_file(path: Path, folder: str = "rules") -> Path:
    import hashlib

    from troubleshoot import usercache

    return usercache.cache_dir(folder) / (hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:32] + ".marshal")


def _read_cache(cache: Path, stamp: tuple):
    """The cached (kind, payload) of a rule file, or None. The cache holds marshal of plain
    tuples, never code, and is read only when trusted (see usercache): a shared cache or a HOME
    kept under sudo cannot feed us anything."""
    import marshal

    from troubleshoot import usercache

    blob = usercache.read(cache)
    try:
        cached = marshal.loads(blob) if blob else None
    except (ValueError, EOFError, TypeError):
        return None
    if isinstance(cached, tuple) and len(cached) == 4 and cached[0] == CACHE_FORMAT and cached[1] == stamp:
        return cached[2:]
    return None


def _write_cache(cache: Path, stamp: tuple, kind: str, payload) -> None:
    import marshal

    from troubleshoot import usercache

    try:
        usercache.write(cache, marshal.dumps((CACHE_FORMAT, stamp, kind, payload)))
    except ValueError:
        pass  # a value marshal cannot hold only costs speed


PARSED = 0  # YAML documents parsed in this process (not found in the cache)


def document(path: Path, folder: str = "rules") -> tuple[str, Any]:
    """("ok", (encoded data, traps)) or ("problems", [(line, message)]): the YAML of a rule
    file (or a shipped table, cached in another `folder`), from the cache when the file has
    not changed (files with problems are cached too)."""
    from troubleshoot import __version__

    try:
        size, *rest = file_stamp(path)
    except OSError as exc:
        return "problems", [(None, f"cannot read: {exc.strerror or exc}")]
    stamp = (__version__, str(path), size, *rest)
    cache = _cache_file(path, folder)
    cached = _read_cache(cache, stamp)
    if cached is not None:
        return cached
    global PARSED
    PARSED += 1
    kind, payload = _parse_document(path, size)
    _write_cache(cache, stamp, kind, payload)
    return kind, payload


def _parse_document(path: Path, size: int) -> tuple[str, Any]:
    if size > MAX_RULE_FILE_BYTES:
        return "problems", [(None, f"rule file larger than {MAX_RULE_FILE_BYTES >> 20} MiB; skipped")]
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        return "problems", [(None, f"not UTF-8 text ({exc.reason} at byte {exc.start})")]
    except OSError as exc:
        return "problems", [(None, f"cannot read: {exc.strerror or exc}")]
    try:
        data, traps = yamldoc.load(text)
    except yamldoc.YamlError as exc:
        return "problems", [(exc.line, exc.message)]
    except RecursionError:
        return "problems", [(None, "YAML nested too deeply")]
    return "ok", (yamldoc.encode(data), tuple((t.line, t.message) for t in traps))


def load_rule_file(path: Path, pack: str, taxonomy: dict[str, str]) -> RuleFile:
    """Rules of one file; the parsed YAML comes from a cache keyed by the file's stamp (parsing
    YAML is most of a cold start, and rule files rarely change)."""
    out = RuleFile(path=str(path))
    kind, payload = document(path)
    if kind != "ok":
        out.problems += [Problem(path, line, msg) for line, msg in payload]
        return out
    data = yamldoc.decode(payload[0])
    traps = [yamldoc.Trap(line, msg) for line, msg in payload[1]]
    return _load_rule_file(path, pack, taxonomy, out, data, traps)


def load_rule_text(text: str, path: Path, pack: str, taxonomy: dict[str, str]) -> RuleFile:
    """Rules of a file's text not yet written (no cache): `rules new` checks what it will write."""
    out = RuleFile(path=str(path))
    try:
        data, traps = yamldoc.load(text)
    except yamldoc.YamlError as exc:
        out.problems.append(Problem(path, exc.line, exc.message))
        return out
    return _load_rule_file(path, pack, taxonomy, out, data, traps)


def _load_rule_file(path: Path, pack: str, taxonomy: dict[str, str], out: RuleFile, data, traps) -> RuleFile:
    trap_lines = {t.line for t in traps}
    out.problems += [Problem(path, t.line, t.message) for t in traps]

    if data is None:
        return out
    items: Any
    if isinstance(data, yamldoc.LDict):
        for key in data:
            if key not in FILE_KEYS:
                out.problems.append(Problem(path, data.line_of(key), f"unknown top-level key {key!r}"
                                                                   f"{did_you_mean(key, FILE_KEYS)} (expected: rules, disable)"))
        items = data.get("rules", yamldoc.LList())
        disable = data.get("disable")
        if disable is not None:
            if not isinstance(disable, list) or not all(isinstance(d, str) for d in disable):
                out.problems.append(Problem(path, data.line_of("disable"), "'disable' must be a list of rule ids"))
            else:
                out.disable = [(d, disable.line_of(i)) for i, d in enumerate(disable)]
    else:
        items = data
    if not isinstance(items, yamldoc.LList):
        out.problems.append(Problem(path, getattr(items, "line", 1), "expected a list of rules (or a mapping with a 'rules:' list)"))
        return out

    for i, item in enumerate(items):
        start = items.line_of(i)
        end = items.line_of(i + 1) if i + 1 < len(items) else 10**9
        problems: list[Problem] = []
        rule = _build_rule(item, Path(path), start, pack, taxonomy, problems)
        out.problems += problems
        if rule is not None and not problems and not any(start <= ln < end for ln in trap_lines):
            out.rules.append(rule)
    return out


def _build_rule(item: Any, path: Path, line: int, pack: str, taxonomy: dict[str, str],
                problems: list[Problem]) -> Rule | None:
    def problem(ln: int, msg: str) -> None:
        problems.append(Problem(path, ln, msg))

    if not isinstance(item, yamldoc.LDict):
        problem(line, "a rule must be a mapping")
        return None
    rid = item.get("id")
    label = f"rule {rid!r}: " if isinstance(rid, str) else ""
    for key in item:
        if key not in RULE_KEYS:
            problem(item.line_of(key), f"{label}unknown key {key!r}{did_you_mean(key, RULE_KEYS)}")
    before = len(problems)
    for key in ("id", "symptom", "title", "severity", "explain"):
        if key not in item:
            problem(item.line, f"{label}missing required key {key!r}")
        elif not isinstance(item[key], str) or not item[key].strip():
            problem(item.line_of(key), f"{label}{key!r} must be a non-empty string")
    if len(problems) > before:
        return None
    if not ID_RE.match(rid):
        problem(item.line_of("id"), f"rule id {rid!r} is not kebab-case (a-z, 0-9, '-')")
    if item["symptom"] not in taxonomy:
        problem(item.line_of("symptom"), f"{label}unknown symptom {item['symptom']!r}{did_you_mean(item['symptom'], taxonomy)} "
                                             f"(`troubleshoot rules symptoms` lists them; a team adds its own in "
                                             f"a symptoms.yaml in its rule folder)")
    if item["severity"] not in SEVERITIES:
        problem(item.line_of("severity"), f"{label}severity must be one of {', '.join(SEVERITIES)}")

    confidence = item.get("confidence", 0.7)
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 <= confidence <= 1:
        problem(item.line_of("confidence"), f"{label}confidence must be a number from 0 to 1")
        confidence = 0.7

    downstream = _str_list(item, "downstream_of", label, problem)
    for s in downstream:
        if s not in taxonomy:
            problem(item.line_of("downstream_of"), f"{label}downstream_of names unknown symptom {s!r}"
                                                   f"{did_you_mean(s, taxonomy)} (see `troubleshoot rules symptoms`)")
    refines = _str_list(item, "refines", label, problem)
    references = _str_list(item, "references", label, problem)
    for ref in references:
        if not re.match(r"^https?://\S+$", ref):
            problem(item.line_of("references"), f"{label}reference {ref!r} is not an http(s) URL")

    match = item.get("match", yamldoc.LDict())
    logs: dict[str, tuple[LogPattern, ...]] = {"log": (), "with_log": (), "without_log": ()}
    facts: tuple[Condition, ...] = ()
    where: tuple[Condition, ...] = ()
    if not isinstance(match, yamldoc.LDict):
        problem(item.line_of("match"), f"{label}'match' must be a mapping")
    else:
        for key in match:
            if key not in MATCH_KEYS:
                problem(match.line_of(key), f"{label}unknown key 'match.{key}'{did_you_mean(key, MATCH_KEYS)} "
                                            f"(expected: {', '.join(sorted(MATCH_KEYS))})")
        for key in logs:
            logs[key] = tuple(_patterns(match, key, label, problem))
        facts = tuple(_conditions(match, "facts", label, problem))
        where = tuple(_conditions(match, "where", label, problem))
        if where and not logs["log"]:
            problem(match.line_of("where"), f"{label}'match.where' filters match.log lines; the rule has no match.log")
        for c in where:
            outside = [p for p in conditions.paths(c.tree) if not p.startswith("log.")]
            if outside:
                problem(c.line, f"{label}'match.where' sees only the line's captures (log.NAME), not {outside[0]}")
        if "log" not in match and "facts" not in match:
            problem(match.line if match else item.line, f"{label}needs 'match.log' or 'match.facts'")

    action, catalog = _action_and_catalog(item, logs["log"], label, problem)
    context = tuple(_context(item, label, problem))
    fixes = tuple(_fixes(item, label, problem))
    examples = _examples(item, label, problem, needs=bool(logs["log"]))

    if problems:
        return None
    return Rule(
        id=rid,
        symptom=item["symptom"],
        title=item["title"].strip(),
        severity=item["severity"],
        explain=item["explain"].strip(),
        origin=Origin(str(path), line, pack),
        confidence=float(confidence),
        downstream_of=tuple(downstream),
        refines=tuple(refines),
        log=logs["log"],
        with_log=logs["with_log"],
        without_log=logs["without_log"],
        where=where,
        facts=facts,
        context=context,
        fixes=fixes,
        references=tuple(references),
        examples=examples,
        action=action,
        catalog=catalog,
    )


def _action_and_catalog(item, log_patterns, label: str, problem) -> tuple[str | None, str | None]:
    """`action:` must be in the Xid catalog's action vocabulary; `catalog: xid` needs a log
    pattern that captures `xid` (the code each line is looked up by)."""
    action, catalog = item.get("action"), item.get("catalog")
    if action is not None:
        from troubleshoot.engine.xid import actions

        if not isinstance(action, str) or action not in actions():
            problem(item.line_of("action"), f"{label}action must be one of {', '.join(actions())}")
            action = None
    if catalog is not None:
        if catalog not in CATALOGS:
            problem(item.line_of("catalog"), f"{label}catalog must be one of {', '.join(CATALOGS)}")
            catalog = None
        elif not any("xid" in p.groups for p in log_patterns):
            problem(item.line_of("catalog"), f"{label}'catalog: xid' needs a match.log pattern capturing (?P<xid>...)")
            catalog = None
    return action, catalog


def _str_list(item, key: str, label: str, problem) -> list[str]:
    value = item.get(key)
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        problem(item.line_of(key), f"{label}{key!r} must be a list of strings")
        return []
    return list(value)


class _CheckedPatterns:
    """Patterns already known to pass check_pattern, kept across runs: compiling every pattern
    of every rule to check it was a sixth of a cold start, for patterns that rarely change. The
    file is keyed by what decides the answer (the engines and their versions)."""

    # Part of the key: bump it whenever check_pattern's verdicts change.
    CHECKS = 2

    def __init__(self):
        self.known: set[str] | None = None
        self.runs: bool | None = None  # whether RE2 was there when `known` was read (it can go away)
        self.added = False

    def _path(self):
        import hashlib
        import sys

        from troubleshoot import __version__, usercache

        re2 = sys.modules.get("re2")
        key = (f"{__version__} {sys.version} re2={getattr(re2, '__version__', re2 is not None)} "
               f"runs={re2_available()} checks={self.CHECKS}")
        return usercache.cache_dir("patterns") / (hashlib.sha256(key.encode()).hexdigest()[:32] + ".marshal")

    def load(self) -> set[str]:
        if self.runs != re2_available():
            self.known, self.runs = None, re2_available()
        if self.known is None:
            import marshal

            from troubleshoot import usercache

            blob = usercache.read(self._path())
            try:
                found = marshal.loads(blob) if blob else None
            except (ValueError, EOFError, TypeError):
                found = None
            self.known = set(found) if isinstance(found, frozenset) and all(isinstance(x, str) for x in found) else set()
        return self.known

    def add(self, source: str) -> None:
        self.load().add(source)
        self.added = True

    def save(self) -> None:
        if not self.added:
            return
        import marshal

        from troubleshoot import usercache

        self.added = False
        usercache.write(self._path(), marshal.dumps(frozenset(self.known or ())))


CHECKED = _CheckedPatterns()


def check_pattern(source: str) -> str | None:
    """None if the pattern is usable, else why. RE2 (fast, and the engine that runs it) checks
    it when installed; Python's `re` otherwise. `rules lint` checks both."""
    if source in CHECKED.load():
        return None
    complaint = _check_pattern(source)
    if complaint is None:
        CHECKED.add(source)
    return complaint


def _check_pattern(source: str) -> str | None:
    complaint = _readable(re2_compatible(source))
    if complaint or not re2_available():
        try:
            regex = compile_ascii(source)
        except re.error as exc:
            return f"regex does not compile: {exc}"
        # Where Python's re runs the pattern (no RE2), a shape it takes exponential time on would
        # hang the scan; a backreference, which RE2 refuses, is named for what it costs.
        why = superlinear(regex)
        if why:
            return f"regex has {why}"
    if complaint:
        return f"regex is outside the RE2 subset (no backreferences or lookaround): {complaint}"
    return None


def _readable(complaint: str | None) -> str | None:
    """RE2's complaint as text: its error carries bytes, whose str() is a repr (b'...')."""
    if complaint and complaint[:2] in ("b'", 'b"'):
        import ast

        try:
            return ast.literal_eval(complaint).decode("utf-8", "replace")
        except (ValueError, SyntaxError, AttributeError):
            return complaint
    return complaint


def _patterns(match, key: str, label: str, problem):
    value = match.get(key)
    if value is None:
        return
    if isinstance(value, str):
        value = yamldoc.LList([value])
        value.line, value.item_lines = match.line_of(key), [match.line_of(key)]
    if not isinstance(value, list):
        problem(match.line_of(key), f"{label}'match.{key}' must be a list of regexes")
        return
    for i, src in enumerate(value):
        ln = value.line_of(i)
        if not isinstance(src, str) or not src:
            problem(ln, f"{label}'match.{key}' entries must be non-empty strings")
            continue
        complaint = check_pattern(src)
        if complaint:
            problem(ln, f"{label}{complaint}")
            continue
        yield LogPattern(source=src, line=ln)


def _conditions(match, key: str, label: str, problem):
    value = match.get(key)
    if value is None:
        return
    if isinstance(value, str):
        value = yamldoc.LList([value])
        value.line, value.item_lines = match.line_of(key), [match.line_of(key)]
    if not isinstance(value, list):
        problem(match.line_of(key), f"{label}'match.{key}' must be a list of conditions")
        return
    for i, src in enumerate(value):
        ln = value.line_of(i)
        if not isinstance(src, str) or not src.strip():
            problem(ln, f"{label}conditions must be non-empty strings (quote them in YAML)")
            continue
        cond = _condition(src, ln, label, problem)
        if cond is not None:
            yield cond


def _condition(src: str, line: int, label: str, problem) -> Condition | None:
    try:
        return Condition(source=src, tree=conditions.parse(src), line=line)
    except conditions.ConditionError as exc:
        problem(line, f"{label}condition {src!r}: {exc}")
        return None


def _mappings(item, key: str, allowed: set, label: str, problem, shape: str):
    """(line, entry) for each mapping of the list under `key`; unknown keys reported."""
    value = item.get(key)
    if value is None:
        return
    if not isinstance(value, list):
        problem(item.line_of(key), f"{label}'{key}' must be a list of {shape}")
        return
    for i, entry in enumerate(value):
        ln = value.line_of(i)
        if not isinstance(entry, yamldoc.LDict):
            problem(ln, f"{label}each entry of '{key}' must be a mapping: {shape}")
            continue
        for k in entry:
            if k not in allowed:
                problem(entry.line_of(k), f"{label}unknown {key} key {k!r}{did_you_mean(k, allowed)}")
        yield ln, entry


def _context(item, label: str, problem):
    for ln, entry in _mappings(item, "context", CONTEXT_KEYS, label, problem, "{when, confidence, note}"):
        when, note, delta = entry.get("when"), entry.get("note", ""), entry.get("confidence", 0)
        if not isinstance(when, str) or not when.strip():
            problem(entry.line_of("when"), f"{label}context needs a 'when' condition")
            continue
        if not isinstance(note, str):
            problem(entry.line_of("note"), f"{label}context note must be a string")
            continue
        if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not -1 <= delta <= 1:
            problem(entry.line_of("confidence"), f"{label}context confidence must be a number from -1 to 1 (a change)")
            continue
        cond = _condition(when, entry.line_of("when"), label, problem)
        if cond is not None:
            yield ContextNote(when=cond, confidence=float(delta), note=note, line=ln)


def _fixes(item, label: str, problem):
    for ln, fix in _mappings(item, "fixes", FIX_KEYS, label, problem, "{fixer, title, params}"):
        fixer = fix.get("fixer")
        if not isinstance(fixer, str) or not ID_RE.match(fixer):
            problem(fix.line_of("fixer"), f"{label}fix needs a kebab-case 'fixer' id")
            continue
        title = fix.get("title", "")
        if not isinstance(title, str):
            problem(fix.line_of("title"), f"{label}fix title must be a string")
            continue
        params = fix.get("params", {}) or {}
        if not isinstance(params, dict):
            problem(fix.line_of("params"), f"{label}fix params must be a mapping")
            continue
        yield FixRef(fixer=fixer, title=title, params=_plain(params), line=ln)


def _plain(value):
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _examples(item, label: str, problem, needs: bool) -> Examples:
    value = item.get("examples")
    if value is None:
        if needs:
            problem(item.line, f"{label}a log rule needs 'examples' with 'match' and 'no_match'")
        return Examples()
    if not isinstance(value, yamldoc.LDict):
        problem(item.line_of("examples"), f"{label}'examples' must be a mapping with 'match' and 'no_match'")
        return Examples()
    for key in value:
        if key not in EXAMPLE_KEYS:
            problem(value.line_of(key), f"{label}unknown key 'examples.{key}'{did_you_mean(key, EXAMPLE_KEYS)}")
    lists: dict[str, tuple[tuple[str, ...], tuple[int, ...]]] = {}
    for key in ("match", "no_match"):
        v = value.get(key)
        if v is None:
            if needs:
                problem(value.line, f"{label}'examples.{key}' needs at least one log excerpt")
            lists[key] = ((), ())
            continue
        if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
            problem(value.line_of(key), f"{label}'examples.{key}' must be a list of strings")
            lists[key] = ((), ())
            continue
        if needs and not v:
            problem(value.line_of(key), f"{label}'examples.{key}' needs at least one log excerpt")
        lists[key] = (tuple(v), tuple(v.line_of(i) for i in range(len(v))))
    return Examples(match=lists["match"][0], no_match=lists["no_match"][0],
                    match_lines=lists["match"][1], no_match_lines=lists["no_match"][1])
