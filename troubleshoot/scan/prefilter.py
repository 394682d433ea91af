"""Prefilter forms: each pattern rewritten into what hyperscan scans for it, a superset of
what the pattern matches (it may propose more lines, never fewer).

A hyperscan database only proposes lines; the verifier decides each with the pattern's own
regex. So a form may widen what the pattern matches: anchors also hold at a `\r`, a character
may take up to four bytes, optional edges go, and a form may start at a rare literal, past
what comes before it (see `prefilter_source`). The rewriting reads a pattern as a
concatenation of atoms with quantifiers; anything it cannot read as one is left as it is.

Databases are cached on disk keyed by hsdb.FORMS_VERSION: bump it whenever this module changes
what it makes of a pattern.
"""

from __future__ import annotations

import re

from troubleshoot.model import RE2_NOT_SPACE, RE2_SPACE_CHARS
from troubleshoot.scan.required import required_literals

# Hyperscan scans bytes, while the verifier (RE2 or `re` on decoded text) reads '.', a
# negated class, \W, \S or \D as one character, which UTF-8 spells in one to four bytes. Each
# of those matches every byte of a multi-byte character (all are >= 0x80), so under `*` or `+`
# they already cover such runs; elsewhere their repeat count is widened to four bytes each.
_WIDE_ESCAPES = ("\\W", "\\S", "\\D")
# Hyperscan's \s takes \v, RE2's does not: \S (and \s in a negated class) spelled as RE2 reads
# them (model.RE2_*), or a line with a vertical tab where \S must match would never be a candidate.
_SPACE_IN_NEGATED = re.compile(r"(?<!\\)((?:\\\\)*)\\s")
_QUANTIFIER = re.compile(r"(?:[*+?]|\{(\d*)(,?)(\d*)\})[?+]?")
_GLOBAL_FLAGS = re.compile(r"\(\?[aiLmsux]+\)")
_ZERO_WIDTH = ("\\b", "\\B", "(?=", "(?!", "(?<=", "(?<!")
# Under MULTILINE `^` holds after each \n and `$` before it; a segment also starts after, and
# ends before, a \r.
_LINE_START = r"(?:^|\r)"
_LINE_END = r"(?:$|\r)"


def prefilter_source(source: str) -> str:
    r"""The pattern as the hyperscan prefilter reads it: a superset of what it matches.

    - `^` and `$` (and `\A`, `\Z`, `\z`) outside character classes also hold at a `\r`: the
      scanner matches each `\r`-separated segment of a line on its own, so a segment may start
      or end in the middle of a raw line. The database reads them per line (MULTILINE), so an
      anchored pattern is only tried where a line or segment starts;
    - constructs that match one character (`.`, negated classes, `\W`, `\S`, `\D`, classes
      with non-ASCII members) may take up to four bytes per character they stand for;
    - a non-ASCII literal character followed by a quantifier is grouped, so that the
      quantifier applies to all of its bytes; U+FFFD, which the verifier reads in place of
      invalid UTF-8, stands for one to three bytes of 0x80 or above.
    - optional, repeated and zero-width elements at either end (up to an anchor) are trimmed to
      what every match must contain (`(?:GiB)?` at the end goes, a final `\d+` becomes `\d`):
      any match of the pattern contains a match of the rest, and hyperscan, which reports every
      end of every match, then reports a line once or twice instead of once per digit.
    - what comes before an unbounded repeat is dropped when a long literal follows it (see
      `from_rare_literal`), and a leading word that most training-log lines hold when a rarer
      literal follows it (see `past_common_words`).
    Widening can only add candidate lines, and the verifier decides each, so the database may
    scan raw bytes as they are."""
    source = past_common_words(from_rare_literal(trim_edges(source)))
    out: list[str] = []
    i, n = 0, len(source)
    while i < n:
        c = source[i]
        if source.startswith(("\\A",), i):
            out.append(_LINE_START)
            i += 2
            continue
        if source.startswith(("\\Z", "\\z"), i):
            out.append(_LINE_END)
            i += 2
            continue
        if c == "\\":
            atom = source[i : i + 2]
            i += 2
            wide = atom in _WIDE_ESCAPES
            if atom == "\\S":
                atom = RE2_NOT_SPACE
        elif c == "[":
            j = class_end(source, i)
            atom, i = source[i:j], j
            if not atom.isascii():
                atom, wide = r"[^\n]", True
            else:
                wide = atom.startswith("[^") or any(e in atom for e in _WIDE_ESCAPES)
                if atom.startswith("[^"):
                    atom = _SPACE_IN_NEGATED.sub(lambda m: m.group(1) + RE2_SPACE_CHARS, atom)
        elif c == ".":
            atom, wide = ".", True
            i += 1
        elif c == "^":
            out.append(_LINE_START)
            i += 1
            continue
        elif c == "$":
            out.append(_LINE_END)
            i += 1
            continue
        elif c == "\ufffd":
            # The verifier reads each invalid UTF-8 sequence (one to three bytes, all >= 0x80) as
            # U+FFFD, which the raw bytes the database scans do not spell.
            atom, wide = r"(?:[\x80-\xff]{1,3})", False
            i += 1
        elif not c.isascii():
            atom, wide = f"(?:{c})", False
            i += 1
        else:
            out.append(c)
            i += 1
            continue
        q = _quantifier(source, i)
        quant = q.group(0) if q else ""
        i += len(quant)
        out.append(atom + (_widen_repeat(q) if wide else quant))
    return "".join(out)


