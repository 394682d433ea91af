"""A merged multi-rank log split by its line labels into one spool file per rank, in one pass
of fixed-size reads: memory does not grow with the length of a line, nor time with its square.

A line is never joined into one object: joining the unfinished tail to each new read copies a
line that spans many reads once per read and holds it several times over (a 300 MB line would
take minutes and gigabytes). Each read is cut at its newlines and the pieces written out as they
come; only a line's first LABEL_PEEK bytes are held back, until its label can be read.
"""
from __future__ import annotations

import os
from array import array
from itertools import islice
from typing import BinaryIO, Callable, Iterable

CHUNK_SIZE = 1 << 20
# Longer than any label the caller's `label` reads (`[default123456]: `, `  12: [rank3]: `), and
# than what it looks at after one (a space or not).
LABEL_PEEK = 64
SPOOL_BUFFER = 64 << 10  # per rank: a log of a thousand ranks keeps 64 MB of buffers, not 1 GB

Label = Callable[[bytes], tuple[int | None, int]]
Spool = tuple["int | None", str, array]  # (rank, path, the merged log's number of each line)


class _Spools:
    """One spool file per rank, opened when the rank's first line comes, with its lines' numbers
    in the merged log."""

    def __init__(self, folder: str):
        self.folder = folder
        self.files: dict[int | None, tuple[BinaryIO, str, array]] = {}
        self.route: dict[int | None, tuple[Callable, Callable]] = {}  # rank -> (write, add a number)

    def open(self, rank: int | None) -> tuple[Callable, Callable]:
        path = os.path.join(self.folder, f"rank-{'none' if rank is None else rank}.log")
        f = open(path, "wb", buffering=SPOOL_BUFFER)
        numbers = array("L")
        self.files[rank] = (f, path, numbers)
        route = self.route[rank] = (f.write, numbers.append)
        return route

    def close(self) -> None:
        for f, _, _ in self.files.values():
            f.close()

    def result(self) -> list[Spool]:
        found = [(rank, path, lines) for rank, (_, path, lines) in self.files.items()]
        return sorted(found, key=lambda s: (s[0] is None, s[0] or 0))


def split(stream: BinaryIO, folder: str, label: Label, chunk_size: int = CHUNK_SIZE) -> list[Spool]:
    """Spool every line of `stream` into `folder`, one file per rank (unlabelled lines: rank
    None), its label cut (`label(line) -> (rank, length of the label)`) and a newline after the
    last line if it had none. Returns (rank, path, the original number of each spooled line)."""
    spools = _Spools(folder)
    try:
        _spool(stream, spools, label, chunk_size)
    finally:
        spools.close()
    return spools.result()


def _spool(stream: BinaryIO, spools: _Spools, label: Label, chunk_size: int) -> None:
    number = 0
    head = b""  # the start of a line whose label cannot be read yet (under LABEL_PEEK bytes)
    into: Callable | None = None  # where the rest of the current line goes, once its label is read
    while True:
        block = stream.read(chunk_size)
        if not block:
            break
        pieces = block.split(b"\n")
        tail = pieces.pop()  # after the read's last newline: a line not ended yet
        first = 0
        if into is not None and pieces:  # the end of a line begun in an earlier read
            into(pieces[0] + b"\n")
            into, first = None, 1
        elif into is None and head:
            if pieces:
                pieces[0] = head + pieces[0]
            else:
                tail = head + tail
            head = b""
        number = _whole_lines(islice(pieces, first, None), number, spools, label)
        if into is not None:
            into(tail)
        elif len(tail) < LABEL_PEEK:
            head = tail
        else:
            number += 1
            into = _start(tail, number, spools, label)
    if head:
        number += 1
        into = _start(head, number, spools, label)
    if into is not None:
        into(b"\n")


def _whole_lines(pieces: Iterable[bytes], number: int, spools: _Spools, label: Label) -> int:
    """Spool whole lines (without their newline) numbered from number + 1; the last number."""
    route, get = spools.open, spools.route.get
    for piece in pieces:
        number += 1
        rank, cut = label(piece)
        write, add = get(rank) or route(rank)
        add(number)
        write((piece[cut:] if cut else piece) + b"\n")
    return number


def _start(piece: bytes, number: int, spools: _Spools, label: Label) -> Callable:
    """The first part of a line: its label read, the rest written; where its next parts go."""
    rank, cut = label(piece)
    write, add = spools.route.get(rank) or spools.open(rank)
    add(number)
    write(memoryview(piece)[cut:])
    return write
