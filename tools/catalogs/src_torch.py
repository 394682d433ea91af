"""PyTorch's CUDA-related user-facing messages, read from pytorch/pytorch's own source.

`torch-cuda`: the messages of TORCH_CHECK, TORCH_WARN, AT_ERROR and their kin in c10/cuda/,
aten/src/ATen/cuda/, aten/src/ATen/cudnn/, aten/src/ATen/native/{cuda,cudnn}/ and
torch/csrc/cuda/, and the raises and warnings of torch/cuda/ and torch/backends/{cuda,cudnn}/.
A C++ message is the macro's arguments streamed together: string literals are the text,
anything else (a size, a device index, a stringified expression) a wildcard; a Python message
is a string, an f-string, a concatenation, a .format() or a % format, read with `ast`.

A log line holds one line of a message, so the pattern is of the first line of it that says
enough; the key is the file's name (its module for Python) and a slug of the message's first
words, so it survives the code moving; `where` is the file only, for the same reason.
"""

from __future__ import annotations

import ast
import hashlib
import re
from pathlib import Path

from tools.catalogs.common import CatalogError, Entry, split_args

SOURCE = ("github.com/pytorch/pytorch: c10/cuda, aten/src/ATen/{cuda,cudnn,native/cuda,native/cudnn}, "
          "torch/csrc/cuda (TORCH_CHECK and kin), torch/cuda and torch/backends (raises, warnings)")
NAMES = ("torch-cuda",)
REPO_URL = "https://github.com/pytorch/pytorch"
LICENSE = "BSD-3-Clause"

CPP_ROOTS = ("c10/cuda", "aten/src/ATen/cuda", "aten/src/ATen/cudnn", "aten/src/ATen/native/cuda",
             "aten/src/ATen/native/cudnn", "torch/csrc/cuda")
PY_ROOTS = ("torch/cuda", "torch/backends/cuda", "torch/backends/cudnn")
CPP_SUFFIXES = (".h", ".hpp", ".cuh", ".cpp", ".cu", ".cc")
# Roots whose every check concerns CUDA; elsewhere (the operators' kernels, their argument
# checks) a message is kept only when it names the CUDA stack.
CUDA_ONLY_ROOTS = ("c10/cuda", "torch/cuda/__init__.py", "torch/cuda/memory.py", "torch/backends/cudnn")
STACK_WORDS = re.compile(r"CUDA|cuDNN|cudnn|CUDNN|cuBLAS|cublas|CUBLAS|GPU|NVIDIA|driver|device-side")
# How many leading arguments of each macro are not the message (a condition, an error type).
MACROS = {"TORCH_CHECK": 1, "TORCH_CHECK_WITH": 2, "TORCH_CHECK_VALUE": 1, "TORCH_CHECK_TYPE": 1,
          "TORCH_CHECK_INDEX": 1, "TORCH_CHECK_NOT_IMPLEMENTED": 1, "TORCH_CHECK_LINALG": 1,
          "AT_ERROR": 0, "TORCH_WARN": 0, "TORCH_WARN_ONCE": 0, "C10_THROW_ERROR": 1}
MACRO_CALL = re.compile(r"\b(" + "|".join(sorted(MACROS, key=len, reverse=True)) + r")\s*\(")
MIN_LITERAL = 16   # literal characters in the line a pattern matches; fewer match ordinary lines
MIN_RUN = 10       # and at least one literal run this long, so the pattern is not mostly wildcards
SLUG_WORDS = 7
CUT_AFTER = 32     # literal characters before the pattern may end at a sentence's end
WILD = None        # a piece of a message the source fills in at run time


