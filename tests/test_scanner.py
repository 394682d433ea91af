import io
import re

import pytest

from troubleshoot import scan
from troubleshoot.scan import ScanPattern, ansi, reader, scan_stream, scan_text, stream, tally, verify

BACKENDS = (["re"] + (["re2"] if scan.re2_available() else [])
            + (["hyperscan"] if scan.hyperscan_available() else []))

OOM = ScanPattern("oom", "log", re.compile(r"CUDA out of memory\. Tried to allocate (?P<req>[\d.]+ [KMG]iB)", re.ASCII))
TB = ScanPattern("tb", "log", re.compile(r"^Traceback \(most recent call last\)", re.ASCII))
BUS = ScanPattern("bus", "log", re.compile(r"(?i)^bus error\b", re.ASCII))
NOLIT = ScanPattern("nolit", "log", re.compile(r"\d+ [a-z]+ed$", re.ASCII))
PATS = [OOM, TB, BUS]


def hits(result, group):
    h = result.get(group, "log")
    return [(x.line, x.text) for x in h.lines] if h else []


@pytest.mark.parametrize("backend", BACKENDS)
def test_progress_bars_ansi_crlf_and_bad_utf8(backend):
    log = (b"Epoch 1: 10%|#\rEpoch 1: 50%|#####\rTraceback (most recent call last):\n"
           b"\x1b[31mRuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\x1b[0m\r\n"
           b"\xff\xfe garbage \x00 bytes\n"
           b"Bus error (core dumped)\r\n"
           b"RuntimeError: CUDA out of memory. Tried to allocate 4.00 MiB")
    r = scan_stream(io.BytesIO(log), PATS, backend)
    assert r.total_lines == 5
    assert hits(r, "tb") == [(1, "Traceback (most recent call last):")]
    assert hits(r, "oom") == [(2, "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"),
                              (5, "RuntimeError: CUDA out of memory. Tried to allocate 4.00 MiB")]
    assert r.get("oom", "log").captures == {"req": "4.00 MiB"}
    assert hits(r, "bus") == [(4, "Bus error (core dumped)")]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("chunk", [7, 64, 1 << 20])
def test_line_numbers_are_exact_across_chunk_boundaries(backend, chunk):
    lines = [f"step {i} loss 0.1" for i in range(500)]
    want = [37, 38, 255, 499]
    for n in want:
        lines[n - 1] = f"x RuntimeError: CUDA out of memory. Tried to allocate {n}.00 MiB"
    data = ("\n".join(lines) + "\n").encode()
    r = scan_stream(io.BytesIO(data), [OOM], backend, chunk_size=chunk)
    got = r.get("oom", "log")
    assert r.total_lines == 500
    assert got.count == 4 and [h.line for h in got.lines] == want


@pytest.mark.parametrize("backend", BACKENDS)
def test_patterns_without_literals_still_match(backend):
    r = scan_text("a\n12 jobs failed\nb\n3 failed\n", [NOLIT], backend)
    assert hits(r, "nolit") == [(4, "3 failed")]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_match_never_spans_two_lines(backend):
    pat = ScanPattern("x", "log", re.compile(r"foo[^z]*bar", re.ASCII))
    r = scan_text("foo\nbar\nfoo and bar\n", [pat], backend)
    assert hits(r, "x") == [(3, "foo and bar")]


@pytest.mark.parametrize("backend", BACKENDS)
def test_evidence_is_bounded_and_counts_every_line(backend):
    text = "".join(f"RuntimeError: CUDA out of memory. Tried to allocate {i}.00 MiB\n" for i in range(1, 10001))
    r = scan_text(text, [OOM], backend)
    h = r.get("oom", "log")
    assert h.count == 10000
    assert [x.line for x in h.lines] == [1, 2, 3, 9998, 9999, 10000]
    assert h.captures["req"] == "10000.00 MiB"


@pytest.mark.parametrize("backend", BACKENDS)
def test_huge_line_without_newline(backend, monkeypatch):
    monkeypatch.setattr(reader, "LONG_LINE", 4 << 20)
    data = b"a" * (3 << 20) + b" CUDA out of memory. Tried to allocate 1.00 GiB" + b"b" * (7 << 20)
    r = scan_stream(io.BytesIO(data), [OOM], backend, chunk_size=1 << 20)
    h = r.get("oom", "log")
    assert r.total_lines == 1 and h.count == 1 and h.lines[0].line == 1
    assert len(h.lines[0].text) <= verify.MAX_EVIDENCE_CHARS


