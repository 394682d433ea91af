"""Inputs that are not logs, and logs with nothing in them: a binary or a compressed file named
as a log, a folder that holds some, a binary piped in, an empty file or an empty stdin, and a log
typed into a terminal. Each is told in words that name it; nothing is diagnosed from a binary."""

from __future__ import annotations

import gzip
import io
import json
import os
import random
import sys
from pathlib import Path

import pytest
from conftest import REPO, run_cli, run_main
from procwait import read_pty, run_on_pty

from troubleshoot import inputwatch
from troubleshoot.sources import SNIFF, find_logs, not_text

OOM_LINE = b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB\n"
LOG = b"".join(b"epoch 1 step %d loss 0.25\n" % i for i in range(50)) + OOM_LINE
ELF = b"\x7fELF\x02\x01\x01\x00" + bytes(8) + bytes(random.Random(1).randrange(256) for _ in range(6000))
# Bytes as a compressed stream or an encrypted file holds them: no magic to tell what they are.
NOISE = bytes(random.Random(2).randrange(256) for _ in range(20000))
PROMPT = inputwatch.PASTE_PROMPT.encode()


def _warnings(stderr: bytes) -> list[str]:
    return [ln for ln in stderr.decode().splitlines() if ln.startswith("troubleshoot: warning:")]


