"""The TUI's Markdown export: the report of the diagnoses, then the machine's facts and the
log's evidence lines, each in a fenced block that none of its lines can close (a hostname or a
log line holding ``` stays inside). The whole report is terminal-safe: it is read with `cat` too."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from troubleshoot.textsafe import markdown_fence, terminal_safe

if TYPE_CHECKING:
    from textual.app import App

    from troubleshoot.model import Diagnosis


def default_path() -> str:
    """What the export screen offers: a new file in the current folder, named by the time."""
    return str(Path(f"troubleshoot-report-{time.strftime('%Y%m%d-%H%M%S')}.md").resolve())


def save(app: App, path: str, diagnoses: Sequence[Diagnosis], source: str, facts: dict | None,
         with_log: bool) -> None:
    """Write the report to `path` (the export screen checked it) and say so, or say why not."""
    from troubleshoot import safeio

    body = report_markdown(diagnoses, source, facts, with_log)
    shown = terminal_safe(path, keep_newlines=False)
    try:
        safeio.atomic_write(path, body.encode())
    except OSError as exc:
        app.notify(f"cannot write {shown}: {exc.strerror or exc}", severity="error", markup=False)
        return
    app.notify(f"Report saved to {shown}", title="Export", timeout=8, markup=False)


def report_markdown(diagnoses: Sequence[Diagnosis], source: str, facts: dict | None, with_log: bool) -> str:
    from troubleshoot.report import markdown
    from troubleshoot.report.probe_text import render as probe_text

    body = markdown.render(diagnoses, source)
    if facts:
        body += "\n## Machine\n\n" + markdown_fence(probe_text(facts).rstrip("\n")) + "\n"
    excerpt = log_excerpt(diagnoses) if with_log else ""
    if excerpt:
        body += "\n## Log excerpt\n\n" + markdown_fence(excerpt) + "\n"
    return terminal_safe(body)


def log_excerpt(diagnoses: Sequence[Diagnosis]) -> str:
    """The log lines the first three diagnoses quote, once each."""
    from troubleshoot.report.views import diagnosis_view

    lines: list[str] = []
    for v in map(diagnosis_view, diagnoses[:3]):
        lines += [f"{e.line:>7} | {e.text}" for e in v.evidence if e.source == "log"]
    return "\n".join(dict.fromkeys(lines))