def parse(name: str, tree: Path, version: str | None) -> tuple[dict, list[Entry]]:
    if name != "torch-cuda":
        raise CatalogError(f"{name}: not a catalog of this generator")
    found = [r for r in CPP_ROOTS + PY_ROOTS if (tree / r).is_dir()]
    if not found:
        raise CatalogError(f"{tree}: none of {', '.join(CPP_ROOTS + PY_ROOTS)}: not a PyTorch source tree")
    raw: list[tuple[str, str, list]] = []
    for root in found:
        for path in sorted((tree / root).rglob("*")):
            rel = path.relative_to(tree).as_posix()
            if path.suffix in CPP_SUFFIXES and path.is_file():
                raw += [(rel, "", p) for p in _cpp_messages(_read(path))]
            elif path.suffix == ".py" and path.is_file():
                raw += [(rel, fn, p) for fn, p in _py_messages(_read(path), rel)]
    return _header(tree, version), _entries(raw)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise CatalogError(f"{path}: {e}") from None


def _header(tree: Path, version: str | None) -> dict:
    """The release and commit come from torch/version.py where the tree has it (a wheel's
    torch/ does); the version argument otherwise."""
    head = {"name": "PyTorch: CUDA, cuDNN and cuBLAS messages", "source": f"pytorch/pytorch {SOURCE.split(': ', 1)[1]}",
            "license": LICENSE}
    text = (tree / "torch/version.py").read_text(encoding="utf-8") if (tree / "torch/version.py").is_file() else ""
    release = re.search(r"^__version__\s*=\s*'([^']+)'", text, re.M)
    commit = re.search(r"^git_version\s*=\s*'([0-9a-f]{40})'", text, re.M)
    ref = version or (commit.group(1) if commit else "main")
    head["version"] = ref
    head["url"] = f"{REPO_URL}/tree/{ref}"
    if release:
        head["release"] = release.group(1)
    if commit:
        head["commit"] = commit.group(1)
    return head


# --- turning pieces into entries ----------------------------------------------------------

def _entries(raw: list[tuple[str, str, list]]) -> list[Entry]:
    out: dict[str, Entry] = {}
    seen: set[tuple[str, str]] = set()
    for rel, func, pieces in raw:
        line = _first_line(pieces)
        if line is None or not _relevant(rel, pieces):
            continue
        pattern = _pattern(_first_sentences(line))
        if (rel, pattern) in seen:
            continue
        seen.add((rel, pattern))
        key = f"{_stem(rel)}-{_slug(line)}"
        if key in out:
            # Two messages of one file that start alike: each keyed by its own pattern too,
            # so neither key depends on whether the other is in the tree.
            key = f"{key}-{hashlib.sha1(pattern.encode()).hexdigest()[:6]}"
        text = "".join(p for p in pieces if p is not WILD)
        message = text.strip() if WILD not in pieces and "\n" not in text.strip() else None
        extra = {"function": func} if func else {}
        out[key] = Entry(key=key, message=message, pattern=pattern, where=rel, extra=extra)
    return list(out.values())


def _first_line(pieces: list) -> list | None:
    """The first line of the message with enough literal text to be told apart."""
    lines: list[list] = [[]]
    for p in pieces:
        if p is WILD:
            lines[-1].append(WILD)
            continue
        parts = p.split("\n")
        lines[-1].append(parts[0])
        lines.extend([part] for part in parts[1:])
    for ln in lines:
        lits = [p.strip() for p in ln if p is not WILD]
        if sum(len(x) for x in lits) >= MIN_LITERAL and max((len(x) for x in lits), default=0) >= MIN_RUN:
            return ln
    return None


def _first_sentences(pieces: list) -> list:
    """The line up to the end of the sentence that makes it distinctive: the opening of a
    message outlives the advice after it, so older and newer releases match alike."""
    out: list = []
    lit = 0
    for p in pieces:
        if p is WILD:
            out.append(p)
            continue
        for m in re.finditer(r"\.(?=\s)", p):
            if lit + len(p[:m.end()].strip()) >= CUT_AFTER:
                out.append(p[:m.end()])
                return out
        out.append(p)
        lit += len(p.strip())
    return out