def test_backends_agree_on_a_mixed_log():
    if len(BACKENDS) < 2:
        pytest.skip("neither re2 nor hyperscan installed")
    import random

    rnd = random.Random(7)
    pieces = ["step {} loss 0.5", "Traceback (most recent call last):", "BUS ERROR here",
              "RuntimeError: CUDA out of memory. Tried to allocate 3.5 GiB", "\x1b[1mbold\x1b[0m", "p\r\rq", "é ü"]
    text = "\n".join(rnd.choice(pieces).format(i) for i in range(5000))
    results = [scan_text(text, PATS + [NOLIT], b) for b in BACKENDS]
    for group in ("oom", "tb", "bus", "nolit"):
        counts = {b: (r.get(group, "log").count if r.get(group, "log") else 0) for b, r in zip(BACKENDS, results)}
        assert len(set(counts.values())) == 1, (group, counts)


def test_empty_input():
    r = scan_text("", PATS)
    assert r.total_lines == 0 and r.hits == {}


@pytest.mark.slow  # every example through every engine (several seconds); the default suite checks each engine's own cases
def test_engines_agree_on_every_shipped_rule_example():
    """All shipped patterns at once over every real line in the rules' examples: the fast
    engines propose lines, the verifier decides, so each engine must report the same hits."""
    if len(BACKENDS) < 2:
        pytest.skip("neither re2 nor hyperscan installed")
    from troubleshoot.engine.diagnose import scan_patterns
    from troubleshoot.engine.ruleset import load_ruleset

    rules = load_ruleset(use_config=False).rules
    pats = scan_patterns(rules)
    texts = [t for r in rules for t in (*r.examples.match, *r.examples.no_match)]
    assert len(texts) > 500

    def summary(result):
        return {k: (v.count, tuple((h.line, h.text) for h in v.lines), tuple(sorted(v.captures.items())))
                for k, v in result.hits.items()}

    log = "\n".join(texts)
    results = {b: summary(scan_text(log, pats, b)) for b in BACKENDS}
    first = results[BACKENDS[0]]
    for b, got in results.items():
        assert got == first, b


def test_hyperscan_database_is_cached_and_reloaded(tmp_path, monkeypatch):
    if not scan.hyperscan_available():
        pytest.skip("hyperscan not installed")
    from troubleshoot.scan import hsdb

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    hsdb._database_cached.cache_clear()
    first = scan_text("x\nRuntimeError: CUDA out of memory. Tried to allocate 2 GiB\n", [OOM], "hyperscan")
    assert list((tmp_path / "troubleshoot" / "hyperscan").glob("*.cache"))
    hsdb._database_cached.cache_clear()  # as a new process would: from the file
    again = scan_text("x\nRuntimeError: CUDA out of memory. Tried to allocate 2 GiB\n", [OOM], "hyperscan")
    assert again.backend == first.backend == "hyperscan"
    assert hits(again, "oom") == hits(first, "oom") == [(2, "RuntimeError: CUDA out of memory. Tried to allocate 2 GiB")]


