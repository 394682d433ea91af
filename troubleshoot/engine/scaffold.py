"""A first rule from one pasted log line: the variable parts generalised, the line as its example.

Pure text in, text out: `troubleshoot rules new` writes the result and checks that it loads
and that its examples pass before anyone sees it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A log line's prefix that changes on every line and says nothing about the error: dropped.
PREFIXES = (
    re.compile(r"^\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]?\s*"),  # ISO date-time
    re.compile(r"^\[\s*\d+\.\d+\]\s*"),                                         # dmesg [  123.456]
    re.compile(r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ (?:\S+?(?:\[\d+\])?: )?"),  # syslog: Mon  1 12:00:00 host proc[1]:
    re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ \S+:\d+\]\s*"),          # glog: E0312 12:00:00.123 42 x.cc:1]
    re.compile(r"^[\w.-]+:\d+:\d+ \[\d+\]\s*"),                                 # NCCL: host:pid:tid [rank]
    re.compile(r"^\[(?:rank)?\d+\]:?\s*"),                                     # torchrun: [rank3]: / [3]
)

# (kind, regex of the part in the line, what the pattern says instead, capture name or None).
# Order matters: the first kind that matches at a position wins.
PARTS = (
    ("quoted", re.compile(r"'[^'\n]{1,200}'"), r"'(?P<{name}>[^']+)'", "name"),
    ("quoted", re.compile(r'"[^"\n]{1,200}"'), r'"(?P<{name}>[^"]+)"', "name"),
    ("path", re.compile(r"(?<![\w.])(?:~|\.{1,2})?/[\w.@%+~-]+(?:/[\w.@%+~-]*)*"), r"(?P<{name}>[~./][^\s:,;'\")]*)", "path"),
    ("ip", re.compile(r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?(?![\w.])"), r"\d+(?:\.\d+){3}(?::\d+)?", None),
    ("hex", re.compile(r"(?<!\w)0x[0-9a-fA-F]+(?!\w)"), r"0x[0-9a-fA-F]+", None),
    ("time", re.compile(r"(?<![\w:])\d\d?:\d\d:\d\d(?:[.,]\d+)?(?![\w:])"), r"\d+:\d+:\d+(?:[.,]\d+)?", None),
    ("pci", re.compile(r"(?<!\w)(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?(?![\w:])"),
     r"[0-9a-fA-F:.]+", None),
    # v1.2 or 1.2.3 (a plain 0.231 is a number: a loss, a time)
    ("version", re.compile(r"(?<![\w.])(?:v\d+(?:\.\d+)+|\d+(?:\.\d+){2,3})(?:[-+][\w.]+)?(?![\w.])"),
     r"(?P<{name}>v?\d+\.[\d.]+(?:[-+][\w.]+)?)", "version"),  # no nested repetition: lint warns on it
    ("hexid", re.compile(r"(?<!\w)(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{8,}(?!\w)"), r"[0-9a-f]+", None),
    ("number", re.compile(r"(?<![\w.])\d+(?:\.\d+)?"), r"\d+(?:\.\d+)?", None),
)

_SPECIAL = set("\\.^$*+?{}[]()|")
_SPACES = re.compile(r"[ \t]{2,}")
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|[\x00-\x08\x0b-\x1f\x7f]")
_WORDS = re.compile(r"[A-Za-z][A-Za-z0-9]*")
ERROR_WORDS = re.compile(r"(?i)\b(?:error|fatal|fail(?:ed|ure)?|exception|abort(?:ed)?|killed|panic|traceback|cannot|"
                         r"could not|unable|denied|refused|timed? ?out|segmentation fault|core dumped)\b")
WARNING_WORDS = re.compile(r"(?i)\b(?:warn(?:ing)?|deprecated|slow|degraded|retry(?:ing)?)\b")


@dataclass(frozen=True)
class Scaffold:
    pattern: str
    captures: tuple[str, ...]
    line: str  # the cleaned line: the `match` example
    no_match: str
    body: str = ""  # the line without its timestamp prefix
    words: tuple[str, ...] = ()  # the fixed words of the pattern


def clean(line: str) -> str:
    """The line as the scanner sees it: colour codes and control characters removed."""
    return _CONTROL.sub("", line).strip()


def _escape(text: str) -> str:
    # Only what a regex treats as special: `re.escape` also escapes spaces, '-', '#', ... and the
    # rule would be hard to read.
    out = "".join("\\" + c if c in _SPECIAL else c for c in text)
    return _SPACES.sub(lambda m: " +" if m.group(0).strip(" ") == "" else r"\s+", out)


def generalise(line: str) -> Scaffold:
    """A pattern for `line` with its variable parts as named captures (quoted names, paths,
    versions) or classes (numbers, hex, addresses). Raises ValueError for a line with no fixed
    words to match on."""
    text = clean(line)
    body = text
    for prefix in PREFIXES:
        body = prefix.sub("", body, count=1)
    pieces: list[str] = []
    names: list[str] = []
    literal: list[str] = []
    i = 0
    while i < len(body):
        for _kind, regex, replacement, base in PARTS:
            m = regex.match(body, i)
            if m and m.end() > i:
                if base is not None:
                    name = base if base not in names else f"{base}{sum(1 for n in names if n.startswith(base)) + 1}"
                    names.append(name)
                    replacement = replacement.replace("{name}", name)
                pieces.append(replacement)
                i = m.end()
                break
        else:
            j = i + 1
            while j < len(body) and not any(regex.match(body, j) for _k, regex, _r, _b in PARTS):
                j += 1
            chunk = body[i:j]
            literal.append(chunk)
            pieces.append(_escape(chunk))
            i = j
    words = [w for w in _WORDS.findall(" ".join(literal)) if len(w) > 1]
    if sum(len(w) for w in words) < 4:
        raise ValueError("the line has no fixed words to match on (only numbers, paths or names); paste a line "
                         "with the error's own words")
    pattern = "".join(pieces).strip()
    if not re.search(pattern, text):  # a part's class must still cover what it replaced
        pattern, names = _escape(body.strip()), []
    return Scaffold(pattern=pattern, captures=tuple(names), line=text, no_match=_near_miss(words, pattern),
                    body=body.strip(), words=tuple(words))


def _near_miss(words: list[str], pattern: str) -> str:
    """A placeholder no_match: the line's words in a harmless sentence, which the pattern must not match."""
    candidates = [f"INFO replace with a near miss: a harmless line with the words {' '.join(words[:4])}",
                  "INFO replace with a near miss: the same words in a harmless line"]
    for c in candidates:
        if not re.search(pattern, c):
            return c
    return "INFO replace with a near miss"