def _widen_repeat(q: "re.Match | None") -> str:
    """The repeat count, in bytes, of a one-character construct repeated as `q` says."""
    if q is None:
        return "{1,4}"
    text = q.group(0)
    if text[0] in "*+":
        return text[0]
    if text[0] == "?":
        return "{0,4}"
    low, comma, high = q.group(1), q.group(2), q.group(3)
    lo = int(low or 0)
    if not comma:
        return f"{{{lo},{4 * lo}}}" if lo else "{0}"
    if not high:
        return f"{{{lo},}}"
    return f"{{{lo},{4 * int(high)}}}"


def _quantifier(source: str, i: int) -> "re.Match | None":
    q = _QUANTIFIER.match(source, i)
    if q and q.group(0)[0] == "{" and not (q.group(1) or (q.group(2) and q.group(3))):
        return None  # `{}`, `{,}` and the like are literal text
    return q


def _min_repeat(q: "re.Match | None") -> int:
    if q is None:
        return 1
    head = q.group(0)[0]
    if head in "*?":
        return 0
    if head == "+":
        return 1
    return int(q.group(1) or 0)


def _atom_end(source: str, i: int) -> int:
    """Index just after the atom (escape, class, group or character) at source[i]."""
    c = source[i]
    if c == "\\":
        nxt = source[i + 1 : i + 2]
        width = {"x": 4, "u": 6, "U": 10}.get(nxt, 2)
        if nxt == "N" and source[i + 2 : i + 3] == "{":
            return source.index("}", i) + 1
        if nxt == "x" and source[i + 2 : i + 3] == "{":
            return source.index("}", i) + 1
        if nxt.isdigit():
            j = i + 2
            while j < len(source) and j < i + 4 and source[j].isdigit():
                j += 1
            return j
        return i + width
    if c == "[":
        return class_end(source, i)
    if c == "(":
        depth, j, n = 0, i, len(source)
        while j < n:
            ch = source[j]
            if ch == "\\":
                j += 2
                continue
            if ch == "[":
                j = class_end(source, j)
                continue
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
                if depth == 0:
                    return j + 1
            j += 1
        raise ValueError("unbalanced parenthesis")
    return i + 1


def _elements(source: str) -> list[tuple[str, "re.Match | None"]] | None:
    """The pattern as a concatenation of (atom, quantifier); None when it has a top-level `|`."""
    out = []
    i, n = 0, len(source)
    while i < n:
        if source[i] == "|":
            return None
        j = _atom_end(source, i)
        q = _quantifier(source, j)
        out.append((source[i:j], q))
        i = q.end() if q else j
    return out


def _plain_group_body(atom: str) -> str | None:
    """The body of a capturing or non-capturing group with no flags and no top-level `|`."""
    if atom.startswith("(?:"):
        body = atom[3:-1]
    elif atom.startswith("(?P<"):
        body = atom[atom.index(">") + 1 : -1]
    elif atom.startswith("(") and not atom.startswith("(?"):
        body = atom[1:-1]
    else:
        return None
    return body if _elements(body) is not None else None


