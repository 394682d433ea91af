"""Match reports packed into one int each: a byte offset and a pattern (or expression) index.

A report is the offset shifted left by INDEX_BITS, or'ed with the index: one int, cheap to
collect in hyperscan's callback and to sort, and sorting orders reports by offset first (by
index among reports at one offset). An index must fit in INDEX_BITS, or it would bleed into the
offset and the report would name another place and another pattern: `pack` refuses an index
that does not fit, and a negative offset or index, instead of wrapping.
"""

from __future__ import annotations

INDEX_BITS = 20
INDEX_LIMIT = 1 << INDEX_BITS  # indexes run from 0 to INDEX_LIMIT - 1
_INDEX_MASK = INDEX_LIMIT - 1


class PackingError(ValueError):
    """An offset or index that a report cannot hold."""


def pack(offset: int, index: int) -> int:
    """The report of `index` at byte `offset`."""
    if not 0 <= index < INDEX_LIMIT or offset < 0:
        raise PackingError(f"cannot pack offset {offset} with index {index}: "
                           f"the index must be 0 to {INDEX_LIMIT - 1}, the offset 0 or more")
    return offset << INDEX_BITS | index


def offset_of(report: int) -> int:
    return report >> INDEX_BITS


def index_of(report: int) -> int:
    return report & _INDEX_MASK


def moved(report: int, offset: int) -> int:
    """The same index reported at `offset` instead."""
    return pack(offset, report & _INDEX_MASK)


def first_past(offset: int) -> int:
    """The lowest report past `offset`: every report at `offset` or before compares below it."""
    return (offset + 1) << INDEX_BITS


def check_count(count: int) -> None:
    """Refuses `count` indexes (0 to count - 1) when the last would not fit in a report."""
    if count > INDEX_LIMIT:
        raise PackingError(f"{count} patterns: a report holds indexes below {INDEX_LIMIT}")