def rule_id(words: tuple[str, ...], taken: set[str]) -> str:
    """`team-` and the first fixed words of the line, kebab-case, not one of `taken`."""
    words = [w.lower() for w in words][:4] or ["rule"]
    base = "team-" + "-".join(re.sub(r"[^a-z0-9]", "", w) for w in words if re.sub(r"[^a-z0-9]", "", w))
    rid, n = base, 2
    while rid in taken:
        rid, n = f"{base}-{n}", n + 1
    return rid


def severity(line: str) -> str:
    if ERROR_WORDS.search(line):
        return "error"
    return "warning" if WARNING_WORDS.search(line) else "info"


def _quote(text: str) -> str:
    """A YAML single-quoted scalar: backslashes stay as written (a regex reads the same)."""
    return "'" + text.replace("'", "''") + "'"


def render(s: Scaffold, rid: str, symptom: str, sev: str, similar: str | None = None) -> str:
    captured = ", ".join("{" + n + "}" for n in s.captures)
    head = s.body or s.line
    title = head if len(head) <= 70 else head[:67] + "..."
    lines = [
        "# Scaffolded by `troubleshoot rules new` from one log line. Before sharing it: name the cause",
        "# in the title, write what happened and how to confirm it, make the no_match a real near miss",
        "# (the same words in a harmless line), and run `troubleshoot rules lint` and `rules test`.",
    ]
    if similar:
        lines.append(f"# A loaded rule also matches this line: {similar} (add `refines: [{similar}]` if this one is"
                     f" more specific).")
    lines += [
        "rules:",
        f"- id: {rid}",
        f"  symptom: {symptom}",
        f"  title: {_quote(title)}",
        f"  severity: {sev}",
        "  confidence: 0.7",
        "  match:",
        "    log:",
        f"      - {_quote(s.pattern)}",
        "  explain: |",
        "    What happened, why, and how to confirm it (Markdown)."
        + (f" Captured values fill in: {captured}." if captured else ""),
        "  examples:",
        "    match:",
        f"      - {_quote(s.line)}",
        "    no_match:",
        f"      - {_quote(s.no_match)}",
    ]
    return "\n".join(lines) + "\n"
