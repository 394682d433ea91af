"""Message catalogs generated from the emitters' own source (rules/catalogs/NAME.json).

Each file lists every status code or message one emitter can print (CUDA's cudaError_t, NCCL's
ncclResult_t and WARN texts, the driver's NV_STATUS codes and NVRM messages, the container
toolkit's errors, ...), with the emitter's own words and, decided by people in
tools/catalogs/maps/, the symptom, severity and first action each means. `python -m
tools.catalogs` writes them from a source tree; nothing here is typed by hand.

A rule refers to a catalog (`catalog: NAME`) and captures `(?P<entry>...)`: the captured text is
looked up here (by key, by code, by the printed message) and each entry found becomes its own
diagnosis. A pattern may hold `{catalog:NAME}`: the loader makes one pattern of it for every
printed form of the catalog's entries that mean something (see `expand`).
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

from troubleshoot import usercache
from troubleshoot.engine import rulecache
from troubleshoot.engine.shipped import shipped_rules_dir
from troubleshoot.errors import TroubleshootError
from troubleshoot.lazyre import lazy
from troubleshoot.records import record

FOLDER = "catalogs"
# What a catalog rule's title, explain, notes and fix params may name besides its captures.
ENTRY_WORDS = ("entry_key", "entry_code", "entry_message", "entry_doc", "entry_reason",
               "catalog_name", "catalog_version", "catalog_url", "action", "action_text")
# Lookups kept per catalog: a rule's trace and its diagnoses look up the same captured texts.
LOOKUPS_KEPT = 4096
EXPANSION = lazy(r"\{catalog:([a-z0-9-]+)\}")
_INT = lazy(r"^(?:0[xX][0-9a-fA-F]+|-?\d+)$")


@record(frozen=True)
class CatalogEntry:
    key: str
    code: int | None
    message: str | None
    pattern: str | None
    doc: str | None
    symptom: str | None  # None: the entry is not a problem (success, information)
    severity: str
    action: str | None
    reason: str | None

    def words(self, catalog: MessageCatalog) -> dict[str, str]:
        """The ENTRY_WORDS a rule's text may name, those the entry has."""
        found = {"entry_key": self.key, "entry_code": None if self.code is None else str(self.code),
                 "entry_message": self.message, "entry_doc": self.doc, "entry_reason": self.reason,
                 "catalog_name": catalog.name, "catalog_version": catalog.version, "catalog_url": catalog.url}
        if self.action:
            from troubleshoot.engine.xid import load_catalog

            found["action"] = self.action
            found["action_text"] = load_catalog().action_text(self.action) or self.action
        return {k: v for k, v in found.items() if v}


