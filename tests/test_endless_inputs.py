"""Logs from a pipe, a FIFO or a device: an input that never ends and holds no text
(/dev/zero) stops by itself with one line; a real log of text lines is read to its end,
however it arrives; a long read shows its progress on a terminal, never in a pipe.
The thresholds come down through their documented variables, so each test reads little."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys

import pytest
from conftest import REPO, run_cli
from procwait import read_pty, run_on_pty

from troubleshoot import inputwatch, logfiles
from troubleshoot.errors import TroubleshootError
from troubleshoot.scan.reader import LONG_LINE

OOM_LINE = b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB\n"
PROGRESS = b"troubleshoot: reading stdin"
SGR = re.compile(rb"\x1b\[[0-9;]*m")  # a colour or a text style; cursor movement is something else
# What a user's environment may hold that would change what these commands show.
FOREIGN = ("TROUBLESHOOT_RULES", "NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "COLUMNS", "LINES",
           inputwatch.ENV_PROGRESS_BYTES, inputwatch.ENV_PROGRESS_SECONDS, inputwatch.ENV_STREAM_LIMIT)


def _clean_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in FOREIGN}
    env["TERM"] = "xterm-256color"
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def _cache_home(tmp_path_factory):
    """One cache of this module's own, warmed by a first diagnosis of a pipe: the rules and the
    scan database for inputs of unknown size are built once, not by every command."""
    home, elsewhere = tmp_path_factory.mktemp("cache"), tmp_path_factory.mktemp("xdg")
    p = run_cli("diagnose", "--no-probe", input=_log(3), timeout=300,
                env=_clean_env(XDG_CACHE_HOME=str(home), XDG_CONFIG_HOME=str(elsewhere), XDG_STATE_HOME=str(elsewhere)))
    assert p.returncode == 0, p.stderr.decode()
    return home


@pytest.fixture
def env(_cache_home, tmp_path):
    """The environment of a command: none of the user's colour or progress settings; `extra` on top."""
    def make(**extra: str) -> dict:
        return _clean_env(XDG_CACHE_HOME=str(_cache_home), XDG_CONFIG_HOME=str(tmp_path / "xdg-config"),
                          XDG_STATE_HOME=str(tmp_path / "xdg-state"), **extra)
    return make


def _log(lines: int = 2000) -> bytes:
    return b"".join(b"epoch 1 step %d loss 0.25\n" % i for i in range(lines)) + OOM_LINE


def _read_all(stream, size: int = 1 << 20) -> int:
    """Read a stream to its end as the scanner does (readinto a reused buffer); bytes read."""
    buf, total = bytearray(size), 0
    while n := stream.readinto(buf):
        total += n
    return total


# ------------------------------------------------------------------ which streams are watched