def _trim(elems: list, from_end: bool) -> list:
    elems = list(elems)
    while elems:
        k = -1 if from_end else 0
        atom, q = elems[k]
        low = _min_repeat(q)
        if atom.startswith(_ZERO_WIDTH) or low == 0:
            elems.pop(k)
            continue
        body = _plain_group_body(atom)
        if body is not None and low == 1:
            # An exactly-once (after trimming) plain group: trim inside it.
            inner = _trim(_elements(body), from_end)
            if not inner:
                elems.pop(k)
                continue
            if from_end:
                elems[k:] = inner
            else:
                elems[:1] = inner
            if len(inner) > 1 or inner[0] != (atom, None):
                continue
        if q is not None:
            elems[k] = (atom, None) if low == 1 else (atom, _QUANTIFIER.match(f"{{{low}}}"))
        break
    return elems


def _back_reference(source: str) -> bool:
    return "(?P=" in source or re.search(r"\\[1-9]", source) is not None


def _concatenation(source: str) -> tuple[str, list] | None:
    """(leading global flags, top-level elements) of a pattern that is a plain concatenation;
    None when it is not (a top-level `|`, nothing, unbalanced) or when a back-reference needs
    the group it names, so that no part of it may stand alone."""
    if _back_reference(source):
        return None
    head = _GLOBAL_FLAGS.match(source)
    prefix = head.group(0) if head else ""
    try:
        elems = _elements(source[len(prefix):])
    except (ValueError, IndexError):
        return None
    return (prefix, elems) if elems else None


def _join(prefix: str, elems: list) -> str:
    return prefix + "".join(a + (q.group(0) if q else "") for a, q in elems)


def trim_edges(source: str) -> str:
    """The part of the pattern that every match contains, edges trimmed (see prefilter_source)."""
    parsed = _concatenation(source)
    if parsed is None:
        return source
    prefix, elems = parsed
    trimmed = _trim(_trim(elems, False), True)
    if not trimmed:
        return source  # only optional parts: hyperscan will refuse it, RE2 takes it
    return _join(prefix, trimmed)


# A literal at least this long is taken as rare enough to start a prefilter form on its own.
RARE_LITERAL = 8
# A bounded repeat with at least this upper bound is cut at like an unbounded one (_unbounded).
LARGE_REPEAT = 16


def _literal_char(atom: str, q) -> bool:
    if q is not None:
        return False
    if len(atom) == 1:
        return atom not in ".^$|()[]{}*+?\\"
    return len(atom) == 2 and atom[0] == "\\" and not atom[1].isalnum()


def _unbounded(atom: str, q) -> bool:
    """A repeat with no upper bound, or one as good as none for hyperscan: a bound of
    LARGE_REPEAT or more (`[^\n]{0,300}?`) is as many NFA states, compiled and run on every
    occurrence of what precedes it."""
    if q is not None and (q.group(0)[0] in "*+" or (q.group(2) and (not q.group(3) or int(q.group(3)) >= LARGE_REPEAT))):
        return True
    # A group (or class) holding a repeat: an approximation, which only affects where cuts fall.
    return atom.startswith("(") and bool(re.search(r"(?<!\\)[*+]|\{\d*,\}", atom))


def _flat(elems: list) -> list:
    """Top-level elements with plain groups (no `|`, no quantifier) spliced in."""
    out = []
    for atom, q in elems:
        body = _plain_group_body(atom) if q is None else None
        out += _flat(_elements(body)) if body is not None else [(atom, q)]
    return out


