"""Seeded mutation of real inputs, and the bookkeeping of a long fuzz run: a deadline per input
(a hang is an input that runs past it), and a record of every exception that is not one of the
one-line errors the tool prints (a traceback, for a user).

The seeds are real: the shipped rules' examples (log lines users pasted), the shipped rule files,
the snapshot fixture. Mutations are what files meet on their way to the tool: bytes that are not
UTF-8, terminal escapes, carriage returns, NUL, rank labels, lines cut, doubled or very long,
values of the wrong type or of absurd size.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field

SEED = int(os.environ.get("TROUBLESHOOT_FUZZ_SEED", "1"))
# How many inputs, as a share of the standing run (TROUBLESHOOT_FUZZ_SCALE=0.01: a quick look).
SCALE = float(os.environ.get("TROUBLESHOOT_FUZZ_SCALE", "1"))
# Per input: generous for a loaded 2-core machine; a real hang runs forever.
INPUT_SECONDS = 20
# Byte sequences a log carries when it is not clean UTF-8 text.
ODD_BYTES = [b"\xff", b"\xfe\xff", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf", b"\x80",
             b"\x1b[31m", b"\x1b[0m", b"\x1b]0;t\x07", b"\x1b]52;c;eA==\x07", b"\x9b", b"\r", b"\r\n", b"\x00",
             b"\t", b"\x0b", b"\x0c", b"\xe2\x80\xa8", b"\xc2\x85", "é漢字".encode(), b"\n", b"\n\n"]
RANK_LABELS = [b"[rank3]: ", b"[rank0]:", b"3: ", b"  12: ", b"[default1]:", b"[1,0]<stderr>:", b"gpu-node-07: "]
ODD_TEXT = ["\x1b]0;t\x07", "\udc80", "\ud800", "\x00", "\u2028", "\x85", "{", "}", "{x}", "{log.x}", "[", "]", "(",
            ")", "(?P<x>", ".*", "(a+)+", "\\", "'", '"', "&a", "*a", "!!python/object:os.system", "\t", "#", "- ",
            ": ", "|", ">", "%", "@", "`", "~", "null", "true", "1e999", "-0", "0x1F", "12.10", "9" * 40]
ODD_VALUES = [None, True, False, 0, -1, 2 ** 63, 2 ** 64 + 1, -(2 ** 63) - 1, 10 ** 30, 1e308, float("inf"),
              float("nan"), -0.0, "", "12.²", "9" * 5000, "\udc80", "\x1b]52;c;eA==\x07", "-rf", "gpu[001-512]",
              "a,b", "../../etc/passwd", "x" * 3000, [], {}, [None], {"": None}, "12.4", "550.54.15", "sm_90"]


class Hang(Exception):
    """An input ran past its deadline."""


@contextmanager
def deadline(seconds: float):
    """Raise Hang in this (main) thread when the block runs longer than `seconds`."""

    def fire(signum, frame):
        raise Hang(f"ran past {seconds} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@dataclass
class Findings:
    """What a run found: tracebacks, hangs and disagreements, each with the input that caused it."""

    family: str
    tried: int = 0
    tracebacks: list[str] = field(default_factory=list)
    hangs: list[str] = field(default_factory=list)
    disagreements: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)

    def failed(self, what: str, data, exc: BaseException) -> None:
        shown = repr(data)[:300]
        if isinstance(exc, Hang):
            self.hangs.append(f"{what}: {shown}")
        else:
            tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-3:])
            self.tracebacks.append(f"{what}: {type(exc).__name__}: {exc}\n  input: {shown}\n{tb}")

    def summary(self) -> str:
        return (f"fuzz {self.family}: {self.tried} inputs in {time.perf_counter() - self.started:.0f} s, "
                f"{len(self.tracebacks)} tracebacks, {len(self.hangs)} hangs, "
                f"{len(self.disagreements)} disagreements")

    def check(self) -> None:
        print("\n" + self.summary())
        problems = self.tracebacks[:5] + self.hangs[:5] + self.disagreements[:5]
        assert not problems, self.summary() + "\n\n" + "\n\n".join(problems)


class Mutator:
    """Seeded mutations; the same seed gives the same inputs on every machine."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def log_bytes(self, seeds: list[bytes]) -> bytes:
        r = self.rng
        data = bytearray(r.choice(seeds))
        if r.random() < 0.2:
            data += b"\n" + r.choice(seeds)
        for _ in range(r.choice((0, 1, 1, 2, 3, 6))):
            at = r.randrange(len(data) + 1)
            kind = r.random()
            if kind < 0.45:
                data[at:at] = r.choice(ODD_BYTES)
            elif kind < 0.6 and data:
                data[at:at + 1] = bytes([r.randrange(256)])
            elif kind < 0.75:
                del data[at:at + r.randint(1, 12)]
            elif kind < 0.85:
                line_start = data.rfind(b"\n", 0, at) + 1
                data[line_start:line_start] = r.choice(RANK_LABELS)
            else:
                piece = data[at:at + r.randint(1, 40)]
                data[at:at] = piece * r.randint(2, 5)
        return bytes(data).strip(b"\n") or b"x"

    def long_line(self, seeds: list[bytes]) -> bytes:
        """One line of 2 to 20 kB built from seed text: the long-line paths of every engine."""
        r = self.rng
        parts = [r.choice(seeds).replace(b"\n", b" ") for _ in range(r.randint(10, 80))]
        return r.choice(RANK_LABELS + [b""]) + b" ".join(parts)[: r.randint(2048, 20000)]

    def text(self, src: str) -> str:
        r = self.rng
        lines = src.split("\n")
        for _ in range(r.choice((1, 1, 2, 3, 5))):
            i = r.randrange(len(lines))
            kind = r.random()
            line = lines[i]
            if kind < 0.35 and line:
                at = r.randrange(len(line) + 1)
                lines[i] = line[:at] + r.choice(ODD_TEXT) + line[at:]
            elif kind < 0.5:
                del lines[i]
                if not lines:
                    lines = [""]
            elif kind < 0.65:
                lines.insert(i, lines[r.randrange(len(lines))])
            elif kind < 0.8 and ":" in line:
                key, _, _ = line.partition(":")
                lines[i] = f"{key}: {r.choice(ODD_TEXT)}"
            elif kind < 0.9:
                lines[i] = line[: r.randrange(len(line) + 1)]
            else:
                lines[i] = " " * r.randint(0, 6) + line.lstrip()
        return "\n".join(lines)

    def value(self, v, depth: int = 0):
        """`v` with one leaf or one key changed somewhere inside it (a new object: `v` is kept)."""
        r = self.rng
        if isinstance(v, dict) and v and depth < 6 and r.random() < 0.85:
            key = r.choice(list(v))
            out = dict(v)
            kind = r.random()
            if kind < 0.7:
                out[key] = self.value(v[key], depth + 1)
            elif kind < 0.8:
                del out[key]
            elif kind < 0.9:
                out[r.choice(ODD_TEXT) + key] = r.choice(ODD_VALUES)
            else:
                out[key] = [v[key]] * r.randint(2, 8)
            return out
        if isinstance(v, list) and v and depth < 6 and r.random() < 0.85:
            out = list(v)
            i = r.randrange(len(out))
            if r.random() < 0.8:
                out[i] = self.value(out[i], depth + 1)
            else:
                out += out * r.randint(1, 8)
            return out
        if isinstance(v, str) and v and r.random() < 0.5:
            at = r.randrange(len(v) + 1)
            return v[:at] + r.choice(ODD_TEXT) + v[at:]
        return r.choice(ODD_VALUES)

    def json_text(self, doc) -> bytes:
        """A document as JSON text, now and then with its bytes mutated too."""
        text = json.dumps(doc, default=str).encode("utf-8", "surrogatepass")
        r = self.rng
        for _ in range(r.choice((0, 0, 1, 2))):
            at = r.randrange(len(text) + 1)
            text = text[:at] + r.choice(ODD_BYTES + [b"{", b"]", b'"', b",", b"1e99999", b"-", b"9" * 5000]) + \
                text[at + r.randint(0, 3):]
        return text
