"""The TUI's Markdown export: the report of the diagnoses, then the machine's facts and the
log's evidence lines, each in a fenced block that none of its lines can close (a hostname or a
log line holding ``` stays inside). The whole report is terminal-safe: it is read with `cat` too."""

from __future__ import annotations

from typing import Sequence

from troubleshoot.model import Diagnosis
from troubleshoot.textsafe import markdown_fence, terminal_safe


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
    lines: list[str] = []
    for d in diagnoses[:3]:
        lines += [f"{e.line:>7} | {terminal_safe(e.text, keep_newlines=False)}"
                  for e in d.evidence if e.source == "log"]
    return "\n".join(dict.fromkeys(lines))
