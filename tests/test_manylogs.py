"""Many logs of one command: one scanner reused for every log, rules traced only where they can
fire, the logs read by forked children on several cores: each gives exactly the result of
scanning and diagnosing every log on its own, in one process."""

from __future__ import annotations

import json
import os
import random
import re

import pytest

from troubleshoot import logfiles, manylogs, pipeline, scan
from troubleshoot.engine.diagnose import FactTraces, fired, scan_patterns, trace_rule
from troubleshoot.engine.ruleset import load_ruleset
from troubleshoot.errors import TroubleshootError
from troubleshoot.paste import needles as needles_mod
from troubleshoot.paste.reader import NEEDLES
from troubleshoot.scan import Scanner, scan_stream
from troubleshoot.sources import LogSource, Sources, find_logs

from conftest import REPO

BACKENDS = (["re"] + (["re2"] if scan.re2_available() else [])
            + (["hyperscan"] if scan.hyperscan_available() else []))
RANKS = REPO / "tests" / "fixtures" / "ranks" / "per-rank"


@pytest.fixture(scope="module")
def ruleset():
    return load_ruleset(use_config=False)


def _example_logs(ruleset, n: int, seed: int = 3) -> list[str]:
    """`n` logs of shipped rule examples (real lines), several rules' lines in each, so that
    context patterns retire and hit caps differ from log to log."""
    texts = [t for r in ruleset.rules for t in r.examples.match]
    rnd = random.Random(seed)
    return ["\n".join(rnd.sample(texts, rnd.randint(1, 12))) + "\n" for _ in range(n)]


def _summary(result) -> dict:
    return {k: (v.count, tuple((h.line, h.text, h.start, h.end) for h in v.lines), tuple(sorted(v.captures.items())),
                v.capped, tuple(sorted(v.parts)), tuple(sorted((n, repr(s.as_dict())) for n, s in v.series.items())))
            for k, v in result.hits.items()}


@pytest.mark.slow  # every engine over the fixture logs, scanned twice each
@pytest.mark.parametrize("backend", BACKENDS)
def test_one_scanner_for_many_logs_finds_what_a_fresh_scan_of_each_finds(ruleset, backend, tmp_path):
    patterns = scan_patterns(ruleset.rules)
    logs = _example_logs(ruleset, 12 if backend == "re" else 40)
    paths = []
    for i, text in enumerate(logs):
        paths.append(tmp_path / f"rank{i}.log")
        paths[-1].write_text(text)
    scanner = Scanner(patterns, backend, size=sum(len(t) for t in logs))
    for path in paths:
        with open(path, "rb") as f:
            reused = scanner.scan(f)
        with open(path, "rb") as f:
            fresh = scan_stream(f, patterns, backend)
        assert _summary(reused) == _summary(fresh), path.name
        assert (reused.total_lines, reused.total_bytes) == (fresh.total_lines, fresh.total_bytes)


def test_rules_are_traced_only_where_they_can_fire(ruleset):
    """A rule whose match.log matched nothing is never traced, and tracing it would say it did
    not fire; the traces kept for the rules that read no log are the same with or without the
    memo, for each facts mapping apart."""
    patterns = scan_patterns(ruleset.rules)
    machine = json.loads((REPO / "tests" / "fixtures" / "snapshots" / "base.json").read_text())
    memo = FactTraces()
    for text in _example_logs(ruleset, 15, seed=11):
        found = scan.scan_text(text, patterns)
        for facts in (None, machine):
            expect = [(d.rule.id, d.count, d.first_line, d.explain) for d in fired(ruleset.rules, found, facts)]
            got = [(d.rule.id, d.count, d.first_line, d.explain) for d in fired(ruleset.rules, found, facts, memo)]
            assert got == expect
        for r in ruleset.rules:
            if r.log and found.get(r.id, "log") is None:
                assert not trace_rule(r, found, machine).fired


def _write_ranks(folder, n: int) -> None:
    timeout = (RANKS / "job.gpu-01.rank0.log").read_text().splitlines()[0].split("]:", 1)[1]
    oom = (RANKS / "job.gpu-02.rank3.log").read_text()
    folder.mkdir()
    filler = "".join(f"2024-06-26 05:00:{i % 60:02d},000 step {i} loss 0.{i:04d}\n" for i in range(400))
    for r in range(n):
        tail = oom if r == 7 else f"[rank{r}]:{timeout}\n"
        nccl = f"gpu-{r // 4:02d}:{100 + r}:{200 + r} [{r % 4}] NCCL INFO Channel 00/32 : 0 1 via P2P/IPC\n"
        (folder / f"job.gpu-{r // 4:02d}.rank{r}.log").write_text(nccl + filler + tail)


def _diagnose_folder(folder) -> dict:
    res = pipeline.diagnose_sources(Sources(find_logs([str(folder)]).logs, []), load_ruleset(use_config=False))
    return {"headline": res.headline, "lines": res.lines, "logs": res.logs,
            "diagnoses": [(d.rule.id, d.count, d.ranks, d.nodes, d.files, d.first_line, d.first_seen, d.notes)
                          for d in res.diagnoses]}


