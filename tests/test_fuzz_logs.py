"""Three hundred thousand logs through every scan engine: each seeded mutation of a real log
line (the shipped rules' examples, tests/fuzzkit.py) is scanned by `re`, RE2 and hyperscan, and
every engine must find the same lines; a sample is diagnosed whole. Passes only with no
traceback, no hang (a batch past its deadline) and no disagreement, which is named down to the
document that causes it. tests/test_fuzz_files.py does the same for rule files, conditions and
snapshots: 1,010,000 inputs in all.

    python -m pytest -m slow tests/test_fuzz_logs.py -q -s            the counts and times
    TROUBLESHOOT_FUZZ_SCALE=0.01 ...                                   a hundredth of the inputs
    TROUBLESHOOT_FUZZ_SEED=7 ...                                       other inputs
"""

from __future__ import annotations

import io

import pytest

from fuzzkit import INPUT_SECONDS, SCALE, SEED, Findings, Mutator, deadline
from troubleshoot import pipeline
from troubleshoot.engine.diagnose import scan_patterns
from troubleshoot.engine.ruleset import load_ruleset
from troubleshoot.scan import hyperscan_available, re2_available, scan_stream
from troubleshoot.errors import TroubleshootError

pytestmark = pytest.mark.slow

SHIPPED = load_ruleset(use_config=False)
PATTERNS = scan_patterns(SHIPPED.rules)
LOG_SEEDS = [t.encode() for r in SHIPPED.rules for t in (*r.examples.match, *r.examples.no_match)]
LOG_BATCHES, LOG_BATCH = max(1, round(150 * SCALE)), 2000


def hits(result) -> dict:
    return {k: (v.count, tuple(h.line for h in v.lines)) for k, v in result.hits.items()}


def scan(data: bytes, engine: str) -> dict:
    return hits(scan_stream(io.BytesIO(data), PATTERNS, engine))


def engines() -> list[str]:
    return ["re"] + (["re2"] if re2_available() else []) + (["hyperscan"] if hyperscan_available() else [])


def joined(docs: list[bytes]) -> bytes:
    return b"\n".join(docs) + b"\n"


def culprit(docs: list[bytes], a: str, b: str) -> list[bytes]:
    """The smallest run of documents, found by halving, on which engines `a` and `b` differ
    (each scan of the `re` engine costs a fixed fraction of a second: never one per document)."""
    while len(docs) > 1:
        half = len(docs) // 2
        for part in (docs[:half], docs[half:]):
            if scan(joined(part), a) != scan(joined(part), b):
                docs = part
                break
        else:
            break  # only the two halves together differ: a difference across documents
    return docs


def compare(found: Findings, docs: list[bytes], exact: list[str], runs: dict) -> None:
    """Every exact engine must report what the first one does; on a difference, the documents
    that differ are named."""
    first = runs[exact[0]]
    for name in exact[1:]:
        if runs[name] != first:
            shown = culprit(docs, exact[0], name)
            found.disagreements.append(f"{exact[0]} and {name} differ on {joined(shown)[:600]!r}")


def scan_batch(found: Findings, m: Mutator, batch: int) -> None:
    names = engines()
    long_lines = batch % 10 == 9
    docs = [m.long_line(LOG_SEEDS) if long_lines and i % 20 == 0 else m.log_bytes(LOG_SEEDS) for i in range(LOG_BATCH)]
    data = joined(docs)
    # RE2 runs each pattern over the text in turn: a slice of the batches is enough to hold it
    # to the others. On lines over 2048 characters the `re` fallback searches bounded windows
    # (engine/rewindow.py), exact for matches up to 512 characters: there it must only finish.
    wanted = [n for n in names if n != "re2" or batch % 15 == 0]
    runs = {}
    for name in wanted:
        try:
            with deadline(INPUT_SECONDS * 10):
                runs[name] = scan(data, name)
        except Exception as exc:
            found.failed(f"scan with {name}", data[:2000], exc)
    exact = [n for n in wanted if n in runs and not (long_lines and n == "re")]
    if len(exact) > 1:
        compare(found, docs, exact, runs)
    for doc in docs[::500]:
        try:
            with deadline(INPUT_SECONDS):
                pipeline.run(None, ruleset=SHIPPED, log_text=doc.decode("utf-8", "surrogateescape"))
        except TroubleshootError:
            pass
        except Exception as exc:
            found.failed("diagnose", doc, exc)
    found.tried += len(docs)


def test_three_hundred_thousand_logs_scan_alike_on_every_engine():
    found = Findings("logs")
    m = Mutator(SEED)
    for batch in range(LOG_BATCHES):
        scan_batch(found, m, batch)
    found.check()
