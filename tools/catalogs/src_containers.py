"""Container-runtime catalogs: the messages the NVIDIA container stack prints when a container
cannot reach the GPU, read from the emitters' own source.

- libnvidia-container: the C library and nvidia-container-cli (src/): the formats given to
  error_set*/log_err*/log_warn* and the CLI's warn/warnx/errx ("nvidia-container-cli: <stage>
  error: <text>"), plus the Go helper's errors (src/nvcgo).
- nvidia-container-toolkit: the runtime, the hooks, nvidia-ctk and the CDI spec generator
  (fmt.Errorf, errors.New, the hook's log.Panic*, the runtime logger's errors and warnings).
- cdi: cncf-tags/container-device-interface (pkg/, internal/): what Podman, containerd and
  CRI-O print for CDI devices.
- k8s-device-plugin: the device plugin, GPU feature discovery and the MPS daemon (errors and
  klog lines seen in their pods).

A message has no identifier of its own, so its key is where it lives (the C file or the Go
package) plus a slug of its text: stable while the text stays in the same place.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from tools.catalogs.common import CatalogError, Entry, printf_pattern, split_args

SOURCE = ("NVIDIA/libnvidia-container, NVIDIA/nvidia-container-toolkit, "
          "cncf-tags/container-device-interface, NVIDIA/k8s-device-plugin")
NAMES = ("libnvidia-container", "nvidia-container-toolkit", "cdi", "k8s-device-plugin")

# warn/warnx/errx prefix the program's name; the CLI's binary is built under this name.
CLI_NAME = "nvidia-container-cli"

# Words that say nothing about which message this is: a format whose literal text is only these
# ("failed to create %v: %w", "error getting %v") would match any program's log lines.
GENERIC = frozenset("""a an and are as at be by can cannot can't could couldn't did do does
error errors fail failed failure for from get getting got had has have if in into invalid is it
its no not of on or set setting the to unable unexpected unknown was when while with without
create creating created open opening read reading write writing load loading parse parsing find
finding found value values new run running add adding remove removing update updating check
checking construct constructing return returned use using call calling skip skipping ignore
ignoring path file directory missing""".split())
MIN_LITERAL = 12


@dataclass(frozen=True)
class Call:
    """How a logging or error call takes its message: the argument holding it and whether it
    is a format (printf style) or printed as is (Print/Println style)."""

    arg: int
    printf: bool
    level: str


@dataclass(frozen=True)
class Catalog:
    title: str
    repo: str
    module: str | None           # go.mod's module line, where the tree has one to check
    paths: tuple[str, ...]       # folders (or files) read, relative to the tree
    skip: tuple[str, ...]        # path pieces never read: tests, mocks, vendored code
    license: str


C_CALLS = {
    "error_set": Call(1, True, "error"), "error_setx": Call(1, True, "error"),
    "error_set_elf": Call(1, True, "error"), "error_set_dl": Call(1, True, "error"),
    "error_set_rpc": Call(2, True, "error"), "error_set_nvml": Call(3, True, "error"),
    "log_err": Call(0, False, "error"), "log_errf": Call(0, True, "error"),
    "log_warn": Call(0, False, "warning"), "log_warnf": Call(0, True, "warning"),
    "warn": Call(0, True, "error"), "warnx": Call(0, True, "error"),
    "errx": Call(1, True, "fatal"),
}
CLI_CALLS = ("warn", "warnx", "errx")
C_CALL_RX = re.compile(r"(?<![\w.>])(" + "|".join(sorted(C_CALLS, key=len, reverse=True)) + r")\(")

GO_CALL_RX = re.compile(
    r"(?<![\w.])(fmt\.Errorf|errors\.New"
    r"|log\.(?:Panicf|Panicln|Panic|Fatalf|Fatalln|Fatal)"
    r"|klog\.(?:Errorf|ErrorS|Error|Warningf|Warning|Infof|InfoS|Info|Fatalf|Fatal|Exitf|Exit)"
    r"|(?:\w+\.)?[lL]ogger\.(?:Errorf|Warningf|Warnf))\(")


def go_call(name: str) -> Call:
    method = name.rsplit(".", 1)[1]
    level = ("fatal" if method.startswith(("Panic", "Fatal", "Exit")) else
             "warning" if method.startswith("Warn") else
             "info" if method.startswith("Info") else "error")
    if method.endswith("S"):
        return Call(1, False, level)  # klog.ErrorS(err, "msg", key, value...)
    return Call(0, method.endswith("f"), level)


CATALOGS = {
    "libnvidia-container": Catalog(
        "NVIDIA libnvidia-container and nvidia-container-cli messages",
        "NVIDIA/libnvidia-container", "nvcgo", ("src",), ("src/nvcgo/vendor/", "_test.go"),
        "Apache-2.0 (the library is also offered under LGPL-3.0, the CLI under GPL-3.0)"),
    "nvidia-container-toolkit": Catalog(
        "NVIDIA Container Toolkit messages (runtime, hooks, nvidia-ctk, CDI generator)",
        "NVIDIA/nvidia-container-toolkit", "github.com/NVIDIA/nvidia-container-toolkit",
        ("cmd/nvidia-container-runtime", "cmd/nvidia-container-runtime.cdi",
         "cmd/nvidia-container-runtime.legacy", "cmd/nvidia-container-runtime-hook",
         "cmd/nvidia-cdi-hook", "cmd/nvidia-ctk", "internal", "pkg"),
        ("_test.go", "_mock.go", "/test/", "internal/test"), "Apache-2.0"),
    "cdi": Catalog(
        "Container Device Interface (CDI) messages", "cncf-tags/container-device-interface",
        "tags.cncf.io/container-device-interface", ("pkg", "internal"), ("_test.go", "_mock.go"), "Apache-2.0"),
    "k8s-device-plugin": Catalog(
        "NVIDIA Kubernetes device plugin, GPU feature discovery and MPS daemon messages",
        "NVIDIA/k8s-device-plugin", "github.com/NVIDIA/k8s-device-plugin",
        ("cmd", "internal", "api"),
        ("_test.go", "_mock.go", "/mock", "zz_generated"), "Apache-2.0"),
}

STRING = r'"(?:[^"\\\n]|\\.)*"'
C_LITERAL = re.compile(rf"\s*(?:(?:{STRING}|PRI[diouxX]\w*)\s*)+")
GO_LITERAL = re.compile(rf"\s*(?:{STRING}|`[^`]*`)(?:\s*\+\s*(?:{STRING}|`[^`]*`))*\s*")
GO_VERB = re.compile(r"%[-+# 0]*(?:\[\d+\])?(?:\d+|\*)?(?:\.(?:\d+|\*))?([a-zA-Z%])")
C_VERB = re.compile(r"%[-+ #0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|q|j|z|Z|t)?[a-zA-Z%]")


def _unquote(lit: str) -> str:
    if lit.startswith("`"):
        return lit[1:-1]
    try:
        return ast.literal_eval(lit)
    except (ValueError, SyntaxError):
        return lit[1:-1]


def literal_text(arg: str, go: bool) -> str | None:
    """The string an argument spells when it is made only of literals (Go's "a" + "b", C's
    adjacent literals and <inttypes.h> PRI macros); None for anything computed."""
    arg = re.sub(r"/\*.*?\*/|//[^\n]*", " ", arg, flags=re.S)
    if not (GO_LITERAL if go else C_LITERAL).fullmatch(arg):
        return None
    out = []
    for m in re.finditer(rf"{STRING}|`[^`]*`|PRI([diouxX])\w*", arg):
        out.append(m.group(1) if m.group(1) else _unquote(m.group(0)))
    return "".join(out)


def go_pattern(fmt: str) -> str:
    """Go's verbs as wildcards (%d as a number), everything else literal."""
    out, pos, text = [], 0, fmt.strip()
    for m in GO_VERB.finditer(text):
        out.append(re.escape(text[pos:m.start()]))
        verb = m.group(1)
        out.append("%" if verb == "%" else r"-?\d+" if verb == "d" else ".*?")
        pos = m.end()
    out.append(re.escape(text[pos:]))
    return "".join(out)


