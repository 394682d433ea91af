"""engine/scaffold.py: a pasted line -> a pattern with its variable parts generalised."""

import json
import re

import pytest

from troubleshoot.engine import scaffold
from troubleshoot.engine.patterncheck import check_pattern

# (line as pasted, captures expected, a variant of the same error the pattern must match too)
LINES = [
    ("ERROR DATASET /mnt/imagenet NOT MOUNTED", ("path",), "ERROR DATASET /mnt/coco/train NOT MOUNTED"),
    ("[2024-05-01 12:00:00,123] RuntimeError: CUDA error: an illegal memory access was encountered at 0x7f3a2b00 "
     "in kernel 'gemm_kernel'", ("name",),
     "RuntimeError: CUDA error: an illegal memory access was encountered at 0xdead in kernel 'softmax'"),
    ("[  123.456] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.", (),
     "NVRM: Xid (PCI:0000:91:00): 79, pid=77, GPU has fallen off the bus."),
    ("E0312 12:00:00.123 4242 cuda_dnn.cc:439] Loaded runtime CuDNN library: 8.9.2 but source was compiled with: 9.1.0",
     ("version", "version2"), "Loaded runtime CuDNN library: 8.6.0 but source was compiled with: 8.9.4"),
    ("node3:123:140 [0] NCCL WARN Bootstrap : no socket interface found", (),
     "gpu-a07:9:9 [7] NCCL WARN Bootstrap : no socket interface found"),
    ("[rank3]: OSError: [Errno 28] No space left on device: \"/scratch/ckpt/step_1200.pt\" after 12:30:01", ("name",),
     "OSError: [Errno 28] No space left on device: \"/tmp/x\" after 01:02:03"),
    ("\x1b[31mERROR\x1b[0m worker 12 exited with code 137 (loss 0.231)", (),
     "ERROR worker 3 exited with code 9 (loss 12.5)"),
]


@pytest.mark.parametrize("line,captures,variant", LINES, ids=lambda x: x[:30] if isinstance(x, str) else "")
def test_pattern_generalises_the_variable_parts(line, captures, variant):
    s = scaffold.generalise(line)
    assert check_pattern(s.pattern) is None  # RE2 and re both take it
    assert s.captures == captures
    assert re.search(s.pattern, s.line) and re.search(s.pattern, variant), s.pattern
    assert not re.search(s.pattern, s.no_match)
    assert "\x1b" not in s.line
    assert not re.search(s.pattern, ""), "a pattern that matches every line"
    assert re.fullmatch(r"[a-z0-9]+(?:-[a-z0-9]+)*", scaffold.rule_id(s.words, set()))


def test_timestamp_prefix_is_not_part_of_the_pattern():
    s = scaffold.generalise("2024-05-01T12:00:00.5Z ERROR loader: shard 'a.tar' is corrupt")
    assert not s.pattern.startswith(r"\d") and s.pattern.startswith("ERROR loader")
    assert s.body.startswith("ERROR") and s.line.startswith("2024")


def test_a_line_without_words_is_refused():
    with pytest.raises(ValueError, match="no fixed words"):
        scaffold.generalise("12345 0x7f00 /tmp/a 1.2.3")


def test_rule_id_is_unique_and_severity_follows_the_words():
    assert scaffold.rule_id(("Bootstrap", "no", "socket"), {"team-bootstrap-no-socket"}) == "team-bootstrap-no-socket-2"
    assert scaffold.severity("RuntimeError: CUDA error") == "error"
    assert scaffold.severity("UserWarning: deprecated") == "warning"
    assert scaffold.severity("step 10 done") == "info"


def test_rendered_file_quotes_what_yaml_would_change():
    s = scaffold.generalise("Torch 12.10 said 'no' on: yes")
    text = scaffold.render(s, "team-torch-said", "io-stall", "info")
    from troubleshoot.engine import yamldoc

    data, traps = yamldoc.load(text)
    assert traps == [] and data["rules"][0]["examples"]["match"] == [s.line]
    assert data["rules"][0]["match"]["log"] == [s.pattern]


def test_a_line_with_bytes_that_are_not_utf8_becomes_a_rule_that_matches_it(tmp_path):
    """From the command line (bytes arrive as surrogates) or stdin: the rule is written, and it
    matches the line as the scanner reads it (U+FFFD for each bad byte)."""
    import subprocess
    import sys

    from conftest import run_cli

    team = tmp_path / "team-rules"
    team.mkdir()
    raw = b"ERROR DATASET /mnt/x\xff NOT MOUNTED"
    p = subprocess.run([sys.executable, "-m", "troubleshoot", "rules", "new", "--rules", str(team), "--symptom",
                        "io-stall", raw], capture_output=True)
    assert p.returncode == 0 and b"Traceback" not in p.stderr, p.stderr
    p = run_cli("rules", "new", "--symptom", "io-stall", "-", input=b"ERROR DATASET /mnt/y\xfe NOT MOUNTED\n")
    assert p.returncode == 0 and "team-error-dataset-not-mounted" in p.stdout.decode(), p.stderr
    log = tmp_path / "train.log"
    log.write_bytes(raw + b"\n")
    p = run_cli("diagnose", "--log", str(log), "--rules", str(team), "--no-probe", "--format", "json")
    assert [d["rule"] for d in json.loads(p.stdout)["diagnoses"]] == ["team-error-dataset-not-mounted"]


def test_yaml_text_with_lone_surrogates_is_a_yaml_error_not_a_crash():
    from troubleshoot.engine import yamldoc

    with pytest.raises(yamldoc.YamlError, match="not UTF-8"):
        yamldoc.load("rules:\n- id: x\udcff\n")