@record(frozen=True)
class MessageCatalog:
    id: str
    name: str
    version: str
    url: str
    source: str
    entries: tuple[CatalogEntry, ...]

    @functools.cached_property
    def _by_key(self) -> dict[str, CatalogEntry]:
        return {e.key: e for e in self.entries}

    @functools.cached_property
    def _by_code(self) -> dict[int, CatalogEntry]:
        out: dict[int, CatalogEntry] = {}
        for e in self.entries:
            if e.code is not None:
                out.setdefault(e.code, e)
        return out

    @functools.cached_property
    def _by_text(self) -> dict[str, CatalogEntry]:
        """Printed messages, and the heads older releases printed of them (NCCL's "unhandled
        cuda error" before " (run with NCCL_DEBUG=INFO for details)" came in); a whole message
        before a head, and where two codes print one text (CUDA's 200 and 300), the one that
        means something."""
        out: dict[str, CatalogEntry] = {}
        printed = sorted((e for e in self.entries if e.message), key=lambda e: e.symptom is not None)
        for e in printed:
            out[message_head(e.message).casefold()] = e
        for e in printed:
            out[e.message.casefold()] = e
        return out

    @functools.cached_property
    def _by_loose_key(self) -> dict[str, CatalogEntry]:
        # pynvml's NVMLError_GpuIsLost is NVML_ERROR_GPU_IS_LOST: the key without case or marks
        return {_loose(e.key): e for e in self.entries}

    @functools.cached_property
    def _looked_up(self) -> dict[str, CatalogEntry | None]:
        return {}

    @functools.cached_property
    def _patterns(self) -> list[tuple[str, str, int, CatalogEntry]]:
        """(form, the literal text every match starts with, its _literal_len, entry). Compiled
        only where a text starts as the form does (`_compiled`): a catalog holds hundreds of
        formats, and compiling them all was a third of a small diagnosis."""
        return [(form, leading_literal(form), _literal_len(form), e) for e in self.entries if e.pattern
                for form in dict.fromkeys((e.pattern, pattern_head(e.pattern)))]

    @functools.cached_property
    def _compiled(self) -> dict[str, re.Pattern]:
        return {}

    def _by_pattern(self, raw: str, text: str) -> CatalogEntry | None:
        # The forms a text can match, the one with the most literal text first: where several
        # formats print the same text, it says most (a stable sort: ties keep the catalog's order).
        forms = sorted(((form, size, e) for form, lead, size, e in self._patterns
                        if raw.startswith(lead) or text.startswith(lead)), key=lambda fse: -fse[1])
        compiled = self._compiled
        for form, _, e in forms:
            rx = compiled.get(form)
            if rx is None:
                rx = compiled[form] = re.compile(form, re.DOTALL)
            if rx.fullmatch(raw) or rx.fullmatch(text):
                return e
        return None

    def entry(self, key: str) -> CatalogEntry | None:
        return self._by_key.get(key)

    def lookup(self, text: str) -> CatalogEntry | None:
        """The entry `text` (a captured key, code or printed message) names, or None."""
        kept = self._looked_up
        if text not in kept:
            if len(kept) >= LOOKUPS_KEPT:
                kept.clear()
            kept[text] = self._lookup(text)
        return kept[text]

    def _lookup(self, text: str) -> CatalogEntry | None:
        raw, text = text, text.strip()
        if not text:
            return None
        found = self._by_key.get(text)
        if found is None and (text[0] == "-" or text[0].isdigit()) and _INT.match(text):
            found = self._by_code.get(int(text, 0))
        if found is None:
            found = self._by_text.get(text.casefold())
        if found is None:
            found = self._by_loose_key.get(_loose(text))
        if found is None:
            # unstripped: a format's text may end in a blank before what it prints next
            found = self._by_pattern(raw, text)
        return found

    def printed_forms(self) -> list[str]:
        """What the entries that mean something print, one regular expression each: their
        messages escaped, their formats' patterns, each as far as older releases printed it
        too (`message_head`, `pattern_head`)."""
        # Only the heads: a line holding the whole text holds its head, and the entry is looked
        # up by either; every form more is a pattern more for each scan to build.
        forms: dict[str, bool] = {}
        for e in self.entries:
            if e.symptom and (e.message or e.pattern):
                form = re.escape(message_head(e.message)) if e.message else pattern_head(e.pattern)
                forms[form] = forms.get(form, False) or bool(e.action)
        # A line is one entry's (the first form that matches it): a form whose entry names a
        # first step is tried first ("missing library ..." inside "detection error: ..."),
        # then the longer, more specific forms.
        return sorted(forms, key=lambda f: (not forms[f], -len(f), f)) or ["(?!)"]


def message_head(message: str) -> str:
    """A message without the advice or detail an emitter appends after " (" or " - ", where
    what is left is still long enough to name one entry."""
    head = re.split(r" \(| - ", message, maxsplit=1)[0].rstrip(" .")
    return head if len(head) >= 12 else message


def pattern_head(pattern: str) -> str:
    """A format's pattern up to the detail it appends after ", ", ": " or " (" (an errno, a
    status, the wrapped error), where what comes before is literal enough to name one entry:
    releases add such details, and a line from an older one lacks them. Else the pattern
    without the wildcards it ends in."""
    for m in re.finditer(r",\\? |\\? \\\(|:\\? ", pattern):
        head = pattern[: m.start()]
        if _literal_len(head) >= 20:
            return head
    # a wildcard at the end adds nothing to a search: the line may go on anyway
    return re.sub(r"(?:\\? |:)*(?:\.\*\?)+$", "", pattern) or pattern


_META = frozenset("\\.^$*+?{}[]()|")
_QUANTIFIERS = frozenset("*+?{")


# One literal character of a pattern: a plain one, or a punctuation mark escaped (a backslash
# before a letter or digit is a class or a reference, not literal text).
_LITERALS = lazy(r"(?:[^\\.^$*+?{}\[\]()|]|\\(?:_|[^\w]))*")
_UNIT = lazy(r"\\.|.", re.DOTALL)


def leading_literal(pattern: str) -> str:
    """The text every full match of `pattern` starts with: its leading characters up to the
    first that is not plain (an escaped punctuation mark counts as itself), less the last one
    when a quantifier follows it; nothing for a pattern with an alternation anywhere (a `|`
    outside a class could apply to the whole) or one that starts with a group or flags."""
    if _alternates(pattern):
        return ""
    m = _LITERALS.match(pattern)
    units = _UNIT.findall(m.group())
    if units and m.end() < len(pattern) and pattern[m.end()] in _QUANTIFIERS:
        units.pop()
    return "".join([u[-1] for u in units])


def _alternates(pattern: str) -> bool:
    """Whether `pattern` has a `|` outside its character classes."""
    if "|" not in pattern:
        return False  # most formats: the class scanner's module is not even imported
    from troubleshoot.scan.prefilter import class_end

    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            i += 2
        elif c == "[":
            i = class_end(pattern, i)
        elif c == "|":
            return True
        else:
            i += 1
    return False