def _error(p) -> str:
    """The one line of a command that failed on its input (exit status 2, nothing on stdout)."""
    err = p.stderr.decode()
    assert p.returncode == 2 and p.stdout == b"", (p.returncode, p.stdout, err)
    assert err.startswith("troubleshoot: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err.rstrip("\n")


# ------------------------------------------------------------------ telling a binary from a log


BINARIES = [
    (ELF, "an ELF executable or library"),
    (gzip.compress(LOG, mtime=0), "gzip-compressed"),  # mtime 0: the same bytes in every test worker
    (b"\x28\xb5\x2f\xfd" + NOISE[:100], "zstd-compressed"),
    (b"\xfd7zXZ\x00" + NOISE[:100], "xz-compressed"),
    (b"BZh91AY&SY" + NOISE[:100], "bzip2-compressed"),
    (b"PK\x03\x04" + NOISE[:100], "a zip archive"),  # torch.save's checkpoints too
    (b"\x89PNG\r\n\x1a\n" + NOISE[:100], "a PNG image"),
    (b"\x80\x04\x95" + NOISE[:100], "a Python pickle"),
    (b"x" * 100 + bytes(157) + b"ustar\x0000" + bytes(300), "a tar archive"),
    ("step 1 loss 0.25\n".encode("utf-16"), "UTF-16 text"),
    (NOISE, "binary data: "),  # ~9% of random bytes are control bytes that text does not hold
    (bytes(300), "nothing but NUL bytes"),
]


@pytest.mark.parametrize("head, kind", BINARIES, ids=[kind.rstrip(": ") for _, kind in BINARIES])
def test_a_binary_is_told_by_its_first_bytes(head, kind):
    assert (not_text(head, whole=True) or "").startswith(kind)


@pytest.mark.parametrize("head", [
    LOG,
    b"caf\xe9 step 1 loss 0.25\n" * 40 + OOM_LINE,  # Latin-1: invalid UTF-8, still text
    b"\xff\xfe step \xc3 1 \xed\xa0\x80\n" + LOG,  # bytes no UTF-8 reader takes, a few of them
    LOG[:500] + b"\x00\x01\x02" + LOG[500:],  # stray control bytes
    bytes(SNIFF * 2) + LOG,  # a hole where the log was truncated under its writer: text may follow
    LOG[:300] + bytes(4096) + LOG[300:],  # a block of NULs a crash left in it
    b"\x1b[32mINFO\x1b[0m\tstep\x0b1\x0c\x07 Epoch 0: 42%|####\r\x08\n" * 50,  # colours, bars, tabs, bells
    "第1轮 损失 0.25 学习率 0.001\n".encode() * 100,
    "第1轮 损失 0.25 学习率 0.001\n".encode("gbk") * 100,  # a legacy encoding: not UTF-8, still text
    b"",
], ids=["log", "latin-1", "stray-invalid-utf8", "stray-control-bytes", "leading-hole", "nul-block", "terminal-codes",
        "utf-8-cjk", "gbk", "empty"])
def test_text_with_stray_bytes_or_holes_is_a_log(head):
    assert not_text(head, whole=True) is None


def test_only_the_first_bytes_are_judged():
    assert not_text(LOG * 1000 + ELF, whole=True) is None  # a binary tail is the scan's business
    assert not_text(bytes(SNIFF), whole=False) is None  # a hole so far: the rest may be text
    assert not_text(bytes(SNIFF) + LOG, whole=True) is None


# ------------------------------------------------------------------ the real command: binaries and folders


def test_a_binary_named_as_the_log_is_nothing_to_diagnose():
    program = os.path.realpath(sys.executable)  # an ELF executable wherever the tests run
    err = _error(run_cli("diagnose", "--no-probe", "--log", program))
    assert err == f"troubleshoot: error: nothing to diagnose: {program} is not a text log (an ELF executable or library)"


def test_a_binary_piped_in_is_nothing_to_diagnose():
    err = _error(run_cli("diagnose", "--no-probe", input=ELF))
    assert err == "troubleshoot: error: nothing to diagnose: stdin is not a text log (an ELF executable or library)"


def _mixed_folder(root: Path) -> Path:
    d = root / "job"
    (d / "bin").mkdir(parents=True)
    (d / "rank0.log").write_bytes(LOG)
    (d / "bin" / "train").write_bytes(ELF)
    (d / "libcuda.so.1").write_bytes(ELF)
    (d / "blob").write_bytes(NOISE)
    (d / "README.md").write_text("# job 42\n")
    (d / "rank1.log.gz").write_bytes(gzip.compress(LOG))
    (d / "rank0.log.json").write_text("{}")  # `run --format json`'s report: passed over without a word
    return d


def test_a_folder_reads_its_text_logs_and_names_each_file_it_left_out(tmp_path):
    d = _mixed_folder(tmp_path)
    p = run_cli("diagnose", "--no-probe", "--log", str(d))
    assert p.returncode == 0, p.stderr.decode()
    assert b"torch-cuda-oom" in p.stdout and b"1 match" in p.stdout
    [note] = _warnings(p.stderr)
    assert note.startswith("troubleshoot: warning: 5 files are not text logs and were left out: ")
    for name, kind in (("README.md", "Markdown"), ("bin/train", "an ELF executable or library"),
                       ("blob", "binary data"), ("libcuda.so.1", "an ELF executable"), ("rank1.log.gz", "gzip")):
        assert f"{d / name} ({kind}" in note, name
    assert "rank0.log.json" not in note


def test_a_folder_of_binaries_only_is_nothing_to_diagnose(tmp_path):
    d = tmp_path / "elfs"
    d.mkdir()
    for name in ("ls", "cat", "true"):
        (d / name).write_bytes(ELF)
    err = _error(run_cli("diagnose", "--no-probe", "--log", str(d)))
    assert err.startswith("troubleshoot: error: nothing to diagnose: none of the 3 files given is a text log: ")
    assert all(f"{d / name} (an ELF executable or library)" in err for name in ("ls", "cat", "true"))


def test_a_compressed_log_says_how_to_diagnose_it_and_that_works(tmp_path):
    packed = tmp_path / "train.log.gz"
    packed.write_bytes(gzip.compress(LOG))
    err = _error(run_cli("diagnose", "--no-probe", "--log", str(packed)))
    assert err.endswith(f"is not a text log (gzip-compressed); to diagnose it all the same: zcat {packed} "
                        "| troubleshoot diagnose")
    p = run_cli("diagnose", "--no-probe", input=gzip.decompress(packed.read_bytes()))  # what zcat would pipe in
    assert p.returncode == 0 and b"torch-cuda-oom" in p.stdout


@pytest.mark.parametrize("log", [
    b"\xe9t\xe9 \xff step 1 loss 0.25\n" + LOG,
    LOG[:400] + b"\x00\x00\x01" + LOG[400:],
    bytes(1 << 20) + LOG,  # truncated under its writer (copytruncate): a hole, then the log
], ids=["invalid-utf8", "stray-control-bytes", "leading-hole"])
@pytest.mark.parametrize("how", ["file", "stdin"])
def test_a_log_with_stray_bytes_is_diagnosed_without_a_note(log, how, tmp_path):
    path = tmp_path / "train.log"
    path.write_bytes(log)
    p = (run_cli("diagnose", "--no-probe", "--log", str(path)) if how == "file"
         else run_cli("diagnose", "--no-probe", input=log))
    assert p.returncode == 0, p.stderr.decode()
    assert b"torch-cuda-oom" in p.stdout
    assert p.stderr == b""


def test_listing_reads_a_few_pages_of_each_file_not_the_file(tmp_path, monkeypatch):
    from troubleshoot import sources

    (tmp_path / "logs").mkdir()
    big = tmp_path / "logs" / "big.log"
    big.write_bytes(LOG * 4000)  # 5 MB
    asked: list[int] = []

    class Counted:
        def __init__(self, *args, **kwargs):
            self._f = open(*args, **kwargs)

        def read(self, n: int = -1) -> bytes:
            asked.append(n)
            return self._f.read(n)

        def fileno(self) -> int:
            return self._f.fileno()

        def __enter__(self):
            return self

        def __exit__(self, *exc) -> None:
            self._f.close()

    monkeypatch.setattr(sources, "open", Counted, raising=False)
    assert [s.name for s in find_logs([str(tmp_path / "logs")]).logs] == [str(big)]
    assert asked == [SNIFF]


# ------------------------------------------------------------------ empty logs


def test_an_empty_log_file_is_named_as_empty_and_is_no_failure(tmp_path):
    empty = tmp_path / "train.log"
    empty.touch()
    p = run_cli("diagnose", "--no-probe", "--log", str(empty), "--fail-on", "info")
    assert p.returncode == 0, p.stderr.decode()
    assert _warnings(p.stderr) == [f"troubleshoot: warning: {empty} is empty: there was nothing in it to diagnose"]
    assert p.stdout.decode() == f"No known problem found in {empty}.\n"


def test_empty_stdin_is_named_as_empty():
    p = run_cli("diagnose", "--no-probe", input=b"")
    assert p.returncode == 0, p.stderr.decode()
    assert p.stderr.decode() == "troubleshoot: warning: stdin is empty: there was nothing in it to diagnose\n"


def test_the_json_lists_what_was_left_out_and_what_was_empty(tmp_path):
    d = _mixed_folder(tmp_path)
    (d / "rank2.log").touch()
    p = run_cli("diagnose", "--no-probe", "--log", str(d), "--format", "json")
    assert p.returncode == 0, p.stderr.decode()
    doc = json.loads(p.stdout)
    assert doc["empty"] == [str(d / "rank2.log")]
    why = {s["file"]: s["why"] for s in doc["skipped"]}
    assert sorted(why) == sorted(str(d / name) for name in ("README.md", "bin/train", "libcuda.so.1", "blob",
                                                           "rank1.log.gz"))
    assert why[str(d / "README.md")] == "Markdown" and why[str(d / "rank1.log.gz")] == "gzip-compressed"
    assert why[str(d / "bin/train")] == why[str(d / "libcuda.so.1")] == "an ELF executable or library"
    assert why[str(d / "blob")].startswith("binary data: ")
    assert doc["logs"] == 2 and "torch-cuda-oom" in [x["rule"] for x in doc["diagnoses"]]
    clean = json.loads(run_cli("diagnose", "--no-probe", "--format", "json", input=LOG).stdout)
    assert (clean["skipped"], clean["empty"]) == ([], [])  # always there: a script need not test for them


# ------------------------------------------------------------------ a log typed into a terminal


class _Terminal:
    """A terminal's input as a BufferedReader meets it: one line a read, b"" for Ctrl-D on an
    empty line, and the read after it waits for more (here: fails the test)."""

    def __init__(self, *lines: bytes):
        self.lines = list(lines)

    def readinto1(self, buf) -> int:
        assert self.lines is not None, "read again after the end of input: a second Ctrl-D would be needed"
        line = self.lines.pop(0) if self.lines else b""
        if not line:
            self.lines = None
        buf[:len(line)] = line
        return len(line)


def test_a_terminal_read_ends_at_its_first_end_of_input():
    typed = inputwatch.Typed(_Terminal(b"step 1 loss 0.25\n", OOM_LINE))
    assert typed.read(1 << 20) == b"step 1 loss 0.25\n" + OOM_LINE  # all it was asked for, up to the end
    assert typed.read(1 << 20) == b"" and typed.readinto(bytearray(10)) == 0  # and no read after it


def test_a_log_typed_into_a_terminal_is_asked_for_and_ends_at_one_ctrl_d():
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TROUBLESHOOT_RULES")}
    env["TERM"] = "xterm-256color"

    def type_the_log(fd: int) -> bytes:
        out = read_pty(fd, until=PROMPT, timeout=120)
        os.write(fd, b"step 1 loss 0.25\n" + OOM_LINE + b"\x04")  # Ctrl-D once, on an empty line
        try:
            return out + read_pty(fd, until=b"torch-cuda-oom", timeout=120)
        finally:
            os.write(fd, b"\x04")  # had it waited for a second one, it ends now and the test fails above

    out, code = run_on_pty([sys.executable, "-m", "troubleshoot", "diagnose", "--no-probe", "--log", "-"], env, REPO,
                           type_the_log)
    assert code == 0, out
    assert out.count(PROMPT) == 1 and out.index(PROMPT) < out.index(b"step 1 loss")
    assert b"torch-cuda-oom" in out


def test_no_prompt_when_the_log_is_piped_in():
    p = run_cli("diagnose", "--no-probe", "--log", "-", input=LOG)
    assert p.returncode == 0 and b"torch-cuda-oom" in p.stdout
    assert p.stderr == b""


def test_rules_why_on_a_binary_says_it_is_no_text_log(tmp_path):
    core = tmp_path / "core"
    core.write_bytes(ELF)
    p = run_main("rules", "why", "torch-cuda-oom", "--log", str(core))
    assert p.returncode == 2 and p.stderr.decode() == \
        f"troubleshoot: error: nothing to diagnose: {core} is not a text log (an ELF executable or library)\n"