@pytest.mark.parametrize("part", ["ids", "database"])
def test_a_damaged_database_entry_is_not_loaded(tmp_path, monkeypatch, part):
    """The ids are checked by the entry's CRC; the database's bytes, left out of it, by
    hyperscan as it loads them. Either damaged: no database is loaded, and a scan compiles it
    again and finds the same lines."""
    if not scan.hyperscan_available():
        pytest.skip("hyperscan not installed")
    from troubleshoot import usercache
    from troubleshoot.scan import hsdb

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    hsdb._database_cached.cache_clear()
    text = "x\nRuntimeError: CUDA out of memory. Tried to allocate 2 GiB\n"
    first = scan_text(text, [OOM], "hyperscan")
    (entry,) = (tmp_path / "troubleshoot" / "hyperscan").glob("*.cache")
    hsdb._database_cached.cache_clear()
    assert hsdb.database([OOM.inline_source], compile_if_missing=False) is not None  # the sound entry loads
    sound = entry.read_bytes()
    head, (ids, body) = usercache.unpack_entry(sound, 1)
    damaged = bytearray(ids if part == "ids" else body)
    damaged[len(damaged) // 2] ^= 0xFF
    tail = bytes(damaged) + body if part == "ids" else ids + bytes(damaged)
    entry.write_bytes(sound[: -len(ids + body)] + tail)  # the sound entry's CRC over damaged bytes
    hsdb._database_cached.cache_clear()
    assert hsdb.database([OOM.inline_source], compile_if_missing=False) is None
    hsdb._database_cached.cache_clear()
    again = scan_text(text, [OOM], "hyperscan")
    assert again.backend == "hyperscan" and hits(again, "oom") == hits(first, "oom")


def test_a_database_key_names_its_patterns_flags_and_place_alone():
    from troubleshoot.scan import hsdb

    key = hsdb._key(["a\0b", "c"], frozenset())
    assert key == hsdb._key(["a\0b", "c"], frozenset())
    others = [hsdb._key(["a", "b\0c"], frozenset()), hsdb._key(["a\0b", "c"], frozenset({1})),
              hsdb._key(["a\0b", "c"], frozenset(), ((0, 1),)), hsdb._key(["a\0b", "c"], frozenset(), (), 3),
              hsdb._key(["a\0b", "c", ""], frozenset())]
    assert len({key, *others}) == 1 + len(others)


def test_a_cache_file_others_can_write_is_not_loaded(tmp_path, monkeypatch):
    if not scan.hyperscan_available():
        pytest.skip("hyperscan not installed")
    import os

    from troubleshoot.scan import hsdb

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    hsdb._database_cached.cache_clear()
    scan_text("CUDA out of memory. Tried to allocate 2 GiB\n", [OOM], "hyperscan")
    (db_file,) = (tmp_path / "troubleshoot" / "hyperscan").glob("*.cache")
    db_file.write_bytes(b"rejected:\nnot a database")
    os.chmod(db_file, 0o666)
    hsdb._database_cached.cache_clear()
    # Not trusted: compiled afresh (and the planted bytes never reach the deserialiser).
    r = scan_text("CUDA out of memory. Tried to allocate 2 GiB\n", [OOM], "hyperscan")
    assert hits(r, "oom") and r.backend == "hyperscan"


def test_a_replacement_character_in_a_pattern_matches_invalid_bytes_in_every_engine():
    """A rule written from a line with bytes that are not UTF-8 holds U+FFFD where the verifier
    reads them: the raw bytes hyperscan scans must make that line a candidate too."""
    pat = ScanPattern("bad", "log", "DATASET /mnt/x\ufffd+ NOT MOUNTED")
    for raw in (b"ERROR DATASET /mnt/x\xff NOT MOUNTED\n", b"ERROR DATASET /mnt/x\xe2\x82 NOT MOUNTED\n",
                "ERROR DATASET /mnt/x\ufffd NOT MOUNTED\n".encode()):
        for b in BACKENDS:
            r = scan_stream(io.BytesIO(b"ok\n" + raw), [pat], b)
            assert [line for line, _ in hits(r, "bad")] == [2], (b, raw)


def test_prefilter_forms_only_widen():
    from troubleshoot.scan.prefilter import prefilter_source

    # Anchors also hold at a \r (a progress bar's segment starts there); the database reads
    # them per line, so an anchored pattern is only tried at line and segment starts.
    assert prefilter_source(r"^Traceback \(most") == r"(?:^|\r)Traceback \(most"
    assert prefilter_source(r"[$^x]a\$$") == r"[$^x]a\$(?:$|\r)"
    assert prefilter_source(r"\AFoo\Z") == r"(?:^|\r)Foo(?:$|\r)"
    assert prefilter_source(r"couldn.t") == r"couldn.{1,4}t"
    assert prefilter_source(r"[a-z]+\d") == r"[a-z]\d"
    # Edges trimmed to what every match contains (up to an anchor): fewer match ends to report.
    assert prefilter_source(r"(?i)(?:max )?allocated:\s*(?P<used>\d+(?:\.\d+)?)\s*(?:GiB)?") == \
        r"(?i)allocated:\s*\d"
    assert prefilter_source(r"(?i)(?:max )?allocated:\s*(?P<used>\d+)\s*(?:GiB)?$") == \
        r"(?i)allocated:\s*(?P<used>\d+)\s*(?:GiB)?(?:$|\r)"
    assert prefilter_source(r"^\s*(?P<k>\d+)\s+x") == r"(?:^|\r)\s*(?P<k>\d+)\s+x"
    # A leading word most training-log lines hold ("loss", "grad norm") goes when a rarer
    # literal follows it; not when nothing rarer does, or the run is more than that word.
    assert prefilter_source(r"\bloss (?P<v>nan|inf)\b") == r"(?P<v>nan|inf)"
    assert prefilter_source(r"loss['\"]?\s*[:=]\s*['\"]?(?P<value>nan|NaN|-?inf)\b") == \
        r"[:=]\s*['\"]?(?P<value>nan|NaN|-?inf)"
    assert prefilter_source(r"grad[ _-]norm\s*[:=]\s*(?P<v>nan)") == r"[:=]\s*nan"
    assert prefilter_source(r"loss: (?P<v>\d+)") == r"loss: \d"
    assert prefilter_source(r"loss: (?P<v>nan|step)") == r"loss: (?P<v>nan|step)"
    assert prefilter_source(r"loss scale (?P<v>\d+)") == r"loss scale \d"
    assert prefilter_source(r"a|b") == r"a|b" and prefilter_source(r"x?") == r"x?"
    assert prefilter_source(r"(?:ab)+c") == r"abc" and prefilter_source(r"a{2,5}b{3}") == r"a{2}b{3}"
    assert prefilter_source(r"(a)x\1") == r"(a)x\1"  # a back-reference keeps its group
    # Before an unbounded repeat that precedes a long literal, the pattern is dropped: hyperscan
    # would run that prefix at each of its own short literals ("nccl", a hex digit).
    assert prefilter_source(r"(?i:nccl).*unhandled system error") == r"unhandled system error"
    assert prefilter_source(r"(?i)0/(?P<n>\d+) nodes:.*Insufficient nvidia\.com/gpu") == \
        r"(?i)Insufficient nvidia\.com/gpu"
    assert prefilter_source(r"[0-9a-f]{4}:\d: (?P<a>[\d.]+ Gb/s) available PCIe") == r" Gb/s available PCIe"
    # Not when the longest literal comes first, is short, or a back-reference needs its group.
    assert prefilter_source(r"NCCL INFO Channel \d+ : \d+ via P2P") == r"NCCL INFO Channel \d+ : \d+ via P2P"
    assert prefilter_source(r"kill.*is nan") == r"kill.*is nan"
    assert prefilter_source(r"loss.*is nan") == r"is nan"  # its leading word is a common one
    assert prefilter_source(r"(\w+) said.*then \1 said again") == r"(\w+) said.*then \1 said again"


@pytest.mark.parametrize("pattern,text", [
    (r"couldn.t connect", "couldn’t connect"),
    (r"^Error: [^ ]+ failed$", "x\rError: ünïcödé failed"),
    (r"path \S\S\S end", "path é€𝄞 end"),
    (r"a.?b", "a€b"),
    (r"x\W{2}y", "x——y"),
    (r"é*x", "x"),
    (r"[–—] sep", "— sep"),
    (r"(?i)(?P<maxp>max )?allocated: (?P<used>\d+(?:\.\d+)?)\s*(?:GiB)?", "Max ALLOCATED: 12.5 GiB"),
    (r"\btimeout\b after (?P<s>\d+)s(?!ec)", "timeout after 30s"),
    (r"(?i:nccl) .* unhandled system error", "NCCL WARN x unhandled system error"),
])
def test_prefilter_form_matches_wherever_the_pattern_does(pattern, text):
    """The form, read as a bytes regex (as hyperscan reads it), finds every line the pattern
    finds in the decoded text, multi-byte characters and \\r segments included."""
    from troubleshoot.scan.prefilter import prefilter_source

    assert any(re.search(pattern, seg, re.ASCII) for seg in text.split("\r"))
    assert re.search(prefilter_source(pattern).encode(), text.encode())


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("chunk", [64, 1 << 20])
def test_escape_sequences_inside_a_match(backend, chunk):
    """Colour codes in the middle of an error message: every engine sees the cleaned line."""
    log = (b"x" * 50 + b"\n" + b"RuntimeError: CUDA \x1b[1;31mout of memory\x1b[0m. Tried to allocate \x1b[1m2.00 GiB\n"
           + b"\x1b[32mok\x1b[0m\n" * 5 + b"CUDA out of memory. Tried to allocate 1.00 MiB\n")
    r = scan_stream(io.BytesIO(log), [OOM], backend, chunk_size=chunk)
    assert hits(r, "oom") == [(2, "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"),
                              (8, "CUDA out of memory. Tried to allocate 1.00 MiB")]


@pytest.mark.parametrize("backend", BACKENDS)
def test_context_pattern_found_after_a_near_miss_in_the_same_chunk(backend):
    """Context patterns are reported once per chunk by hyperscan: a first report that the
    verifier rejects (the anchor is mid-line) must not hide a real match further on."""
    ctx = ScanPattern("r", "with_log:0", r"^\s*Link Width\s*$")
    log = "pcie: Link Width x16 mid-line\n  Link Width  x\nfoo\n        Link Width\nbar\n        Link Width\n"
    r = scan_text(log, [ctx, OOM], backend)
    got = r.get("r", "with_log:0")
    assert got is not None and got.first_line == 4


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_capped_pattern_that_hyperscan_rejects_stays_retired(backend, monkeypatch):
    """`.*` matches the empty string: hyperscan refuses it and RE2 finds it; once capped it is
    retired there too, across chunks."""
    monkeypatch.setattr(tally, "HIT_CAP", 5)
    every = ScanPattern("every", "log", r".*")
    data = "".join(f"step {i}\n" for i in range(300)) + "CUDA out of memory. Tried to allocate 1.00 GiB\n"
    r = scan_stream(io.BytesIO(data.encode()), [every, OOM], backend, chunk_size=64)
    assert r.get("every", "log").count == 5 and r.get("every", "log").capped
    assert hits(r, "oom") == [(301, "CUDA out of memory. Tried to allocate 1.00 GiB")]


@pytest.mark.parametrize("chunk", [97, 1 << 20])
def test_engines_agree_when_colour_codes_split_matches(chunk):
    """hyperscan reads raw chunks and rescans only the coloured lines, stripped: a match that
    exists only once the escapes are gone (log and context patterns alike, a context pattern
    first seen on a coloured line that does not confirm it) is found as by the engines that
    strip whole chunks."""
    if len(BACKENDS) < 2:
        pytest.skip("neither re2 nor hyperscan installed")
    import random

    ctx = ScanPattern("r", "with_log:0", r"^\s*NCCL version (?P<v>[\d.]+)$")
    pats = [OOM, TB, ctx, ScanPattern("w", "log", r"Watchdog caught collective operation timeout")]
    rnd = random.Random(11)
    pieces = ["step {} ok", "\x1b[32mRuntimeError: CUDA \x1b[1mout of memory\x1b[0m. Tried to allocate {}.0 MiB",
              "x NCCL version 2.{}.3", "\x1b[2K\rNCCL \x1b[33mversion\x1b[0m 2.{}.1", "\x1b[1mWatchdog caught\x1b[0m collective operation timeout",
              "\x1b[31mTraceback (most recent call last)\x1b[0m", "plain \x1b[0m{}", "Watchdog caught collective op"]
    text = "\n".join(rnd.choice(pieces).format(i) for i in range(3000))

    def summary(result):
        # A context pattern counts as seen: engines may stop looking at different points after
        # the first hit, so only that one is compared.
        return {k: ((v.count, tuple((h.line, h.text) for h in v.lines), tuple(sorted(v.captures.items())))
                    if k[1] == "log" else (v.first[0].line, v.first[0].text))
                for k, v in result.hits.items()}

    results = {b: summary(scan_stream(io.BytesIO(text.encode()), pats, b, chunk_size=chunk)) for b in BACKENDS}
    if "hyperscan" in BACKENDS:  # the database pass in worker threads, a chunk ahead
        results["hyperscan, threads"] = summary(scan_stream(io.BytesIO(text.encode()), pats, "hyperscan",
                                                            chunk_size=chunk, threads=2))
    assert results["re"].get(("r", "with_log:0")) and results["re"].get(("oom", "log"))
    for b, got in results.items():
        assert got == results["re"], b


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_first_matching_pattern_of_a_group_gives_the_evidence_span(backend):
    """A line two patterns of one rule match: its evidence is where the rule's first pattern
    matched, whatever order an engine's candidate set lists them in."""
    pats = [ScanPattern("w", "log", r"(?:\[Rank (?P<rank>\d+)\] )?[Ww]atchdog caught collective operation timeout"),
            ScanPattern("w", "log", r"[Ww]atchdog caught collective opera")]
    line = "[rank3]:[E1102 09:14:07.112 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught collective operation timeout"
    got = scan_text(f"step 1\n{line}\n", pats, backend).get("w", "log").first[0]
    assert (got.line, got.start, got.end) == (2, line.index("[Rank 3]"), len(line))


@pytest.mark.parametrize("chunk", [512, 1 << 20])
def test_a_log_coloured_throughout_then_plain_agrees_across_engines(chunk):
    """hyperscan strips whole chunks while nearly every line is coloured, and goes back to
    gathering the coloured lines once the colour thins out: the results do not change."""
    body = [f"\x1b[36m[{i}] step\x1b[0m {i} ok" for i in range(600)]
    body[100] = "\x1b[36mRuntimeError: CUDA out\x1b[0m of memory. Tried to allocate 3.00 GiB"
    body += [f"step {i} ok" for i in range(600)] + ["x \x1b[1mTraceback (most recent call last)\x1b[0m",
                                                      "Traceback (most recent call last):",
                                                      "CUDA out of memory. Tried to allocate 1.00 MiB"]
    data = ("\n".join(body) + "\n").encode()
    want = [(101, "RuntimeError: CUDA out of memory. Tried to allocate 3.00 GiB"),
            (1203, "CUDA out of memory. Tried to allocate 1.00 MiB")]
    for backend in BACKENDS:
        for threads in ([0, 2] if backend == "hyperscan" else [0]):
            r = scan_stream(io.BytesIO(data), PATS, backend, chunk_size=chunk, threads=threads)
            assert hits(r, "oom") == want, (backend, threads)
            assert hits(r, "tb") == [(1202, "Traceback (most recent call last):")], (backend, threads)
    if "hyperscan" in BACKENDS:
        finder = stream.make_candidates(PATS, "hyperscan")
        ansi.prepared(bytearray(data[:4096]), 4096 - 7, finder)
        finder.start(bytearray(data[:4096]), 4096 - 7)
        assert finder.strip_all  # coloured throughout: whole chunks are stripped
        ansi.prepared(bytearray(b"step 1 ok\n" * 400), 4000, finder)
        assert not finder.strip_all


def test_weak_context_patterns_wait_for_a_second_pass_over_a_file(tmp_path):
    """A context pattern with no literal hyperscan can start at (nvidia-smi's process row) is
    left out of the database when the log is a file, and looked for afterwards only where its
    rule's own pattern matched: every engine still finds the same lines."""
    mem = ScanPattern("smi", "log", r"\|\s*(?P<used>[1-9]\d{3,})MiB\s*/\s*(?P<total>\d+)MiB\s*\|")
    row = ScanPattern("smi", "without_log", r"\|\s+\d+\s+(?:N/A\s+N/A\s+)?\d+\s+(?:C|G|C\+G|M|M\+C)\s+\S")
    other_row = ScanPattern("other", "without_log", r"\|\s+\d+\s+\d+\s+C\s+\S")  # no log pattern: not deferred
    pats = [OOM, mem, row, other_row]
    noise = "".join(f"step {i} | {i}/100 | loss 0.{i % 97:02d}\n" for i in range(3000))
    memory = "| 24%   63C    P2    72W / 250W |  11409MiB / 12207MiB |      0%      Default |\n"
    process = "|    0     24817    C   python                                        11405MiB |\n"
    cases = {"no process row": noise + memory + noise, "row after": noise + memory + noise + process,
             "row before": process + noise + memory + noise, "no memory line": noise + process + noise}
    for name, text in cases.items():
        log = tmp_path / f"{name}.log"
        log.write_text(text)
        got = {}
        for b in BACKENDS:
            for defer in (True, False):
                with open(log, "rb") as f:
                    r = scan_stream(f, pats, backend=b, defer=defer)
                got[b, defer] = {k: (g.count, g.first_line) for k, g in r.hits.items()}
        full = got["re", False]
        assert all(v == full for (b, defer), v in got.items() if not defer), (name, got)
        # Deferred: the same, but for the context lines of a rule whose own pattern matched
        # nothing (it cannot fire), which the second pass did not look for.
        for (b, defer), v in got.items():
            if defer:
                cut = {k: h for k, h in full.items() if not (b == "hyperscan" and k == ("smi", "without_log")
                                                              and ("smi", "log") not in full)}
                assert v == cut, (name, b, v)
        assert (("smi", "without_log") in full) == (name != "no process row"), name
        assert (("other", "without_log") in full) == (name != "no process row"), name
    if scan.hyperscan_available():
        finder = stream.make_candidates(pats, "hyperscan", None, stream._deferrable(pats))
        assert finder.deferred == {2}  # the process row of the rule with a log pattern only
        # In memory (a pipe, a paste) there is no second pass: nothing is deferred.
        assert stream.make_candidates(pats, "hyperscan", None).deferred == frozenset()


def test_hyperscan_databases_are_pruned_to_the_newest(tmp_path, monkeypatch):
    if not scan.hyperscan_available():
        pytest.skip("hyperscan not installed")
    import dataclasses

    from troubleshoot.scan import hsdb

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(hsdb, "CACHE", dataclasses.replace(hsdb.CACHE, keep=3))
    hsdb._database_cached.cache_clear()
    folder = tmp_path / "troubleshoot" / "hyperscan"
    for i in range(5):  # a rule folder edited five times: five rule sets, five databases
        scan_text("CUDA out of memory\n", [OOM, ScanPattern("team", "log", f"team error {i}")], "hyperscan")
        assert len(list(folder.glob("*.cache"))) == min(i + 1, 3)
    hsdb._database_cached.cache_clear()
    builds = []
    monkeypatch.setattr(hsdb, "_build", lambda *a: builds.append(a) or None)
    scan_text("x\n", [OOM, ScanPattern("team", "log", "team error 4")], "hyperscan")
    assert builds == []  # the newest is still there


def test_patterns_added_after_stable_ones_get_a_database_beside_theirs(monkeypatch):
    """A team's patterns after the shipped ones: the shipped database, the one a run without
    the team's rules left in the cache, is loaded as it is; only the team's few are compiled, at
    once even for a small input; the hits are those every engine finds."""
    if not scan.hyperscan_available():
        pytest.skip("hyperscan not installed")
    import os
    from pathlib import Path

    from troubleshoot.engine.diagnose import leading_patterns, scan_patterns
    from troubleshoot.engine.ruleset import SHIPPED, load_ruleset
    from troubleshoot.scan import hsdb, stream

    hsdb._database_cached.cache_clear()
    rules = load_ruleset(use_config=False).rules
    shipped = scan_patterns(rules)
    assert leading_patterns(rules, SHIPPED) == len(shipped)
    team = [ScanPattern("team-a", "log", r"DATASET (?P<mount>/mnt/\S+) NOT MOUNTED"),
            ScanPattern("team-a", "with_log", r"mount: (?P<why>.+)"), ScanPattern("team-b", "log", r"\(")]
    pats = shipped + team
    folder = Path(os.environ["XDG_CACHE_HOME"]) / "troubleshoot" / "hyperscan"
    before = {f.name: f.read_bytes() for f in folder.glob("*.cache")}  # a user's first commands left them
    builds = []
    real = hsdb._build
    monkeypatch.setattr(hsdb, "_build", lambda *a: builds.append(len(a[0])) or real(*a))
    assert stream.make_candidates(shipped, None, 10).name == "hyperscan" and builds == []
    finder = stream.make_candidates(pats, None, 10, stable=len(shipped))
    assert finder.name == "hyperscan" and builds == [len(team)]
    after = {f.name: f.read_bytes() for f in folder.glob("*.cache")}
    assert len(after) == len(before) + 1 and {k: after[k] for k in before} == before
    log = ("ok\nRuntimeError: CUDA out of memory. Tried to allocate 2 GiB\nmount: stale handle\n"
           "ERROR DATASET /mnt/coco NOT MOUNTED\na ( b\nNCCL WARN Call to connect returned Connection refused")
    split = stream.Scanner(pats, "hyperscan", stable=len(shipped)).scan(io.BytesIO(log.encode()))
    whole = stream.Scanner(pats, "re2" if scan.re2_available() else "re").scan(io.BytesIO(log.encode()))
    assert split.hits == whole.hits and ("team-a", "log") in split.hits and ("team-b", "log") in split.hits


def test_reports_pack_an_offset_and_an_index_and_refuse_what_does_not_fit():
    from troubleshoot.scan import packing

    r = packing.pack(123_456_789, packing.INDEX_LIMIT - 1)
    assert (packing.offset_of(r), packing.index_of(r)) == (123_456_789, packing.INDEX_LIMIT - 1)
    assert packing.index_of(packing.moved(r, 7)) == packing.INDEX_LIMIT - 1 and packing.offset_of(packing.moved(r, 7)) == 7
    # Sorted reports are in offset order; every report at an offset sorts below first_past(it).
    assert packing.pack(9, packing.INDEX_LIMIT - 1) < packing.first_past(9) <= packing.pack(10, 0)
    for offset, index in ((0, packing.INDEX_LIMIT), (-1, 0), (0, -1)):
        with pytest.raises(packing.PackingError):
            packing.pack(offset, index)  # an index past its bits would name another offset
    packing.check_count(packing.INDEX_LIMIT)
    with pytest.raises(packing.PackingError):
        packing.check_count(packing.INDEX_LIMIT + 1)


def test_a_scan_leaves_the_process_allocator_alone(tmp_path):
    """Tuning glibc's allocator is the program's choice (reader.tune_allocator, called by its
    entry point): a scan of a large log, forked or not, never loads ctypes to do it unasked,
    and asked, a scan loads it only for a log larger than a chunk."""
    import subprocess
    import sys

    log = tmp_path / "big.log"
    log.write_bytes(b"step 1 ok\n" * (1 << 20) + b"CUDA out of memory. Tried to allocate 2 GiB\n")
    script = ("import io, sys\n"
              "from troubleshoot.scan import ScanPattern, scan_stream\n"
              "pats = [ScanPattern('oom', 'log', r'CUDA out of memory')]\n"
              f"with open({str(log)!r}, 'rb') as f:\n"
              "    data = f.read()\n"
              "    f.seek(0)\n"
              "    a = scan_stream(f, pats, threads=1)\n"
              "b = scan_stream(io.BytesIO(data), pats, threads=0)\n"
              "assert a.get('oom', 'log').count == b.get('oom', 'log').count == 1\n"
              "print('ctypes' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
    # The program's call (twice: a second one does nothing) changes the allocator from the
    # first chunk-sized buffer on: a log smaller than a chunk never loads ctypes for it.
    asked = ("import io, os, sys\n"
             "from troubleshoot.scan import ScanPattern, scan_stream, tune_allocator\n"
             "tune_allocator(); tune_allocator()\n"
             "pats = [ScanPattern('oom', 'log', r'CUDA out of memory')]\n"
             "scan_stream(io.BytesIO(b'CUDA out of memory\\n' * 100), pats, threads=0)\n"
             "small = 'ctypes' in sys.modules\n"
             f"with open({str(log)!r}, 'rb') as f:\n"
             "    assert scan_stream(f, pats, threads=0).get('oom', 'log').count == 1\n"
             "glibc = bool(os.confstr_names.get('CS_GNU_LIBC_VERSION') and os.confstr('CS_GNU_LIBC_VERSION'))\n"
             "print(small, 'ctypes' in sys.modules or not glibc)\n")
    out = subprocess.run([sys.executable, "-c", asked], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "True"]


def test_paste_and_the_scanner_strip_the_same_escape_sequences():
    from troubleshoot.paste import needles, reader

    assert ansi.ANSI.pattern.encode() == ansi.ANSI_BYTES.pattern
    assert reader._ANSI is ansi.ANSI and needles._ANSI_BYTES is ansi.ANSI_BYTES
    line = "\x1b]0;title\x07\x1b[1;31mDriver Version:\x1b[0m 535.104 \x1b(B\x1b7ok"
    assert ansi.ANSI.sub("", line) == "Driver Version: 535.104 ok"
    assert ansi.clean_line(line.encode()) == ("Driver Version: 535.104 ok",)


def test_a_large_bounded_repeat_is_cut_at_like_an_unbounded_one():
    from troubleshoot.scan.prefilter import from_rare_literal

    assert from_rare_literal(r"NCCL error\b[^\n]{0,300}?[,:] unhandled cuda error") == r"[,:] unhandled cuda error"
    assert from_rare_literal(r"NCCL error\b[^\n]{0,3}?[,:] unhandled cuda error") == \
        r"NCCL error\b[^\n]{0,3}?[,:] unhandled cuda error"