def _loose(text: str) -> str:
    """The text casefolded, with only ASCII letters and digits left."""
    return "".join([c for c in text.casefold() if c in _ASCII_ALNUM])


_ASCII_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")


def _literal_len(pattern: str) -> int:
    """About how much fixed text a pattern holds: its letters outside character classes and
    class escapes (\\d, \\w ...), which say nothing about one message."""
    plain = re.sub(r"\[(?:\\.|[^\]\\])*\]|\\[dDwWsSbB]|\(\?[:P<>=!a-z]*", "", pattern)
    return sum(c.isalpha() for c in plain)


def rule_words(catalog: str | None) -> frozenset[str]:
    """What a rule with `catalog: NAME` may name in its texts besides its captures: the Xid
    catalog's words (engine.xid.CATALOG_WORDS and the code) or a message catalog's (ENTRY_WORDS)."""
    if catalog is None:
        return frozenset()
    if catalog == "xid":
        from troubleshoot.engine.xid import CATALOG_WORDS

        return frozenset((*CATALOG_WORDS, "xid"))
    return frozenset(ENTRY_WORDS)


def folder() -> Path:
    return shipped_rules_dir() / FOLDER


def files() -> list[Path]:
    """The shipped catalog files: what a rule set's build reads besides the rule files."""
    where = folder()
    try:  # listdir, not Path.glob: every start stamps the rule set with these (glob's regex costs more)
        return sorted(where / n for n in os.listdir(where) if n.endswith(".json"))
    except OSError:
        return []


@functools.cache
def names() -> tuple[str, ...]:
    return tuple(p.stem for p in files())


# A catalog read from its file with its lookup tables made (`_prepared`), kept across runs: the
# JSON and the patterns' literal heads were a tenth of a small diagnosis that names one entry.
_CACHE = usercache.Cache("catalogs", format=2)  # 2: each form with its literal length


@functools.cache
def load(name: str) -> MessageCatalog:
    """The catalog NAME, read and checked once per process, and once across runs while neither
    its file nor the code that reads it changes."""
    path = folder() / f"{name}.json"
    here = Path(__file__)
    stamp = usercache.file_stamps([path, here, here.parent.parent / "scan" / "prefilter.py"])
    blob = _CACHE.get(str(path), stamp)
    if blob is not None:
        found = rulecache.read_pickle(blob, (MessageCatalog, CatalogEntry))
        if isinstance(found, MessageCatalog) and found.id == name:
            return found
    catalog = _prepared(_read(name, path))
    try:
        _CACHE.put(str(path), stamp, rulecache.write_pickle(catalog))
    except (TypeError, ValueError, AttributeError):  # not kept: the next run reads the file again
        pass
    return catalog


def _prepared(catalog: MessageCatalog) -> MessageCatalog:
    """The catalog with every lookup table made, none of the memos of lookups yet."""
    for table in ("_by_key", "_by_code", "_by_text", "_by_loose_key", "_patterns"):
        getattr(catalog, table)
    return catalog


def _read(name: str, path: Path) -> MessageCatalog:
    import json  # here: a start whose rules name no catalog entry never reads one

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        head = data["catalog"]
        entries = tuple(_entry(row) for row in data["entries"])
        return MessageCatalog(id=name, name=str(head["name"]), version=str(head["version"]),
                              url=str(head["url"]), source=str(head["source"]), entries=entries)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise TroubleshootError(f"{path}: not a readable message catalog ({e})") from None


def _entry(row: dict) -> CatalogEntry:
    return CatalogEntry(key=str(row["key"]), code=row.get("code"), message=row.get("message"),
                        pattern=row.get("pattern"), doc=row.get("doc"), symptom=row.get("symptom"),
                        severity=row.get("severity", "info"), action=row.get("action"), reason=row.get("reason"))


def expand(pattern: str) -> tuple[list[str], str | None]:
    """The patterns `pattern` stands for: itself, or one per printed form of the catalog its
    `{catalog:NAME}` names (one pattern each, not one alternation: hyperscan compiles hundreds
    of small patterns in a fraction of the time one pattern of hundreds of branches takes, and
    refuses one past its length limit). Second: what is wrong with the reference, or None."""
    refs = EXPANSION.findall(pattern)
    if not refs:
        return [pattern], None
    if len(refs) > 1:
        return [], "names more than one message catalog; one pattern may name one"
    if refs[0] not in names():
        return [], f"names no message catalog {refs[0]!r} (rules/catalogs/)"
    at = EXPANSION.search(pattern)
    head, tail = pattern[: at.start()], pattern[at.end():]
    return [f"{head}(?:{form}){tail}" for form in load(refs[0]).printed_forms()], None
