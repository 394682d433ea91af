"""Terminal escape sequences in logs: the one regex that strips them, a line as patterns see
it, whole chunks stripped for the finders that read them so, and the coloured lines of a chunk
gathered and stripped for hyperscan, which reads the rest of the chunk raw.

Lines are matched as a terminal shows them: colour codes in the middle of an error message
(`CUDA \\x1b[1mout of memory`) must not hide it. Stripping never removes a newline, so line
numbers hold.
"""

from __future__ import annotations

from typing import Sequence

from troubleshoot.lazyre import lazy
from troubleshoot.scan import packing
from troubleshoot.scan.candidates import Candidates
from troubleshoot.scan.ordering import report_pos

# One leading \x1b (not one per alternative): `re` then skips to each escape at memchr speed.
# Every escape form of ECMA-48 goes as a terminal consumes it: CSI (colours, cursor), OSC (title,
# clipboard, links) and the two-byte ones (`ESC c` resets the terminal, `ESC 7` saves the
# cursor, `ESC ( B` picks a character set). An ESC that starts none goes too, so that one pass
# leaves no ESC behind: a second pass (the chunk, then its line) finds nothing more to join
# ("\x1b\x1b]0;t\x07[0m" must not become a colour code once the title is gone).
# Compiled at first use: most logs hold no escape, and each is looked for first (`b"\x1b" in`).
_ESCAPE = r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b\n]*(?:\x07|\x1b\\)|[ -/]*[0-~])?"
ANSI_BYTES = lazy(_ESCAPE.encode("ascii"))
ANSI = lazy(_ESCAPE)  # the same, for decoded text
# Gathering a chunk's coloured lines costs per line, stripping the whole chunk per byte: with more
# than one coloured line per this many bytes (a log coloured throughout) whole chunks are stripped.
COLOURED_LINE_BYTES = 1024


def clean_line(raw: bytes) -> Sequence[str]:
    """Decode one raw line and split it into the segments that patterns see."""
    if b"\x1b" in raw:
        raw = ANSI_BYTES.sub(b"", raw)
    text = raw.decode("utf-8", errors="replace")
    return text.split("\r") if "\r" in text else (text,)


def prepared(buf: bytearray, end: int, finder: Candidates) -> tuple[bytes | bytearray, int]:
    """What the finder reads of buf[:end]: the buffer itself, or a copy (stripped of escape
    sequences unless the finder strips the lines that hold them itself)."""
    if finder.raw_ansi:
        return buf, end
    if buf.find(b"\x1b", 0, end) >= 0:
        with memoryview(buf) as view:
            chunk, escapes = ANSI_BYTES.subn(b"", view[:end])
        finder.stripped(escapes, end)
        return chunk, len(chunk)
    finder.stripped(0, end)
    if finder.zero_copy:
        return buf, end
    with memoryview(buf) as view:
        return bytes(view[:end]), end


class Escaped:
    """The lines of a chunk that hold escape sequences, stripped of them and joined, for a
    second scan: only these lines can match differently once stripped (the verifier reads
    every line stripped), and in most logs they are few, so gathering them costs less than
    stripping the whole chunk would."""

    def __init__(self, chunk, end: int):
        starts: list[int] = []
        pieces = []
        find, rfind = chunk.find, chunk.rfind
        add_start, add_piece = starts.append, pieces.append
        pos = find(b"\x1b", 0, end)
        while pos >= 0:
            start = rfind(b"\n", 0, pos) + 1
            stop = find(b"\n", pos, end)
            if stop < 0:
                stop = end
            add_start(start)
            add_piece(chunk[start:stop])
            pos = find(b"\x1b", stop, end)
        self.starts = starts  # where each line starts in the chunk
        self.text = ANSI_BYTES.sub(b"", b"\n".join(pieces))

    def reports(self, found: list[int]) -> list[int]:
        """Reports in `text` as reports on the chunk's lines, each at its line's start (which
        `report_pos` reads as that line)."""
        starts, text = self.starts, self.text
        if len(found) <= 16:  # counting newlines up to each report beats indexing every line
            return [packing.moved(r, starts[text.count(b"\n", 0, report_pos(text, packing.offset_of(r)))])
                    for r in found]
        from bisect import bisect_right

        offsets, at = [], 0  # where each stripped line starts in `text`
        for piece in text.split(b"\n"):
            offsets.append(at)
            at += len(piece) + 1
        return [packing.moved(r, starts[bisect_right(offsets, report_pos(text, packing.offset_of(r))) - 1])
                for r in found]
