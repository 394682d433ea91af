"""The Machine tab: which probes ran and how, the GPU table, every fact read, and the facts the
diagnoses used (starred with their rule)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.css.query import NoMatches
from textual.widgets import Static

from troubleshoot.report.views import LOCAL_FACTS
from troubleshoot.textsafe import terminal_safe
from troubleshoot.tui.views import gpu_view, plain

if TYPE_CHECKING:
    from troubleshoot.report.views import DiagnosisView


class MachinePane(VerticalScroll):
    def __init__(self) -> None:
        super().__init__(id="machine-scroll")

    def compose(self) -> ComposeResult:
        yield Static("", id="probe-status", markup=False)
        yield Static("", id="gpu-table", markup=False)
        yield Static("", id="machine-facts", markup=False)

    def show_probes(self, status: dict[str, str], probed: bool) -> None:
        """`status`: probe name -> its state; `probed`: probes run or a snapshot replayed."""
        try:
            line = self.query_one("#probe-status", Static)
        except NoMatches:  # a probe reported while the app was shutting down
            return
        if not probed:
            line.update("Probes not run (--no-probe): diagnoses use the log alone.")
            return
        parts = [f"{a}: {s}" for a, s in status.items()]
        line.update(plain("Probes  " + "  ·  ".join(parts)) if parts else "Probes starting…")

    def show_facts(self, facts: dict | None, diagnoses: list[DiagnosisView], probing: bool, probed: bool) -> None:
        """`probing`: the probes run now; `probed`: as for show_probes."""
        from troubleshoot.report.probe_text import render as probe_text

        try:
            gpu = self.query_one("#gpu-table", Static)
        except NoMatches:
            return
        gpu.update(gpu_view(facts, probing=probing))
        text = terminal_safe(probe_text(facts)) if facts else ("No facts yet." if probed else
                                                                "No machine facts (--no-probe).")
        # The tab shows the facts of this machine or of its snapshot; a fact from elsewhere (state
        # pasted into the log, another node) says where it comes from.
        used = [(f, v.rule + ("" if f.machine == LOCAL_FACTS else f", from {f.machine}")) for v in diagnoses
                for f in v.facts]
        if used:
            text += "\nFacts used by the diagnoses:\n" + "\n".join(
                f"  ★ {f.path} = {f.value}   ({why})" for f, why in used)
        self.query_one("#machine-facts", Static).update(text)
