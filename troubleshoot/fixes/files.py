"""File changes done safely: new content computed first, written atomically, mode kept."""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import re
from pathlib import Path
from typing import Any, Mapping

from troubleshoot import safeio
from troubleshoot.errors import TroubleshootError
from troubleshoot.fixes.plan import LineMatch, LineSet, SetOption


def target(path: str, root: str | None) -> Path:
    """Where a file action lands: the path itself, or the same path under --root DIR, with
    every symlink on the way followed as inside the root (never out of it); `..` is refused."""
    return safeio.resolve_under(root, path)


def _where(tgt: Path, root: str | None) -> tuple[list[str], str]:
    parts = safeio.relative_to_root(root, tgt)
    if not parts:
        raise safeio.UnsafePath(f"{tgt} is the root itself, not a file")
    return parts[:-1], parts[-1]


def read_bytes(tgt: Path, root: str | None = None) -> bytes | None:
    """The current bytes of a resolved target, read without following a symlink."""
    folders, name = _where(tgt, root)
    try:
        fd = safeio.open_dir(root, folders)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        return safeio.read_in(fd, name)
    finally:
        os.close(fd)


@contextlib.contextmanager
def locked_folder(tgt: Path, root: str | None = None):
    """The target's folder (created when missing), open and locked: every change to a file is
    read, recomputed and written under this lock, so two fixes at once never lose a line."""
    folders, name = _where(tgt, root)
    fd = safeio.open_dir(root, folders, create=True)
    try:
        with safeio.locked_fd(fd):
            yield fd, name
    finally:
        os.close(fd)


def atomic_write(tgt: Path, data: bytes, mode: int | None = None, root: str | None = None) -> None:
    """Replace a resolved target atomically (temp file with O_EXCL and a random name)."""
    with locked_folder(tgt, root) as (fd, name):
        safeio.write_in(fd, name, data, mode)


def merged_structured(old: bytes | None, data: Mapping[str, Any], fmt: str, path: str) -> bytes:
    """`data` deep-merged into the mapping in `old`, every other key kept."""
    if old is None or not old.strip():
        base: Any = {}
    else:
        try:
            text = old.decode("utf-8")
            if fmt == "json":
                base = json.loads(text)
            else:
                import yaml

                base = yaml.safe_load(text)
        except (UnicodeDecodeError, ValueError, Exception) as exc:
            raise TroubleshootError(f"{path}: cannot merge into it, it is not valid {fmt.upper()} ({exc}); "
                                    f"fix or move it first") from None
    if not isinstance(base, dict):
        raise TroubleshootError(f"{path}: cannot merge into it, its top level is not a mapping")
    result = _deep_merge(base, data)
    if fmt == "json":
        return (json.dumps(result, indent=4) + "\n").encode()
    import yaml

    return yaml.safe_dump(result, sort_keys=False).encode()


def _deep_merge(base: dict, extra: Mapping) -> dict:
    out = dict(base)
    for k, v in extra.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def split_lines(text: str) -> list[str]:
    """The lines of a text with their endings. Only a line feed ends a line, as for the tools
    that read these files: str.splitlines() would also break at \\f, \\v, \\x1c-\\x1e, \\x85,
    U+2028 and U+2029, and rebuilding from it would rewrite lines the fix never touched."""
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _cut(line: str) -> tuple[str, str]:
    """(content, ending) of one line from split_lines: the ending is \\r\\n, \\n or nothing."""
    for end in ("\r\n", "\n"):
        if line.endswith(end):
            return line[:-len(end)], end
    return line, ""


def _joined(lines: list[str]) -> bytes:
    return "".join(lines).encode("utf-8", "surrogateescape")


def _appended(lines: list[str], line: str) -> bytes:
    """`line` added at the end, with the file's own line ending (CRLF files stay CRLF)."""
    ending = next((e for e in (_cut(x)[1] for x in lines) if e), "\n")
    if lines and not _cut(lines[-1])[1]:
        lines = lines[:-1] + [lines[-1] + ending]
    return _joined(lines + [line + ending])


def _is_comment(content: str) -> bool:
    return content.lstrip().startswith("#")


def _first_match(lines: list[str], pattern: str, skip_comments: bool) -> int | None:
    rx = re.compile(pattern)
    for i, existing in enumerate(lines):
        content = _cut(existing)[0]
        if not (skip_comments and _is_comment(content)) and rx.search(content):
            return i
    return None