@pytest.fixture
def forking(monkeypatch):
    """Forked reading for a folder of a few small logs (by default only many or large ones fork),
    on two cores whatever this machine has."""
    monkeypatch.setattr(manylogs, "MIN_LOGS", 2)
    monkeypatch.setattr(manylogs, "MIN_BYTES", 1)
    monkeypatch.setattr(manylogs.threaded, "scan_threads", lambda size, min_bytes=None: 1)
    monkeypatch.delenv("TROUBLESHOOT_SCAN_FORK", raising=False)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_folder_read_by_forked_children_is_diagnosed_as_by_one_process(tmp_path, forking, monkeypatch):
    folder = tmp_path / "ranks"
    _write_ranks(folder, 24)
    forked = _diagnose_folder(folder)
    monkeypatch.setenv("TROUBLESHOOT_SCAN_FORK", "0")
    alone = _diagnose_folder(folder)
    assert forked == alone
    assert forked["headline"].startswith("rank 7 on node gpu-01 failed first with cuda-oom")
    assert forked["logs"] == 24


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_child_that_sends_nothing_costs_only_time(tmp_path, forking, monkeypatch):
    folder = tmp_path / "ranks"
    _write_ranks(folder, 20)
    monkeypatch.setattr(manylogs, "_child", lambda part, read, send: os._exit(3))
    broken = _diagnose_folder(folder)
    monkeypatch.setenv("TROUBLESHOOT_SCAN_FORK", "0")
    assert broken == _diagnose_folder(folder)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_an_unreadable_log_in_a_childs_share_is_reported_as_without_children(tmp_path, forking):
    folder = tmp_path / "ranks"
    _write_ranks(folder, 20)
    bad = sorted(folder.iterdir())[-1]
    bad.unlink()
    bad.mkdir()  # listed, not readable as a log
    logs = [LogSource(str(p), str(p)) for p in sorted(folder.iterdir())]
    with pytest.raises(TroubleshootError, match=re.escape(f"cannot read log {bad}")):
        pipeline.diagnose_sources(Sources(logs, []), load_ruleset(use_config=False))


@pytest.mark.parametrize("sizes", [[5] * 40, [1] * 39 + [1000], [1000] + [1] * 39, [3, 1, 4, 1, 5, 9, 2, 6] * 3])
def test_shares_keep_the_order_and_balance_the_bytes(sizes, monkeypatch):
    monkeypatch.setattr(manylogs.threaded, "scan_threads", lambda size, min_bytes=None: 1)
    parts = manylogs.shares(sizes)
    assert parts is not None and len(parts) == 2
    assert [i for p in parts for i in p] == list(range(len(sizes)))
    assert all(len(p) for p in parts)


def _is_labelled_by_lines(head: bytes) -> bool:
    lines = [ln for ln in head.split(b"\n")[:2000] if ln.strip()]
    if len(lines) > 1 and not head.endswith(b"\n"):
        lines = lines[:-1]  # cut mid-line by the peek
    if not lines:
        return False
    return sum(1 for ln in lines if logfiles._LABEL.match(ln)) >= logfiles.LABELLED_SHARE * len(lines)


def test_labelled_logs_are_told_as_a_line_by_line_count_tells_them():
    rnd = random.Random(5)
    pieces = [b"3: x", b"[rank2]: y", b"  12: [default1]: z", b"", b"   ", b"\t\r", b"step 1 loss 0.1", b"0: ",
              b"[default3]:w", b"\x0b", b"1234567: no", b"       1: no", b"[rank]: no", b"2024-06-26 05:00:01 ok"]
    for _ in range(3000):
        head = b"\n".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 30)))
        head += b"\n" if rnd.random() < 0.5 else b""
        assert logfiles.is_labelled(head) == _is_labelled_by_lines(head), head
    for n in (1999, 2000, 2001, 2600):  # the 2000-line window
        head = b"\n".join(rnd.choice(pieces[:3] + pieces[6:7]) for _ in range(n))
        assert logfiles.is_labelled(head) == _is_labelled_by_lines(head)


def test_the_node_is_read_from_nccl_lines_at_line_starts_only():
    head = (b"gpu-07:15325:16199 [2] NCCL INFO Bootstrap\n"
            b"x gpu-09:1:2 [0] NCCL INFO not at a line start\n"
            b"gpu-08:1:2 [0] NCCL WARN once\ngpu-07:1:2 [1] NCCL INFO twice\n")
    assert logfiles.node_in(head) == "gpu-07"
    assert logfiles.node_in(b"gpu-08:1:2 [0] NCCL WARN first line\n") == "gpu-08"
    assert logfiles.node_in(b"no nccl here\n") is None


def test_needles_found_in_one_pass_once_short_texts_add_up(monkeypatch):
    monkeypatch.setattr(needles_mod, "_searched", {})
    monkeypatch.setattr(needles_mod, "ONE_PASS_CHARS", 64)
    texts = [b"NVIDIA-SMI 535.104.05   Driver Version: 535.104.05   CUDA Version: 12.2\n", b"nothing\n",
             b"PyTorch version: 2.1.0+cu121\nIs CUDA available: True\n" * 3]
    for text in texts * 2:  # the first under the threshold, the rest over it
        by_needle = {n for n in NEEDLES if n.encode() in text} | {
            n for n in NEEDLES if n[0] == "\n" and text.startswith(n[1:].encode())}
        assert needles_mod._needles_in_raw(text, NEEDLES) == by_needle