def first_line(text: str) -> str:
    """A message with line breaks reaches a log as several lines: the first is the one pasted."""
    return next((ln for ln in text.split("\n") if ln.strip()), "").strip()


def distinctive(fmt: str, verb: re.Pattern) -> bool:
    """Whether a format's literal text can name one message: long enough, and with at least
    one word beyond the vocabulary every program's errors share."""
    literal = verb.sub(" ", fmt)
    size = len(re.sub(r"\s+", " ", literal).strip())
    if size < MIN_LITERAL or (verb.match(fmt.strip()) and size < 2 * MIN_LITERAL):
        return False  # short, or a short tail after a leading wildcard ("%v is too long")
    words = re.findall(r"[A-Za-z][A-Za-z0-9_'-]*", literal)
    return any(w.lower() not in GENERIC and len(w) > 2 for w in words)


def slug(fmt: str, verb: re.Pattern) -> str:
    words = re.findall(r"[a-z0-9]+", verb.sub(" ", fmt).lower())
    out = "-".join(words[:8])
    return out[:60].rstrip("-") or "message"


@dataclass
class Found:
    """One call with a literal message, before keys are given."""

    scope: str
    text: str
    call: str
    spec: Call
    where: str
    function: str | None
    doc: str | None
    go: bool


# BSD style puts the name at the start of its line, others after the type ("static int f(").
C_FUNC = re.compile(r"^(?:[A-Za-z_][\w\s*]*?[\s*])?([A-Za-z_]\w*)\s*\([^;]*$")
GO_FUNC = re.compile(r"^func\s+(?:\(\s*(?:\w+\s+)?\*?(\w+)[^)]*\)\s*)?(\w+)")
C_NOT_FUNCS = frozenset({"if", "for", "while", "switch", "return", "sizeof", "defined"})


