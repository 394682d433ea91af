"""State dumps pasted into a log, read as facts of the machine the log came from.

A user who pastes `nvidia-smi`, `nvidia-smi -q`, `lsmod`, `lspci -vv`, `ldconfig -p`, `docker info`,
`pip list`/`conda list` or `python -m torch.utils.collect_env` next to an error has given the
same facts a probe would read; one who pastes monitoring loops (`nvidia-smi dmon`, `top`,
`vmstat`, `iostat`...) or a `troubleshoot run --format json` report has given the `run.*`
facts `troubleshoot run`'s watcher measures (troubleshoot.paste.monitor, .runreport). `read()`
turns them into facts in the snapshot's shape (.reader), and `merge()` lays them over the probed
facts (or stands alone with --no-probe), recording per fact the pasted line that showed it, so
that a diagnosis names that line as evidence (.overlay).

Only the head of a log is read for dumps (HEAD_BYTES): pasted logs are short, and a job that
prints its environment does so at the start. Which parsers run is decided by literal needles
(.parsers, .needles); each parser lives in its own module, imported when it first runs.
"""

from __future__ import annotations

from troubleshoot.paste.overlay import LINES_KEY, merge
from troubleshoot.paste.reader import HEAD_BYTES, Pasted, read, read_head

__all__ = ["HEAD_BYTES", "LINES_KEY", "Pasted", "merge", "read", "read_head"]
