"""Which of the parsers' literal needles a text (or a log's raw head) holds: one pass over a long
text for all of them (hyperscan, when installed), one substring search each otherwise."""

from __future__ import annotations

from troubleshoot.scan.ansi import ANSI_BYTES as _ANSI_BYTES

# Until this many bytes have been searched in this process, a search per needle costs less than
# loading the database for all; from then on one pass costs less, whatever the text's length.
ONE_PASS_CHARS = 64 << 10
_searched: dict[tuple[str, ...], int] = {}  # bytes searched so far per needle set, in this process


def needles_of(table) -> tuple[str, ...]:
    """Every needle of a table of (parser, needles), each once, in order."""
    return tuple(dict.fromkeys(n for _, ns in table for n in ns))


def needles_in(text: str, needles: tuple[str, ...]) -> set[str]:
    """The `needles` that `text` holds (one starting with "\\n" also at its very start)."""
    # All needles are ASCII, and UTF-8 spells no other character with an ASCII byte: a needle
    # is in the text exactly when its bytes are in the text's UTF-8.
    return _needles_in_raw(text.encode("utf-8", "surrogatepass"), needles)


def needles_in_bytes(data: bytes, needles: tuple[str, ...]) -> set[str]:
    """At least the `needles` that `read()` finds in the text of `data`. Decoding keeps every
    ASCII byte (so every needle) as it is; stripping colour can make a needle only on a line
    that holds an escape sequence, so those lines alone are searched stripped too (a stripped
    copy of the whole head would add 4 MiB to the peak memory of a coloured log's scan)."""
    present = _needles_in_raw(data, needles)
    if b"\x1b" in data:
        coloured, find, rfind = [], data.find, data.rfind
        pos = find(b"\x1b")
        while pos >= 0:
            stop = find(b"\n", pos)
            stop = len(data) if stop < 0 else stop
            coloured.append(data[rfind(b"\n", 0, pos) + 1 : stop])
            pos = find(b"\x1b", stop)
        # Each stripped line after a newline, as it is in the text (a needle may start with one).
        present |= _needles_in_raw(b"\n" + _ANSI_BYTES.sub(b"", b"\n".join(coloured)), needles)
    return present


def _needles_in_raw(data: bytes, needles: tuple[str, ...]) -> set[str]:
    found = None
    _searched[needles] = searched = _searched.get(needles, 0) + len(data)
    if searched >= ONE_PASS_CHARS:
        # One pass for all needles (hyperscan), not one per needle: for a long text, or for
        # short ones that add up (the heads of a folder of rank logs).
        from troubleshoot.scan import hsdb

        found = hsdb.literals_found(needles, data)
    if found is None:  # a short text, or no hyperscan
        present = {n for n in needles if n.encode() in data}
    else:
        present = {needles[i] for i in found}
    present.update(n for n in needles if n[0] == "\n" and data.startswith(n[1:].encode()))
    return present