def functions(lines: list[str], go: bool) -> list[tuple[int, str]]:
    """(first line, name) of each function, for naming the function a message is raised in."""
    out = []
    for n, line in enumerate(lines, 1):
        if go and (m := GO_FUNC.match(line)):
            out.append((n, f"{m.group(1)}.{m.group(2)}" if m.group(1) else m.group(2)))
        elif (not go and (m := C_FUNC.match(line)) and m.group(1) not in C_NOT_FUNCS
              and not line.startswith(("#", "typedef", "struct", "return"))):
            out.append((n, m.group(1)))
    return out


def doc_above(lines: list[str], line: int) -> str | None:
    """The comment block directly above a call, collapsed: the emitter's own note on it."""
    out, n = [], line - 2
    while n >= 0 and re.match(r"\s*(//|/\*|\*)", lines[n]):
        out.insert(0, re.sub(r"^\s*(?://+|/\*+|\*+/?)\s?|\s*\*+/\s*$", "", lines[n]))
        n -= 1
    text = re.sub(r"\s+", " ", " ".join(out)).strip()
    if not text or text.lower().startswith(("todo", "nolint", "fixme")):
        return None
    return " ".join(re.split(r"(?<=[.!?])\s+", text)[:3])


def scan_file(path: Path, rel: str, scope: str) -> list[Found]:
    """Every message call with a literal message in one source file, in file order."""
    go = rel.endswith(".go")
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    lines = text.split("\n")
    funcs = functions(lines, go)
    out = []
    for m in (GO_CALL_RX if go else C_CALL_RX).finditer(text):
        line_start = text.rfind("\n", 0, m.start()) + 1
        before = text[line_start:m.start()]
        if "//" in before or before.lstrip().startswith(("#", "*", "/*")):
            continue  # a comment's example or a macro's definition, not a message
        spec = go_call(m.group(1)) if go else C_CALLS[m.group(1)]
        args = split_args(text, m.end())
        if args is None or len(args) <= spec.arg:
            continue
        lit = literal_text(args[spec.arg], go)
        if lit is None or not first_line(lit):
            continue
        line = text.count("\n", 0, m.start()) + 1
        fn = next((name for start, name in reversed(funcs) if start <= line), None)
        out.append(Found(scope, first_line(lit), m.group(1), spec, f"{rel}:{line}", fn,
                         doc_above(lines, line), go))
    return out


NO_VERB = re.compile(r"(?!)")


def to_entries(found: list[Found], cli_prefix: bool = False) -> list[Entry]:
    """Entries in source order: formats too plain to name one message dropped, one entry per
    slug in each scope (the first place it is raised: texts that differ only in their verbs or
    punctuation print the same message), keys made unique by a counter where two texts share
    a truncated slug."""
    entries: list[Entry] = []
    seen: dict[tuple[str, str], str] = {}
    taken: set[str] = set()
    for f in found:
        verb = (GO_VERB if f.go else C_VERB) if f.spec.printf else NO_VERB
        if not distinctive(f.text, verb):
            continue
        base = f"{f.scope}:{slug(f.text, verb)}"
        words = " ".join(re.findall(r"[a-z0-9]+", verb.sub(" ", f.text).lower()))
        if seen.get((base, words)) is not None:
            continue
        key, n = base, 1
        while key in taken:
            n += 1
            key = f"{base}-{n}"
        seen[(base, words)] = key
        taken.add(key)
        entries.append(make_entry(key, f, verb, cli_prefix))
    return entries