def _relevant(rel: str, pieces: list) -> bool:
    if rel.startswith(CUDA_ONLY_ROOTS):
        return True
    return bool(STACK_WORDS.search("".join(p for p in pieces if p is not WILD)))


def _pattern(pieces: list) -> str:
    out: list[str] = []
    for p in pieces:
        if p is WILD:
            if out and out[-1] != ".*?":
                out.append(".*?")
            elif not out:
                out.append(".*?")
        elif p:
            out.append(re.escape(p))
    text = "".join(out)
    # A wildcard at either end matches nothing more; the text around it is what matters.
    while text.startswith(".*?"):
        text = text[3:]
    while text.endswith(".*?"):
        text = text[:-3]
    return _trim(text)


def _trim(pattern: str) -> str:
    """Leading and trailing whitespace of the literal ends: a log line may have lost it."""
    pattern = re.sub(r"^(?:\\?\s|\\ )+", "", pattern)
    return re.sub(r"(?:\\?\s|\\ )+$", "", pattern)


def _stem(rel: str) -> str:
    path = Path(rel)
    if path.suffix == ".py":
        parts = list(path.with_suffix("").parts[1:])
        if parts and parts[-1] == "__init__":
            parts.pop()
        return "-".join(p.strip("_") for p in parts).lower()
    return path.stem.lower()


def _slug(pieces: list) -> str:
    text = " ".join(p for p in pieces if p is not WILD)
    words = re.findall(r"[A-Za-z0-9]+", text)[:SLUG_WORDS]
    return "-".join(w.lower() for w in words) or "message"


# --- C++: the message arguments of TORCH_CHECK and kin -------------------------------------

STRING_LIT = re.compile(r'(?:u8|u|U|L)?"((?:[^"\\\n]|\\.)*)"')
ESCAPES = {"n": "\n", "t": "\t", '"': '"', "'": "'", "\\": "\\", "r": "", "0": ""}


def _cpp_messages(text: str) -> list[list]:
    # A macro's body spans lines joined by backslashes; comments hold no messages.
    text = re.sub(r"\\\r?\n", " ", text)
    text = _strip_comments(text)
    out = []
    for m in MACRO_CALL.finditer(text):
        if text[:m.start()].rstrip().endswith("#define"):
            continue
        args = split_args(text, m.end())
        if args is None:
            continue
        pieces: list = []
        for arg in args[MACROS[m.group(1)]:]:
            pieces += _arg_pieces(arg)
        if any(p is not WILD and p.strip() for p in pieces):
            out.append(pieces)
    return out


def _strip_comments(text: str) -> str:
    """Comments out, string and character literals kept as they are."""
    token = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|//[^\n]*|/\*.*?\*/', re.S)
    return token.sub(lambda m: " " if m.group(0)[0] == "/" else m.group(0), text)


def _arg_pieces(arg: str) -> list:
    """String literals (adjacent ones run together) as text; anything else a wildcard."""
    pieces: list = []
    pos = 0
    for m in STRING_LIT.finditer(arg):
        if arg[pos:m.start()].strip():
            pieces.append(WILD)
        pieces.append(_unescape(m.group(1)))
        pos = m.end()
    if arg[pos:].strip():
        pieces.append(WILD)
    return pieces


def _unescape(s: str) -> str:
    return re.sub(r"\\(.)", lambda m: ESCAPES.get(m.group(1), m.group(1)), s)


# --- Python: raise X(msg) and warnings.warn(msg) -------------------------------------------

def _py_messages(text: str, rel: str) -> list[tuple[str, list]]:
    try:
        tree = ast.parse(text)
    except SyntaxError as e:
        raise CatalogError(f"{rel}:{e.lineno}: {e.msg}") from None
    out: list[tuple[str, list]] = []
    _walk_py(tree, "", {}, out)
    return out