def from_rare_literal(source: str) -> str:
    r"""The pattern from just after the last unbounded repeat before its longest literal, when
    that literal is at least RARE_LITERAL characters long; else the pattern as it is.

    Any match of a concatenation contains a match of each run of its elements, so the rest is
    a superset. Hyperscan cannot start matching at the rare literal when an unbounded repeat
    comes before it: it runs what precedes it on every occurrence of that prefix's own short
    literals (`.py:`, `nccl`, a hex digit). Measured on the benchmark's logs, five such patterns
    (`[\w.-]\.(?:cu|py):\d+:.*block: ...Assertion`, `(?i:nccl)\S*...internal error`, `0/\d+
    nodes are available:.*Insufficient nvidia\.com/gpu`, a PCI address before `[\d.]+ Gb/s
    available PCIe bandwidth`) cost a third of the whole 600-pattern pass. What is kept still
    holds the long literal and everything after it, so the lines it proposes stay few."""
    parsed = _concatenation(source)
    if parsed is None or "x" in parsed[0]:  # verbose: spaces and `#` are not literal text
        return source
    prefix, elems = parsed[0], _flat(parsed[1])
    best_len, best_at, run, run_at = 0, 0, 0, 0
    for k, (atom, q) in enumerate(elems):
        if _literal_char(atom, q):
            if run == 0:
                run_at = k
            run += 1
            if run > best_len:
                best_len, best_at = run, run_at
        else:
            run = 0
    if best_len < RARE_LITERAL:
        return source
    cut = 0
    for k in range(best_at):
        atom, q = elems[k]
        if _unbounded(atom, q):
            cut = k + 1
    if cut == 0:
        return source
    rest = elems[cut:]
    while rest and rest[0][0].startswith(_ZERO_WIDTH):
        rest = rest[1:]
    return _join(prefix, rest)


# Words that most lines of a training log hold (metric names, log prefixes): as the literal a
# prefilter form starts at, each makes hyperscan look further on nearly every line. Measured on
# the benchmark's logs, `loss['"]?\s*[:=]\s*['"]?(nan|...)` ("loss" on two lines in three)
# cost a fifth of the whole 600-pattern pass.
COMMON_WORDS = frozenset({
    "loss", "lr", "step", "steps", "epoch", "iter", "iteration", "grad", "norm", "grad_norm", "time",
    "rank", "batch", "train", "eval", "INFO", "NCCL", "NCCL INFO", "WARNING",
})
_SEPARATORS = " _-:="  # around and between those words (`loss: `, `grad_norm`, `grad-norm`)


def past_common_words(source: str) -> str:
    r"""The pattern from just after its leading literal words when each is in COMMON_WORDS and
    what follows still holds literals one of which every match must contain (none shorter
    than three characters, none of them common); else the pattern as it is.

    As in `from_rare_literal`, the rest of a concatenation is a superset of it: each line it
    proposes is verified with the whole pattern. `loss['"]?\s*[:=]\s*['"]?(?P<value>nan|inf)`
    becomes `[:=]\s*['"]?(?P<value>nan|inf)`, found where `nan` or `inf` follows a separator."""
    parsed = _concatenation(source)
    if parsed is None or "x" in parsed[0]:
        return source
    prefix, elems = parsed[0], _flat(parsed[1])
    cut, k = 0, 0
    while k < len(elems):
        if not _literal_char(*elems[k]):
            if elems[k][0] == r"\b" or (cut and k == cut and _literal_class(*elems[k])):
                k += 1  # `\b`, `[ _-]` between words (`grad[ _-]norm`)
                continue
            break
        run = k
        while k < len(elems) and _literal_char(*elems[k]):
            k += 1
        word = "".join(a[-1] for a, _ in elems[run:k]).strip(_SEPARATORS)
        if word not in COMMON_WORDS:
            break
        cut = k
    if cut == 0:
        return source
    rest = trim_edges(_join(prefix, elems[cut:]))
    try:
        found = required_literals(re.compile(rest))
    except re.error:
        return source
    if not found or any(w.strip(_SEPARATORS) in COMMON_WORDS for w in found):
        return source
    return rest


def _literal_class(atom: str, q) -> bool:
    """A class of separator characters, once (`[ _-]`)."""
    return (q is None and atom.startswith("[") and not atom.startswith("[^")
            and all(c in _SEPARATORS for c in atom[1:-1]))


def class_end(source: str, i: int) -> int:
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


def weak(form: str) -> bool:
    r"""True when no literal of three characters or more is in every match of the form: hyperscan
    then runs it from every `|` or digit, or as an automaton over every byte (nvidia-smi's
    process-row pattern, `\|\s+\d+\s+...`, cost a sixth of the whole pass)."""
    try:
        return required_literals(re.compile(form)) is None
    except (re.error, RecursionError):
        return False

