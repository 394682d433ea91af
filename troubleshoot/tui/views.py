"""What the TUI's tables and panes show, as pure functions of the view models (report.views)
and the machine's facts.

The views' strings are terminal-safe already (control and escape sequences made visible, one
line); what else came from a rule, a log or a snapshot goes through `safe`. Every such string
reaches a widget as a `rich.text.Text`, never as a str a widget could parse as markup (a rule
title `[/dev/shm]` is shown as written).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich import box
from rich.table import Table
from rich.text import Text

from troubleshoot.console import plural
from troubleshoot.report.shapes import items, mapping
from troubleshoot.report.views import near, safe_line as safe

if TYPE_CHECKING:
    from troubleshoot.report.historyview import HistoryView
    from troubleshoot.report.ruleview import RuleView
    from troubleshoot.report.views import DiagnosisView

SEV_MARK = {"error": "✖ ERROR", "warning": "▲ WARN", "info": "● INFO"}
SEV_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
CELL_PAD = 2  # a DataTable cell has one column of padding on each side
SCROLLBAR = 2


def plain(text: object, style: str = "") -> Text:
    return Text(safe(text), style=style)


def fit(text: str, width: int) -> str:
    """Cut to `width` cells with an ellipsis (the end of a title matters least)."""
    if width <= 0:
        return ""
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def fit_left(text: str, width: int) -> str:
    """Cut from the left: the end of a path tells which one it is."""
    if width <= 0:
        return ""
    return text if len(text) <= width else "…" + text[len(text) - width + 1:]


# ------------------------------------------------------------------ diagnoses

@dataclass(frozen=True)
class DiagColumns:
    severity: int
    symptom: int
    title: int


def diag_columns(symptoms: list[str], table_width: int) -> DiagColumns:
    """The symptom column is as wide as the longest symptom (never cut); the title takes the rest."""
    sev = max([len("severity")] + [len(s) for s in SEV_MARK.values()])
    sym = max([len("symptom")] + [len(s) for s in symptoms])
    title = table_width - SCROLLBAR - 3 * CELL_PAD - sev - sym
    return DiagColumns(sev, sym, max(title, len("title")))


def diag_row(v: DiagnosisView, cols: DiagColumns) -> tuple[Text, Text, Text]:
    return (Text(SEV_MARK.get(v.severity, v.severity), style=SEV_STYLE.get(v.severity, "")),
            plain(v.symptom),
            plain(fit(v.title, cols.title)))


def evidence_lines(diagnoses: list[DiagnosisView]) -> list[int]:
    """The log lines any diagnosis quotes, in order, once each."""
    return sorted({e.line for v in diagnoses for e in v.evidence if e.source == "log" and e.line})


# ------------------------------------------------------------------ rules

def rule_matches(rule: RuleView, query: str) -> bool:
    """Every word of the filter appears in the rule's id, symptom, title, explanation or patterns."""
    words = query.lower().split()
    if not words:
        return True
    hay = " ".join([rule.id, rule.symptom, rule.severity, rule.title, rule.explain]
                   + [source for label, source in rule.patterns if label == "log"]).lower()
    return all(w in hay for w in words)


@dataclass(frozen=True)
class RuleColumns:
    id: int
    symptom: int
    severity: int


def rule_columns(rules: list[RuleView], table_width: int) -> RuleColumns:
    sev = len("sev.")
    sym = max([len("symptom")] + [len(r.symptom) for r in rules])
    longest = max([len("id")] + [len(r.id) for r in rules])
    room = table_width - SCROLLBAR - 3 * CELL_PAD - sev - sym
    return RuleColumns(max(min(longest, room), 12), sym, sev)


def rule_row(rule: RuleView, cols: RuleColumns) -> tuple[Text, Text, Text]:
    sev = {"error": "err", "warning": "warn", "info": "info"}.get(rule.severity, rule.severity)
    return plain(fit(rule.id, cols.id)), plain(rule.symptom), Text(sev, style=SEV_STYLE.get(rule.severity, ""))


