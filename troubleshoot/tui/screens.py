"""Modal screens: fix preview and apply, confirmation, help."""

from __future__ import annotations

from rich.console import Group
from rich.syntax import Syntax
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Markdown, Static

HELP = """\
# troubleshoot

**Keys** (also in the footer; `ctrl+p` opens the command palette with every action)

| key | action |
|---|---|
| `d` `m` `l` `r` `h` | Diagnoses, Machine, Log, Rules, History |
| `↑` `↓` | select a diagnosis (its explanation, evidence and fixes show on the right) |
| `f` | preview the fixes of the selected diagnosis; apply from there |
| `u` | in History: undo the selected fix |
| `ctrl+r` | diagnose again; `R` reload rule files after editing |
| `e` | export a Markdown report (diagnoses, machine, log excerpt) |
| `q` | quit |

**Diagnoses** are ranked: causes before their consequences, errors before warnings, surer and
later evidence first. Severity is written out (ERROR, WARN, INFO), not only coloured.

**Machine** shows what the probes read: GPUs, driver and CUDA, frameworks, Docker, /dev/shm,
IO. Facts a diagnosis used are starred with the rule that used them.

**Log**: type a path and Enter to open a file, or paste into the text area and press
*Diagnose pasted text*. Started with `--follow PATH`, new diagnoses appear as the job writes.

**Fixes** are shown first: every command exactly as it will run, every file as a diff. Applying
asks for confirmation, backs up every file, and is undoable from History.
"""


class ConfirmScreen(ModalScreen[bool]):
    BINDINGS = [Binding("y", "yes", "Yes"), Binding("n,escape", "no", "No")]

    def __init__(self, question: str):
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(self.question, id="question", markup=False)
            with Horizontal(id="buttons"):
                yield Button("Yes (y)", id="yes", variant="warning")
                yield Button("No (n)", id="no", variant="primary")

    @on(Button.Pressed, "#yes")
    def action_yes(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#no")
    def action_no(self) -> None:
        self.dismiss(False)


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "close", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Markdown(HELP)
            yield Button("Close (Esc)", id="close")

    @on(Button.Pressed, "#close")
    def action_close(self) -> None:
        self.dismiss(None)


class FixScreen(ModalScreen[None]):
    """The plans of a diagnosis's fixes; apply asks first and reports each step."""

    BINDINGS = [Binding("a", "apply", "Apply"), Binding("escape,q", "close", "Close")]

    def __init__(self, diagnosis, facts: dict | None, root: str | None, plugins):
        super().__init__()
        self.diagnosis = diagnosis
        self.facts = facts
        self.root = root
        self.plugins = plugins
        self.prepared: list = []
        self.errors: list[str] = []
        self.preview_text = ""

    def compose(self) -> ComposeResult:
        with Vertical(id="fix-dialog"):
            yield Static(f"Fixes for: {self.diagnosis.title}", id="fix-title", markup=False)
            with VerticalScroll(id="fix-body"):
                yield Static("Building the plan...", id="fix-preview", markup=False)
                yield Static("", id="fix-result", markup=False)
            with Horizontal(id="buttons"):
                yield Button("Apply (a)", id="apply", variant="warning", disabled=True)
                yield Button("Close (Esc)", id="close", variant="primary")

    def on_mount(self) -> None:
        self.build()

    @work(thread=True)
    def build(self) -> None:
        from troubleshoot.errors import TroubleshootError
        from troubleshoot.fixes import executor
        from troubleshoot.fixes.registry import load_fixers
        from troubleshoot.plugins import load_plugins

        plugins = self.plugins or load_plugins()
        fixers = load_fixers(plugins)
        for f in self.diagnosis.fixes:
            fixer = fixers.get(f.fixer)
            if fixer is None:
                self.errors.append(f"no fixer {f.fixer!r} is installed")
                continue
            try:
                plan = fixer.plan(fixer.validate(dict(f.params)), self.facts)
                self.prepared.append(executor.prepare(plan, self.root))
            except TroubleshootError as exc:
                self.errors.append(f"{f.fixer}: {exc}")
        self.app.call_from_thread(self._show)

    def _show(self) -> None:
        from troubleshoot.fixes import executor

        parts = []
        for prep in self.prepared:
            text = executor.preview(prep)
            self.preview_text += text
            for block in text.split("\n"):
                if block.strip().startswith(("---", "+++", "@@", "+", "-")) and len(block) > 3 and block[3] in "-+@ ":
                    parts.append(Syntax(block, "diff", theme="ansi_dark", background_color="default"))
                else:
                    parts.append(Text(block))
            if prep.needs_root and not executor._is_root():
                parts.append(Text(f"Needs root. Run in a terminal:\n  {executor.sudo_line(prep.plan)}", style="bold yellow"))
        for e in self.errors:
            parts.append(Text(f"cannot plan: {e}", style="bold red"))
        self.query_one("#fix-preview", Static).update(Group(*parts) if parts else "Nothing to do.")
        changing = any(s.changes or prep.plan.ladder for prep in self.prepared for s in prep.steps)
        self.query_one("#apply", Button).disabled = not changing

    @on(Button.Pressed, "#close")
    def action_close(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#apply")
    def action_apply(self) -> None:
        from troubleshoot.fixes import executor

        if self.query_one("#apply", Button).disabled:
            return
        root_needed = [p.plan.title for p in self.prepared if p.needs_root]
        if root_needed and not executor._is_root():
            self.app.notify("These changes need root: run the sudo line shown in the preview.", severity="error", timeout=10)
            return
        where = f" under {self.root}" if self.root else " on this machine"
        note = (" They need root: " + "; ".join(root_needed) + ".") if root_needed else ""
        self.app.push_screen(ConfirmScreen(f"Apply {len(self.prepared)} fix plan(s){where}? Every file is backed up "
                                           f"first and the change can be undone from History.{note}"),
                             callback=lambda ok: self.apply_all() if ok else None)

    @work(thread=True, exclusive=True)
    def apply_all(self) -> None:
        from troubleshoot.errors import TroubleshootError
        from troubleshoot.fixes import executor

        # The user may close the modal while this runs: hold the widgets, not queries on the screen.
        result, apply_button = self.query_one("#fix-result", Static), self.query_one("#apply", Button)
        lines: list[str] = []
        for prep in self.prepared:
            try:
                out = executor.apply(prep)
            except TroubleshootError as exc:
                lines.append(f"✖ {prep.plan.title}: {exc}")
                break
            executor.verify(prep, out, probe=_probe_for(self.plugins))
            lines += [f"  done: {d}" for d in out.done] + [f"  skipped: {d}" for d in out.skipped]
            if out.failed:
                lines.append(f"✖ FAILED: {out.failed} — undo from History ({out.entry.id})")
                break
            verdict = {True: "verified", False: "VERIFICATION FAILED (undo from History)", None: "not verified"}[out.verified]
            lines.append(f"✔ applied as {out.entry.id}: {verdict} {out.verify_detail}")
            self.app.call_from_thread(result.update, "\n".join(lines))
        self.app.call_from_thread(result.update, "\n".join(lines))
        self.app.call_from_thread(setattr, apply_button, "disabled", True)


def _probe_for(plugins):
    def probe(names, root):
        from pathlib import Path

        from troubleshoot.plugins import load_plugins
        from troubleshoot.probes.base import ProbeContext, run_probes

        pl = plugins or load_plugins()
        ctx = ProbeContext()
        if root:
            ctx.root = Path(root)
        return run_probes([p for p in pl.collect("troubleshoot_probes") if p.name in names], ctx)

    return probe
