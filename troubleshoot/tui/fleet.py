"""The fleet view: a node list next to the findings and diagnoses of the selected node.

Opened by `troubleshoot fleet diagnose DIR --format tui`; it renders a `FleetResult` (each
diagnosis through its report.views.DiagnosisView) and holds no diagnosis logic. Text from
snapshots and logs is shown as plain text (never markup) with control characters made visible.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import DataTable, Footer, Header, Static

from troubleshoot.textsafe import terminal_safe

_SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def node_rows(res) -> list[tuple[str, int, str]]:
    """(node, number of findings and diagnoses, the worst one in a few words), nodes with most first."""
    rows = []
    by_node = res.findings_by_node()
    for node in res.nodes:
        findings = by_node.get(node, [])
        diags = res.per_node.get(node, [])
        worst = diags[0].symptom if diags else (findings[0].what if findings else "ok")
        rows.append((node, len(findings) + len(diags), worst))
    return sorted(rows, key=lambda r: (-r[1], r[0]))


def node_detail(res, node: str) -> Text:
    out = Text()
    out.append(terminal_safe(node, False) + "\n", style="bold")
    findings = [f for f in res.findings if f.node == node]
    diags = res.per_node.get(node, [])
    if not findings and not diags:
        out.append("No drift, no outlier, no diagnosis.\n")
    if findings:
        out.append("\nCompared with the other nodes\n", style="bold underline")
        for f in findings:
            out.append(f"  {f.kind.upper():<8}", style="magenta")
            out.append(terminal_safe(f.text, False) + "\n")
    if diags:
        from troubleshoot.report.views import diagnosis_view

        out.append("\nDiagnoses\n", style="bold underline")
        for v in map(diagnosis_view, diags):
            out.append(f"  [{v.severity.upper()}] ", style=_SEVERITY_STYLE.get(v.severity, ""))
            out.append(v.title + "\n")
            out.append(f"      symptom {v.symptom} · rule {v.rule}", style="dim")
            if v.ranks:
                out.append(f" · ranks {', '.join(map(str, v.ranks))}", style="dim")
            out.append("\n")
            for e in v.evidence[:3]:
                out.append("      " + e.text[:200] + "\n", style="dim")
    if res.headline:
        out.append("\nThe job\n", style="bold underline")
        out.append("  " + terminal_safe(res.headline, False) + "\n")
    return out


class FleetApp(App):
    TITLE = "troubleshoot fleet"
    BINDINGS = [Binding("q", "quit", "Quit")]
    CSS = """
    #nodes { width: 40%; min-width: 24; }
    #detail-scroll { width: 1fr; padding: 0 1; }
    """

    def __init__(self, res):
        super().__init__()
        self.res = res

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal():
            yield DataTable(id="nodes", cursor_type="row", zebra_stripes=True)
            with VerticalScroll(id="detail-scroll"):
                yield Static(id="detail", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#nodes", DataTable)
        table.add_columns("node", "#", "worst")
        for node, n, worst in node_rows(self.res):
            table.add_row(terminal_safe(node, False), str(n), terminal_safe(worst, False), key=node)
        n_bad = sum(1 for _, n, _ in node_rows(self.res) if n)
        self.sub_title = f"{len(self.res.nodes)} nodes, {n_bad} with findings"
        table.focus()
        if self.res.nodes:
            self.show(node_rows(self.res)[0][0])

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key is not None and event.row_key.value is not None:
            self.show(event.row_key.value)

    def show(self, node: str) -> None:
        self.query_one("#detail", Static).update(node_detail(self.res, node))


def run_fleet_tui(res) -> int:
    FleetApp(res).run()
    return 0