def _walk_py(node: ast.AST, func: str, names: dict, out: list) -> None:
    """Every raise and warning under `node`. `names` holds the strings and lists of strings
    assigned so far in the enclosing scopes, for `msg = "..."; raise X(msg)` and for a
    message built as lines appended to a list and joined."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            _walk_py(child, child.name, dict(names), out)
            continue
        _remember(child, names)
        msg = _message_arg(child)
        if msg is not None:
            pieces = _expr_pieces(msg, names)
            if any(p is not WILD and p.strip() for p in pieces):
                out.append((func, pieces))
        _walk_py(child, func, names, out)


def _remember(node: ast.AST, names: dict) -> None:
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        target = node.targets[0].id
        items = _list_items(node.value, names)
        if items is not None:
            names[target] = ("lines", items)
            return
        pieces = _expr_pieces(node.value, names)
        if any(p is not WILD for p in pieces):
            names[target] = pieces
    elif (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
          and isinstance(node.value.func, ast.Attribute) and node.value.func.attr == "append"
          and isinstance(node.value.func.value, ast.Name) and node.value.args):
        held = names.get(node.value.func.value.id)
        if isinstance(held, tuple):
            held[1].append(_expr_pieces(node.value.args[0], names))


def _list_items(node: ast.expr, names: dict) -> list | None:
    """The elements of a list literal (a comprehension is one unknown element)."""
    if isinstance(node, ast.List):
        return [_expr_pieces(e, names) for e in node.elts]
    if isinstance(node, ast.ListComp):
        return [[WILD]]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _list_items(node.left, names), _list_items(node.right, names)
        if left is not None and right is not None:
            return left + right
    return None


def _message_arg(node: ast.AST) -> ast.expr | None:
    """The message of `raise X("...")` or `warnings.warn("...")`."""
    call = None
    if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
        call = node.exc
    elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        f = node.value.func
        if (isinstance(f, ast.Attribute) and f.attr == "warn") or (isinstance(f, ast.Name) and f.id == "warn"):
            call = node.value
    if call is None or not call.args:
        return None
    return call.args[0]


def _expr_pieces(node: ast.expr, names: dict) -> list:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return [v.value if isinstance(v, ast.Constant) else WILD for v in node.values]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _expr_pieces(node.left, names) + _expr_pieces(node.right, names)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        fmt = _literal(node.left, names)
        if fmt is not None:
            return _split_format(fmt, r"%[-+ #0]*(?:\d+|\*)?(?:\.\d+)?[a-zA-Z%]")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return _method_pieces(node, names)
    if isinstance(node, ast.Name) and isinstance(names.get(node.id), list):
        return list(names[node.id])
    return [WILD]


def _method_pieces(node: ast.Call, names: dict) -> list:
    """"...".format(...), and "sep".join(lines) over a list of lines built in this scope."""
    attr, owner = node.func.attr, node.func.value
    if attr == "format":
        fmt = _literal(owner, names)
        if fmt is not None:
            return _split_format(fmt, r"\{[^{}]*\}")
    if attr == "join" and _is_str(owner) and node.args and isinstance(node.args[0], ast.Name):
        held = names.get(node.args[0].id)
        if isinstance(held, tuple):
            out: list = []
            for i, item in enumerate(held[1]):
                out += ([owner.value] if i else []) + item
            return out
    return [WILD]


def _literal(node: ast.expr, names: dict) -> str | None:
    """A plain string, written out or held in a name."""
    if _is_str(node):
        return node.value
    if isinstance(node, ast.Name):
        held = names.get(node.id)
        if isinstance(held, list) and all(isinstance(p, str) for p in held):
            return "".join(held)
    return None


def _is_str(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _split_format(text: str, conv: str) -> list:
    pieces: list = []
    pos = 0
    for m in re.finditer(conv, text):
        pieces += [text[pos:m.start()], WILD]
        pos = m.end()
    pieces.append(text[pos:])
    return pieces
