"""Scans of small test files cut into forked ranges, as the scan of a large log is.

A scan forks only for a file of forked.FORK_MIN_BYTES or more, and only while this process runs
one thread; a test runner keeps helper threads, idle, which hold no lock a forked child needs.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import pytest

from troubleshoot.scan import forked

if TYPE_CHECKING:
    from typing import Iterator


@contextlib.contextmanager
def forced_fork() -> Iterator[None]:
    """Within it, a scan of a regular file with helpers forks whatever the file's size and
    whatever threads run (a stream that is not a file still never forks)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(forked, "FORK_MIN_BYTES", 0)
        mp.setattr(forked, "forkable", lambda: True)
        yield