def test_a_regular_file_is_read_as_it_is(tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes(_log(3))
    with open(log, "rb") as f:
        assert inputwatch.watch(f, "train.log") is f  # the scanner still reads it by offsets


def test_a_pipe_is_watched_and_closing_it_leaves_the_stream_open():
    r, w = os.pipe()
    os.write(w, _log(3))
    os.close(w)
    with os.fdopen(r, "rb") as raw:
        watched = inputwatch.watch(raw, "stdin", owned=False)
        assert isinstance(watched, inputwatch.Watched)
        assert watched.read(5) == b"epoch"
        watched.close()
        assert not raw.closed  # stdin stays open for whatever reads it next
        assert raw.read(2) == b" 1"


def test_open_binary_watches_a_fifo(tmp_path):
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    keep = os.open(fifo, os.O_RDWR)  # a writer already there: opening it to read does not wait
    try:
        stream = logfiles.open_binary(str(fifo), "log.fifo")
        try:
            assert isinstance(stream, inputwatch.Watched)
        finally:
            stream.close()
    finally:
        os.close(keep)


# ------------------------------------------------------------------ what is no log, what is one


def test_a_window_of_nul_bytes_is_not_a_text_log():
    stream = inputwatch.Watched(io.BytesIO(bytes(LONG_LINE + (2 << 20))), "/dev/zero", inputwatch.Limits())
    with pytest.raises(TroubleshootError) as err:
        _read_all(stream)
    assert str(err.value) == "/dev/zero: not a text log (16 MiB without a line break, no text); stopped reading"
    assert stream.total <= LONG_LINE + (1 << 20)  # stopped at the end of the window, not at the end of the input


def test_filler_with_a_little_text_is_not_a_text_log():
    block = b"\xff" * 4000 + b"OK" * 48  # 2% text in every sampled block
    stream = inputwatch.Watched(io.BytesIO(block * (LONG_LINE // len(block) + 300)), "dump", inputwatch.Limits())
    with pytest.raises(TroubleshootError, match=r"^dump: not a text log \(16 MiB without a line break, 2% text\)"):
        _read_all(stream, 4096)


@pytest.mark.parametrize("line", [
    b"Epoch 0:  42%|####      | 504/1200 [00:10<01:40,  4.9it/s, loss=1.880]\r",  # a progress bar, CR alone
    "第1轮 损失 0.25 学习率 0.001 ".encode(),  # text that is not ASCII
    b"\x1b[32mINFO\x1b[0m step done\t",  # colours and tabs
])
def test_a_long_line_of_text_is_read_to_its_end(line):
    data = line * (2 * LONG_LINE // len(line) + 1) + b"\n" + OOM_LINE
    stream = inputwatch.Watched(io.BytesIO(data), "stdin", inputwatch.Limits())
    assert _read_all(stream) == len(data)


def test_text_bytes_counts_what_reads_as_text():
    assert inputwatch.text_bytes(b"loss 0.25\r\n") == 11
    assert inputwatch.text_bytes(bytes(64)) == 0
    assert inputwatch.text_bytes("é".encode() + b"\xff") == 2  # an invalid byte is not text


def test_the_stream_limit_stops_a_long_input():
    limits = inputwatch.Limits(stream_limit=1 << 20)
    stream = inputwatch.Watched(io.BytesIO(_log(100_000)), "stdin", limits)
    with pytest.raises(TroubleshootError, match=r"^stdin: longer than 1 MiB, the limit TROUBLESHOOT_STREAM_LIMIT"):
        _read_all(stream, 64 << 10)


def test_the_limits_are_read_from_the_environment():
    limits = inputwatch.Limits.from_env({inputwatch.ENV_PROGRESS_BYTES: "1MiB", inputwatch.ENV_PROGRESS_SECONDS: "0.5s",
                                         inputwatch.ENV_STREAM_LIMIT: "20GiB"})
    assert limits == inputwatch.Limits(1 << 20, 0.5, 20 << 30)
    assert inputwatch.Limits.from_env({}) == inputwatch.Limits(64 << 20, 2.0, None)
    assert inputwatch.Limits.from_env({inputwatch.ENV_STREAM_LIMIT: "0"}).stream_limit is None
    with pytest.raises(TroubleshootError, match="TROUBLESHOOT_STREAM_LIMIT='lots' is not a byte size"):
        inputwatch.Limits.from_env({inputwatch.ENV_STREAM_LIMIT: "lots"})
    with pytest.raises(TroubleshootError, match="TROUBLESHOOT_PROGRESS_SECONDS='-1' is not a number of seconds"):
        inputwatch.Limits.from_env({inputwatch.ENV_PROGRESS_SECONDS: "-1"})


# ------------------------------------------------------------------ where progress may be drawn


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_drawn_only_on_a_terminal_that_moves_its_cursor():
    assert inputwatch.can_draw(_Tty(), {"TERM": "xterm-256color"})
    assert not inputwatch.can_draw(_Tty(), {"TERM": "dumb"})
    assert not inputwatch.can_draw(io.StringIO(), {"TERM": "xterm-256color"})  # a pipe or a file


def _drawn(block) -> str:
    """What reading an empty pipe draws on a terminal inside `block(terminal)`."""
    tty = _Tty()
    r, w = os.pipe()
    os.close(w)
    with os.fdopen(r, "rb") as raw, block(tty):
        watched = inputwatch.watch(raw, "stdin", owned=False)
        assert watched.read(1) == b""  # the end of the read: the line, if any, is cleared
    return tty.getvalue()


def test_progress_is_drawn_only_inside_the_block_and_not_under_color_never(monkeypatch):
    for name in FOREIGN:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setenv(inputwatch.ENV_PROGRESS_SECONDS, "0")  # drawn at once: before the read can end
    assert "troubleshoot: reading stdin" in _drawn(lambda tty: inputwatch.progress_on(tty, colour=False))
    assert _drawn(lambda tty: inputwatch.progress_on(tty, colour=False, allowed=False)) == ""  # --color never
    assert _drawn(lambda tty: contextlib.nullcontext()) == ""  # another command, the TUI's threads


# ------------------------------------------------------------------ the real command


def test_dev_zero_ends_by_itself_with_one_line(env):
    p = run_cli("diagnose", "--log", "/dev/zero", "--no-probe", env=env(), timeout=120)
    assert p.returncode == 2
    assert p.stdout == b""
    assert p.stderr.decode() == ("troubleshoot: error: /dev/zero: not a text log "
                                 "(16 MiB without a line break, no text); stopped reading\n")


def test_a_fifo_of_text_lines_is_read_to_the_end(tmp_path, env):
    fifo, source = tmp_path / "train.fifo", tmp_path / "train.log"
    os.mkfifo(fifo)
    source.write_bytes(_log(50_000))
    # The writer is a process of its own: killed at the end, it can never keep the test waiting.
    writer = subprocess.Popen(["sh", "-c", 'exec cat "$1" > "$2"', "sh", str(source), str(fifo)])
    try:
        p = run_cli("diagnose", "--log", str(fifo), "--no-probe", "--format", "json",
                    env=env(**{inputwatch.ENV_PROGRESS_SECONDS: "0"}), timeout=120)
    finally:
        writer.kill()
        writer.wait()
    assert p.returncode == 0, p.stderr.decode()
    assert p.stderr == b""  # stderr is a pipe: no progress, though it was asked for at once
    report = json.loads(p.stdout)
    assert report["lines"] == 50_001
    assert "torch-cuda-oom" in [d["rule"] for d in report["diagnoses"]]


def test_no_progress_in_a_pipe_and_no_progress_library_loaded(env):
    code = ("import sys; from troubleshoot.cli import main; code = main(['diagnose', '--no-probe']); "
            "print('rich.progress' in sys.modules, file=sys.stderr); sys.exit(code)")
    p = subprocess.run([sys.executable, "-c", code], check=False, input=_log(), capture_output=True, cwd=REPO,
                       env=env(**{inputwatch.ENV_PROGRESS_BYTES: "0"}), timeout=120)
    assert p.returncode == 0, p.stderr.decode()
    assert b"torch-cuda-oom" in p.stdout
    assert p.stderr == b"False\n"  # nothing drawn, and the library never imported


def _on_a_terminal(argv: list[str], env: dict, log: bytes, while_reading=None) -> tuple[bytes, int]:
    """Run `troubleshoot ARGV` with stdout and stderr on a pseudo-terminal and `log` piped into
    its stdin (`cat log | troubleshoot ...` in a terminal). `while_reading(fd)` runs before the
    pipe is closed and returns what it read off the terminal. Returns all the terminal showed
    and the exit code."""
    return run_on_pty([sys.executable, "-m", "troubleshoot", *argv], env, REPO, while_reading, stdin=log)


def test_progress_shows_on_a_terminal_while_the_read_goes_on_and_is_cleared(env):
    # Due after 0 bytes: drawn at the first refresh, while the pipe is still open.
    out, code = _on_a_terminal(["diagnose", "--no-probe"], env(**{inputwatch.ENV_PROGRESS_BYTES: "0"}), _log(),
                               lambda fd: read_pty(fd, until=PROGRESS))
    assert code == 0, out
    last_drawn = out.rindex(PROGRESS)
    cleared = out.index(b"\x1b[2K", last_drawn)  # the line erased once the read ended...
    assert out.index(b"torch-cuda-oom") > cleared  # ...before the diagnosis was printed
    assert SGR.search(out[:cleared])  # in colour: nothing asked for none


def test_progress_under_no_color_has_no_colour(env):
    out, code = _on_a_terminal(["diagnose", "--no-probe"], env(NO_COLOR="1", **{inputwatch.ENV_PROGRESS_SECONDS: "0"}),
                               _log())
    assert code == 0, out
    assert PROGRESS in out and b"torch-cuda-oom" in out
    assert not SGR.search(out), out


@pytest.mark.parametrize("argv, extra", [
    (["diagnose", "--no-probe", "--color", "never"], {}),  # plain text asked for
    (["diagnose", "--no-probe"], {"TERM": "dumb"}),  # a terminal that cannot move its cursor
])
def test_no_progress_where_the_cursor_may_not_move(argv, extra, env):
    # Asked for at once: had it been allowed, it would have been drawn before the read ended.
    out, code = _on_a_terminal(argv, env(**{inputwatch.ENV_PROGRESS_SECONDS: "0"}, **extra), _log())
    assert code == 0, out
    assert b"torch-cuda-oom" in out
    assert PROGRESS not in out


@pytest.mark.slow
def test_a_piped_log_of_long_progress_bar_lines_is_diagnosed(env):
    bar = b"Epoch 0:  42%|####      | 504/1200 [00:10<01:40,  4.9it/s, loss=1.880]\r"
    data = bar * (3 * LONG_LINE // len(bar)) + b"\n" + OOM_LINE
    p = run_cli("diagnose", "--no-probe", "--format", "json", input=data, env=env(), timeout=300)
    assert p.returncode == 0, p.stderr.decode()
    report = json.loads(p.stdout)
    assert report["lines"] == 2
    assert "torch-cuda-oom" in [d["rule"] for d in report["diagnoses"]]