def rule_detail(rule: RuleView) -> Text:
    out = Text()
    out.append(rule.title + "\n", style="bold")
    out.append(f"{rule.id}\n{rule.severity} · symptom {rule.symptom} · confidence {rule.confidence}\n")
    out.append(f"from {rule.pack}: {near(rule.path)}:{rule.line}\n", style="dim")
    for label, source in rule.patterns:
        out.append(f"\n{label}: ", style="bold")
        out.append(source)
    for source in rule.facts:
        out.append("\nfacts: ", style="bold")
        out.append(source)
    for kind, lines in rule.examples:
        out.append(f"\n\nexample ({kind}):", style="bold")
        for ln in lines[:12]:
            out.append("\n  " + ln)
    return out


# ------------------------------------------------------------------ history

def history_row(entry: HistoryView, width: int) -> tuple[Text, Text, Text, Text]:
    """id, status, where (the target root), what: the where column is cut from the left."""
    if entry.status == "corrupt":  # a journal that could not be read: the reason
        return plain(entry.id), Text("corrupt", style="red"), Text(""), plain(fit(entry.title, 60))
    room = width - SCROLLBAR - 4 * CELL_PAD - len(entry.id) - len("verify-failed")
    where_w = min(len(entry.where), max(12, room // 2))
    return (plain(entry.id), plain(entry.status), plain(fit_left(entry.where, where_w)),
            plain(fit(entry.title, max(12, room - where_w))))


# ------------------------------------------------------------------ machine

def gpu_view(facts: dict | None, probing: bool):
    """A GPU table that keeps PCIe, throttle and ECC/Xid at 80 columns (two lines a GPU), or
    one line saying why there is none (the NVML error)."""
    nv = mapping(mapping(facts).get("nvml"))
    if not nv:
        return Text("GPUs: waiting for the nvml probe…" if probing else "GPUs: no NVML facts (not probed: --no-probe, "
                    "or the snapshot has none)", style="italic")
    gpus = items(nv.get("gpus"))
    if not gpus:
        why = nv.get("error") or ("NVML found no GPU" if nv.get("available") else "NVML unavailable")
        return plain(f"GPUs: none listed. NVML: {why}", style="yellow")
    xids = [mapping(x) for x in items(mapping(mapping(facts).get("kernel")).get("xid_events"))]
    return GpuTable([_gpu_cells(mapping(g), xids) for g in gpus])


def _gpu_cells(g: dict, xids: list[dict]) -> tuple[str, ...]:
    throttle = ", ".join(str(r) for r in items(g.get("throttle_reasons")) if r != "gpu_idle") or "-"
    ecc = f"ECC {g.get('ecc_uncorrected_volatile')}" if g.get("ecc_uncorrected_volatile") else "ECC 0"
    mine = [x for x in xids if _same_pci(x.get("pci"), g.get("pci_bus_id"))]
    xid = ",".join(str(x.get("code")) for x in mine[-3:]) or "-"
    cells = (g.get("index"), g.get("name"), f"{g.get('memory_used_mib')}/{g.get('memory_total_mib')} MiB",
             f"{g.get('utilization_gpu')}% · {g.get('temperature_c')}°C", f"{g.get('power_w')}/{g.get('power_limit_w')} W",
             f"gen{g.get('pcie_gen_current')} x{g.get('pcie_width_current')} / "
             f"gen{g.get('pcie_gen_max')} x{g.get('pcie_width_max')}",
             f"throttle {throttle} · {ecc} · Xid {xid}")
    return tuple(safe(c) for c in cells)  # a snapshot's or a plugin's values are data


class GpuTable:
    """Two lines a GPU in a table from 74 columns; below that, each GPU as a short block."""

    def __init__(self, rows):
        self.rows = rows

    def __rich_console__(self, console, options):
        if options.max_width < 74:
            for idx, name, mem, load, power, pcie, health in self.rows:
                yield Text(f"[{idx}] {name} · {mem}", style="bold")
                yield Text(f"    {load} · {power}")
                yield Text(f"    PCIe {pcie}")
                yield Text(f"    {health}")
            return
        t = Table(box=box.SIMPLE_HEAD, expand=False, pad_edge=False, show_edge=False)
        for head in ("GPU", "name · memory", "load · power"):
            t.add_column(head, no_wrap=True)
        t.add_column("PCIe · throttle · ECC/Xid", overflow="fold", min_width=26)
        for idx, name, mem, load, power, pcie, health in self.rows:
            t.add_row(Text(idx), Text(f"{name}\n{mem}"), Text(f"{load}\n{power}"), Text(f"{pcie}\n{health}"))
        yield t


def _same_pci(event: str | None, gpu: str | None) -> bool:
    """An Xid names its GPU by PCI address, written with a 4- or 8-digit domain."""
    if not event or not gpu:
        return True
    return str(event).lower().split(":", 1)[-1] == str(gpu).lower().split(":", 1)[-1]


# ------------------------------------------------------------------ status and keys

@dataclass
class Progress:
    """What is running now, for the status line."""

    rules: bool = False
    probes_done: int = 0
    probes_total: int = 0  # 0: no probe running
    scan_done: int = 0
    scan_total: int = 0
    scanning: bool = False
    diagnosing: bool = False

    def busy(self) -> bool:
        return self.rules or self.probes_total > 0 or self.scanning or self.diagnosing

    def text(self) -> str:
        parts = []
        if self.rules:
            parts.append("loading rules…")
        if self.probes_total:
            parts.append(f"probing {self.probes_done}/{self.probes_total}")
        if self.scanning:
            pct = f" {100 * self.scan_done // self.scan_total} %" if self.scan_total else ""
            parts.append(f"scanning{pct}")
        if self.diagnosing:
            parts.append("diagnosing…")
        return " · ".join(parts)


def waiting(progress: Progress, result) -> str:
    """What the diagnoses' detail says while there is none: what runs, or what to do
    (`result`: the pipeline's last, None before the first)."""
    if progress.busy():
        msg = progress.text().replace("probing", "probing the machine").capitalize()
        return msg + "\nDiagnoses appear here as soon as they are found."
    if result is not None:
        return "No known problem found." + ("" if result.scan or result.lines else
                                           "\nOpen a log (o) or paste one (p) to diagnose a job.")
    return "Open a log (o) or paste one (p) to diagnose a job."


def status_line(source: str | None, lines: int | None, count: int | None, progress: Progress, extra: str = "") -> Text:
    out = Text()
    out.append("troubleshoot", style="bold")
    if source:
        out.append(" · " + safe(source))
    if lines is not None:
        out.append(" · " + plural(lines, "line"))
    if count is not None:
        out.append(f" · {count} diagnos{'i' if count == 1 else 'e'}s")
    if progress.busy():
        out.append(" · " + progress.text(), style="bold yellow")
    if extra:
        out.append(" · " + extra, style="bold")
    return out


# Keys shown per view: help and quit always come first, the command palette last if it fits.
KEYS: dict[str, list[tuple[str, str]]] = {
    "diagnoses": [("↑↓", "select"), ("enter", "detail"), ("f", "fix"), ("p", "paste"), ("e", "export"),
                  ("m l r h", "views")],
    "detail": [("esc", "back"), ("f", "fix"), ("e", "export")],
    "machine": [("d", "diagnoses"), ("^r", "refresh"), ("e", "export")],
    "log": [("n/N", "next/prev evidence"), ("p", "paste"), ("o", "open file"), ("d", "diagnoses")],
    "paste": [("^r", "diagnose"), ("^l", "clear"), ("esc", "leave")],
    "open": [("enter", "open"), ("esc", "leave")],
    "rules": [("/", "filter"), ("↑↓", "select"), ("R", "reload")],
    "filter": [("enter", "to table"), ("esc", "clear")],
    "history": [("↑↓", "select"), ("u", "undo")],
}


def key_bar(context: str, width: int, typing: bool) -> Text:
    """One footer line: help and quit first (with the keys that work while typing), then the
    view's keys that fit, then the palette."""
    head = [("F1", "help"), ("^q", "quit")] if typing else [("?", "help"), ("q", "quit")]
    tail = ("^p", "palette")
    out = Text()
    used = 0

    def add(key: str, what: str) -> bool:
        nonlocal used
        piece = len(key) + 1 + len(what) + (2 if used else 0)
        if used + piece > width:
            return False
        if used:
            out.append("  ")
        out.append(key, style="bold reverse")
        out.append(" " + what)
        used += piece
        return True

    for k, w in head:
        add(k, w)
    room = width - (len(tail[0]) + len(tail[1]) + 3)
    for k, w in KEYS.get(context, []):
        if used + len(k) + len(w) + 3 > room:
            break
        add(k, w)
    add(*tail)
    return out
