"""Many logs of one command read on every core: the logs cut into one share of about equal bytes
per core, in their order; this process reads the first share while a forked child reads each
other one and sends back what it read, log by log. The result is the one-process result, in log
order.

A folder of a thousand small rank logs is the case this is for: one big file is already cut
into ranges by the scanner (scan/forked.py), but files of 24 KB each are far below what it cuts.
A child whose share fails (it dies, it cannot read a log, it is killed) only costs time: this
process reads whatever that child did not send, and so meets any error itself.
"""

from __future__ import annotations

import bisect
import itertools
from typing import Callable, Sequence, TypeVar

from troubleshoot.scan import threaded

T = TypeVar("T")

# Fewer logs, or fewer bytes, are read in this process alone: a child's start and the pickles of
# what it read cost a few milliseconds, as much as scanning a dozen small logs.
MIN_LOGS = 16
MIN_BYTES = 1 << 20
_DONE = "done"


def worth_forking(logs: int, size: int) -> bool:
    """Whether `logs` logs of `size` bytes in all repay reading them in forked children (and the
    process can fork safely: one thread, Linux, $TROUBLESHOOT_SCAN_FORK not 0)."""
    if logs < MIN_LOGS or size < MIN_BYTES:
        return False
    from troubleshoot.scan import children

    return threaded.scan_threads(size, MIN_BYTES) > 0 and children.forkable()


def shares(sizes: Sequence[int]) -> list[range] | None:
    """The logs (by their sizes, in order) cut into one run of about equal bytes per core, up to
    threaded.MAX_THREADS, each cut where the bytes before it come nearest its share; None when
    one share would take them all."""
    parts = min(threaded.scan_threads(sum(sizes), MIN_BYTES) + 1, len(sizes))
    if parts < 2:
        return None
    before = list(itertools.accumulate(sizes, initial=0))  # before[i]: bytes of the logs before log i
    cuts = [0]
    for k in range(1, parts):
        want = before[-1] * k / parts
        at = bisect.bisect_left(before, want, cuts[-1] + 1, len(sizes))
        if at > cuts[-1] + 1 and want - before[at - 1] < before[at] - want:
            at -= 1
        if at >= len(sizes):
            break
        cuts.append(at)
    cuts.append(len(sizes))
    out = [range(a, b) for a, b in zip(cuts, cuts[1:])]
    return out if len(out) > 1 else None


def read_forked(parts: list[range], read: Callable[[int], list[T]]) -> list[T]:
    """`read(i)` of every log, the first share here and each other one in a forked child; in log
    order. Every child has ended when this returns or raises."""
    from troubleshoot.scan import children

    kids: list = []
    try:
        for part in parts[1:]:
            children.start(lambda send, part=part: _child(part, read, send), kids)
    except OSError:
        pass  # no more processes: what no child took is read here
    try:
        out: list[T] = []
        for i in parts[0]:
            out += read(i)
            for kid in kids:
                kid.drain()  # a child never waits on a full pipe while this one reads
        for part, kid in zip(parts[1:], kids):
            out += _collect(part, kid, read)
        for part in parts[1 + len(kids):]:
            out += [u for i in part for u in read(i)]
        return out
    finally:
        for kid in kids:
            kid.kill()


def _child(part: range, read: Callable[[int], list], send) -> None:  # pragma: no cover - a forked child
    for i in part:
        send((i, read(i)))
    send(_DONE)


def _collect(part: range, kid, read: Callable[[int], list[T]]) -> list[T]:
    """What a child read of its share, and what it did not, read here."""
    from troubleshoot.scan import children

    got: dict[int, list[T]] = {}
    for message in kid.messages() or ():
        item = children.load(message)
        if item != _DONE:
            got[item[0]] = item[1]
    return [u for i in part for u in (got[i] if i in got else read(i))]
