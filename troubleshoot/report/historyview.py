"""What every front end shows of an applied fix (`history`, the support bundle, the TUI's History
tab): its view model, built by one function from the journal's entry. Kept apart from the
diagnosis's views, which every diagnosis imports."""

from typing import Any, Mapping, Protocol

from troubleshoot.records import record
from troubleshoot.report.views import THIS_MACHINE, safe_line


@record(frozen=True)
class StepView:
    index: int
    kind: str
    title: str
    status: str
    target: str  # the file it changed, or ""


@record(frozen=True)
class HistoryView:
    """An applied fix as the journal records it; a journal that cannot be trusted is listed
    with status "corrupt" and why, and can be neither trusted nor undone."""

    id: str
    status: str
    fixer: str
    title: str  # the fix's title, else its fixer; for a corrupt journal, why it is not trusted
    root: str  # the folder it changed files under; "" for this machine
    where: str  # the same, worded for a column: "/ (this machine)" when there is no root
    started: str
    steps: tuple[StepView, ...]
    undoable: bool  # undo can be asked (not done already, the journal trusted)
    record: Mapping[str, Any]  # the row of `history --format json`


class JournalEntry(Protocol):
    """What a view reads of fixes.journal.Entry (the fix service sits beside the reports, so
    neither imports the other)."""

    data: Mapping[str, Any]


def history_view(eid: str, entry: JournalEntry | str) -> HistoryView:
    """`entry`: the journal's entry, or why it could not be read (journal.entries())."""
    if isinstance(entry, str):
        return HistoryView(id=safe_line(eid), status="corrupt", fixer="", title=safe_line(entry), root="",
                           where="", started="", steps=(), undoable=False,
                           record={"id": eid, "status": "corrupt", "error": entry})
    d = entry.data
    steps = tuple(StepView(index=s["index"] if isinstance(s.get("index"), int) else n,
                           kind=safe_line(s.get("kind") or ""), title=safe_line(s.get("title") or ""),
                           status=safe_line(s.get("status") or ""), target=safe_line(s.get("target") or ""))
                  for n, s in enumerate((s for s in d.get("steps") or () if isinstance(s, dict)), 1))
    root = safe_line(d.get("root") or "")
    record = {"id": eid, "fixer": d.get("fixer"), "title": d.get("title"), "status": d.get("status"),
              "started": d.get("started"), "root": d.get("root"), "params": d.get("params"),
              "verify": d.get("verify"), "rung": d.get("rung")}
    return HistoryView(id=safe_line(eid), status=safe_line(d.get("status") or "?"),
                       fixer=safe_line(d.get("fixer") or ""), title=safe_line(d.get("title") or d.get("fixer") or ""),
                       root=root, where=root or THIS_MACHINE,
                       started=safe_line(d.get("started") or ""), steps=steps,
                       undoable=d.get("status") != "undone", record=record)