def make_entry(key: str, f: Found, verb: re.Pattern, cli_prefix: bool) -> Entry:
    if not f.spec.printf:
        pattern, message = re.escape(f.text.strip()), f.text.strip()
    else:
        pattern = go_pattern(f.text) if f.go else printf_pattern(f.text)
        plain = not [m for m in verb.finditer(f.text) if m.group(0) != "%%"]
        message = f.text.strip().replace("%%", "%") if plain else None
    if cli_prefix and f.call in CLI_CALLS:
        # warn/warnx/errx print "<program>: <message>": the prefix makes a generic stage
        # ("permission error: %s") one program's message.
        pattern = re.escape(f"{CLI_NAME}: ") + pattern
        message = f"{CLI_NAME}: {message}" if message else None
    extra = {"call": f.call, "level": f.spec.level}
    if f.function:
        extra["function"] = f.function
    return Entry(key=key, message=message, pattern=pattern, doc=f.doc, where=f.where, extra=extra)


def source_files(tree: Path, cat: Catalog) -> list[tuple[Path, str]]:
    """The catalog's C and Go sources under the tree, sorted by path (keys and the choice of
    a repeated message's first place depend on this order)."""
    out = []
    for top in cat.paths:
        base = tree / top
        if not base.is_dir():
            continue
        for p in base.rglob("*"):
            rel = p.relative_to(tree).as_posix()
            if p.suffix not in (".c", ".h", ".go") or not p.is_file():
                continue
            if any(s in rel for s in cat.skip):
                continue
            out.append((p, rel))
    return sorted(set(out), key=lambda t: t[1])


def scope_of(name: str, rel: str) -> str:
    """A C file's path (without src/) or a Go package's folder."""
    if rel.endswith(".go"):
        folder = rel.rsplit("/", 1)[0] if "/" in rel else "."
        return folder.removeprefix("src/")
    return rel.removeprefix("src/")


GO_MOD = {"libnvidia-container": "src/nvcgo/go.mod"}
RELEASE = (("versions.mk", r"^LIB_VERSION\s*:?=\s*(\S+)"),
           ("specs-go/version.go", r'^const CurrentVersion = "([^"]+)"'))


def check_tree(name: str, tree: Path, cat: Catalog) -> None:
    """A tree of another project fails here rather than yielding an empty or foreign catalog."""
    mod = tree / GO_MOD.get(name, "go.mod")
    if mod.is_file() and cat.module:
        line = mod.read_text(encoding="utf-8", errors="replace").split("\n", 1)[0].strip()
        if line != f"module {cat.module}":
            raise CatalogError(f"{mod}: {line!r} is not the module of {cat.repo}")


def release_in(tree: Path) -> str | None:
    """The release the tree says it is (versions.mk), or the CDI spec version it implements."""
    for rel, rx in RELEASE:
        p = tree / rel
        if p.is_file():
            m = re.search(rx, p.read_text(encoding="utf-8", errors="replace"), re.M)
            if m:
                return m.group(1)
    return None


def parse(name: str, tree: Path, version: str | None) -> tuple[dict, list[Entry]]:
    cat = CATALOGS.get(name)
    if cat is None:
        raise CatalogError(f"{name}: not a catalog of {__name__}")
    check_tree(name, tree, cat)
    files = source_files(tree, cat)
    if not files:
        raise CatalogError(f"{tree}: no C or Go source of {cat.repo} under "
                           f"{', '.join(cat.paths)}")
    found = [f for p, rel in files for f in scan_file(p, rel, scope_of(name, rel))]
    entries = to_entries(found, cli_prefix=name == "libnvidia-container")
    release = release_in(tree)
    version = version or (f"v{release}" if release and name != "cdi" else None)
    if not version:
        raise CatalogError(f"{tree}: the tree does not say its release; pass --version "
                           "(the tag or commit it was fetched at)")
    header = {
        "name": cat.title, "source": f"{cat.repo}: {', '.join(cat.paths)}",
        "version": version, "url": f"https://github.com/{cat.repo}/tree/{version}",
        "license": cat.license,
        "method": "messages given as literals to the error and logging calls "
                  f"({'C: ' + ', '.join(sorted(C_CALLS)) + '; ' if name == 'libnvidia-container' else ''}"
                  "Go: fmt.Errorf, errors.New, log.Panic*/Fatal*, klog, logger errors and "
                  "warnings); formats whose literal text is short or only generic words dropped",
    }
    if release:
        header["spec_version" if name == "cdi" else "release"] = release
    return header, entries