def ensured_line(old: bytes | None, line: str, replaces: str | LineMatch | LineSet | None) -> bytes | None:
    """The file's new bytes with `line` in it; only the replaced (or appended) line differs.

    `replaces` as a regex: the first line it matches is replaced, unless `line` is already
    there. As a LineMatch: the first matching line (comments skipped) is replaced or has one
    option set; with nothing matching, `line` is appended only when the rule allows it, else
    the content is returned as it was (None: the file stays absent). As a LineSet: `line` with
    its first rule, then each further line with its own, all in the one result."""
    if isinstance(replaces, LineSet):
        new = ensured_line(old, line, replaces.first)
        for more, rule in replaces.more:
            new = ensured_line(new, more, rule)
        return new
    text = old.decode("utf-8", "surrogateescape") if old else ""
    lines = split_lines(text)
    present = line in (_cut(x)[0] for x in lines)
    if isinstance(replaces, LineMatch):
        i = _first_match(lines, replaces.pattern, replaces.skip_comments)
        if i is None:
            return old if present or not replaces.append else _appended(lines, line)
        content, ending = _cut(lines[i])
        lines[i] = (set_option(content, replaces.option) if replaces.option else line) + ending
        return _joined(lines)
    if present:
        return old or b""
    i = _first_match(lines, replaces, skip_comments=False) if replaces else None
    if i is not None:
        lines[i] = line + _cut(lines[i])[1]
        return _joined(lines)
    return _appended(lines, line)


def set_option(content: str, opt: SetOption) -> str:
    """One line with `opt` set in its comma-separated field, every other byte kept; the field
    is added when the line ends just before it (fstab without options)."""
    spans = [m.span() for m in re.finditer(r"\S+", content)]
    if len(spans) < opt.field:
        raise TroubleshootError(f"cannot set {opt.name}= in the line {content!r}: it has only {len(spans)} fields")
    if len(spans) == opt.field:
        end = spans[-1][1] if spans else 0
        return f"{content[:end]} {opt.name}={opt.value}{content[end:]}"
    start, end = spans[opt.field]
    options = content[start:end].split(",")
    return content[:start] + ",".join(_with_option(options, opt, content)) + content[end:]


def _with_option(options: list[str], opt: SetOption, content: str) -> list[str]:
    at = [i for i, o in enumerate(options) if o.partition("=")[0] == opt.name]
    if not at:
        return options + [f"{opt.name}={opt.value}"]
    if opt.never_lower:
        have = options[at[-1]].partition("=")[2]  # mount(8): the last one counts
        have_bytes, want_bytes = size_bytes(have), size_bytes(opt.value)
        if have_bytes is None or want_bytes is None:
            raise TroubleshootError(f"cannot tell whether {opt.name}={opt.value} is larger than {opt.name}={have} in "
                                    f"the line {content!r}; change it by hand")
        if have_bytes >= want_bytes:
            return options
    return [f"{opt.name}={opt.value}" if i in at else o for i, o in enumerate(options)]


_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50, "e": 1 << 60}


def size_bytes(size: str) -> int | None:
    """A tmpfs size (bytes, or k/m/g/t/p/e suffixed) in bytes; None for what is not one (a
    percentage of memory, a typo)."""
    m = re.fullmatch(r"(\d+)([kmgtpeKMGTPE]?)", size.strip())
    return int(m.group(1)) * _UNITS[m.group(2).lower()] if m else None


def diff(path: str, old: bytes | None, new: bytes | None) -> str:
    """A unified diff as diff(1) writes it, with "\\ No newline at end of file" after a last
    line that has no line ending, so that lines are never shown glued together."""
    a = split_lines(old.decode("utf-8", "replace")) if old is not None else []
    b = split_lines(new.decode("utf-8", "replace")) if new is not None else []
    label_a = path if old is not None else "/dev/null"
    label_b = path if new is not None else "/dev/null"
    return "".join(ln if ln.endswith("\n") else ln + "\n\\ No newline at end of file\n"
                   for ln in difflib.unified_diff(a, b, label_a, label_b))


def check_fstab(old: bytes | None, new: bytes, on_this_machine: bool) -> None:
    """Refuse an fstab the system would misread: `findmnt --verify --tab-file` on the new
    content, compared with the old (problems already there are not ours). Under --root only
    parse errors count: the other checks look at this machine's devices and folders."""
    import shutil
    import subprocess
    import tempfile

    findmnt = shutil.which("findmnt")
    if findmnt is None:
        return

    def verify(data: bytes) -> tuple[int, int, str]:
        with tempfile.TemporaryDirectory(prefix="troubleshoot-fstab-") as d:  # private (0700)
            path = os.path.join(d, "fstab")
            with open(path, "wb") as f:
                f.write(data)
            try:
                p = subprocess.run([findmnt, "--verify", "--tab-file", path], capture_output=True, text=True,
                                   timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                return 0, 0, ""
        out = (p.stdout + p.stderr).replace(path, "fstab")
        m = re.search(r"(\d+) parse errors?, (\d+) errors?", out)
        return (int(m.group(1)), int(m.group(2)), out) if m else (0, 0, out)

    old_parse, old_errors, _ = verify(old or b"")
    new_parse, new_errors, report = verify(new)
    if new_parse > old_parse or (on_this_machine and new_errors > old_errors):
        raise TroubleshootError("the new /etc/fstab does not pass `findmnt --verify`; nothing was changed:\n"
                                + report.strip())
