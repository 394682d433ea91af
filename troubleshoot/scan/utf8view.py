"""A chunk of log as the verifier reads it, for a first pass that reads only valid UTF-8 (RE2).

The verifier decodes each line with invalid UTF-8 replaced by U+FFFD, so `.`, `\\S` or `[^ ]`
match where a stray byte was. RE2 in UTF-8 mode matches nothing there: a line such as
`OSError: /opt/caf\\xe9/libcudnn.so.8: cannot open ...` would never be proposed to the verifier,
while hyperscan (which reads bytes) proposes it. A chunk with invalid UTF-8 is therefore searched as
its repaired copy, whose lines are the chunk's lines, each decoding to the same text; the
copy's line spans are then mapped back to the chunk's.
"""

from __future__ import annotations

from itertools import accumulate
from typing import Iterable, Iterator, Sequence

Span = tuple[int, int, "Sequence[int] | None"]


def repaired(chunk: bytes | bytearray) -> bytes | None:
    """The chunk with each invalid UTF-8 sequence replaced by U+FFFD, as the verifier decodes
    it; None when the chunk is valid (nearly always: ASCII is checked at memory speed)."""
    if chunk.isascii():
        return None
    try:
        chunk.decode("utf-8")
    except UnicodeDecodeError:
        # A newline is never part of an invalid sequence, so every line keeps its place.
        return chunk.decode("utf-8", "replace").encode("utf-8", "surrogatepass")
    return None


def mapped_back(spans: Iterable[Span], copy: bytes, chunk: bytes | bytearray) -> Iterator[Span]:
    """Line spans of `copy` (in line order) as the same lines' spans in `chunk`."""
    # Where each line of the chunk starts, less its number: prefix sums of the line lengths.
    lengths = list(accumulate(map(len, chunk.split(b"\n")), initial=0))
    line = 0
    seen = 0  # offset in the copy up to which newlines are counted into `line`
    for start, _end, idxs in spans:
        line += copy.count(b"\n", seen, start)
        seen = start
        yield lengths[line] + line, lengths[line + 1] + line, idxs
