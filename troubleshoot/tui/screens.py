"""Modal screens: fix preview and apply (through the command context's fix service, as
`troubleshoot fix` does), confirmation, export path, help."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Markdown, Static

from troubleshoot.textsafe import terminal_safe
from troubleshoot.tui.datamd import DataMarkdown
from troubleshoot.tui.views import plural

if TYPE_CHECKING:
    from troubleshoot.context import CommandContext
    from troubleshoot.fixes.service import FixService

HELP = """\
# troubleshoot

**Keys**: the footer always shows help and quit, and the keys of the view you are in.
`ctrl+p` opens the command palette, which lists every action.

| key | action |
|---|---|
| `d` `m` `l` `r` `h` | Diagnoses, Machine, Log, Rules, History |
| `↑` `↓`, `enter` | select a diagnosis; `enter` shows its detail full size, `esc` goes back |
| `f` | preview the fixes of the selected diagnosis; apply (`a`) or copy the commands (`c`) there |
| `p` | paste a log: `ctrl+r` diagnoses it, `ctrl+l` clears, `esc` leaves |
| `o` | open a log file by its path |
| `n` `N` | in Log: jump to the next / previous evidence line |
| `/` | in Rules: filter by id, symptom or text |
| `u` | in History: undo the selected fix |
| `ctrl+r` | diagnose again (in Machine: probe again); `R` reloads rule files after editing |
| `e` | export a Markdown report (asks where) |
| `?` `F1` | this help |
| `q` `ctrl+q` | quit at once, whatever is running (`ctrl+q` also while typing) |

**Diagnoses** are ranked: causes before their consequences, errors before warnings, surer and
later evidence first. Severity is written out (ERROR, WARN, INFO), not only coloured. The status
line at the top says what is running: loading rules, probing 3/8, scanning 41 %.

**Machine** shows what the probes read: GPUs (PCIe link, throttling, ECC and Xid), driver and
CUDA, frameworks, Docker, /dev/shm, IO. Facts a diagnosis used are starred with the rule.

**Log** shows the log diagnosed, evidence lines highlighted. Started with `--follow PATH`, new
diagnoses appear as the job writes.

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
            yield Static(terminal_safe(self.question), id="question", markup=False)
            with Horizontal(id="buttons"):
                yield Button("Yes (y)", id="yes", variant="warning", compact=True)
                yield Button("No (n)", id="no", variant="primary", compact=True)

    @on(Button.Pressed, "#yes")
    def action_yes(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#no")
    def action_no(self) -> None:
        self.dismiss(False)


class ExportScreen(ModalScreen[str | None]):
    """Where to save the report: the default is shown and can be edited; Enter saves."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, default: str):
        super().__init__()
        self.default = default

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static("Save the Markdown report to (Enter saves, Esc cancels):", markup=False)
            yield Input(value=self.default, id="export-path")
            yield Static("", id="export-error", markup=False)
            with Horizontal(id="buttons"):
                yield Button("Save (enter)", id="save", variant="primary", compact=True)
                yield Button("Cancel (esc)", id="cancel", compact=True)

    @on(Input.Submitted, "#export-path")
    @on(Button.Pressed, "#save")
    def _save(self) -> None:
        import os

        path = os.path.expanduser(self.query_one("#export-path", Input).value.strip())
        if path and os.path.isdir(path):
            path = os.path.join(path, os.path.basename(self.default))
        problem = export_problem(path)
        if problem:
            self.query_one("#export-error", Static).update(Text(terminal_safe(problem), style="bold red"))
            return
        self.dismiss(path)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)


def export_problem(path: str) -> str | None:
    """Why a report cannot be saved there, or None: it never overwrites, never creates folders."""
    import os

    if not path:
        return "type a path"
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        return f"no such folder: {parent}"
    if os.path.lexists(path):
        return f"{path} exists: choose another name"
    if not os.access(parent, os.W_OK):
        return f"cannot write in {parent}"
    return None


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark,f1", "close", "Close")]

    def compose(self) -> ComposeResult:
        # The button below the scrolling text, not at its end: in sight at 80x24 without scrolling.
        with Vertical(id="help"):
            with VerticalScroll(id="help-body"):
                yield Markdown(HELP)
            with Horizontal(id="buttons"):
                yield Button("Close (esc)", id="close", compact=True)

    @on(Button.Pressed, "#close")
    def action_close(self) -> None:
        self.dismiss(None)


# ------------------------------------------------------------------ the fix preview

@dataclass
class Block:
    kind: str  # "text", "markdown", "diff"
    text: str


_STEP = re.compile(r"^\d+\. (\w+)")


def preview_blocks(preview: str) -> list[Block]:
    """The executor's dry-run text in blocks: an advice's body is Markdown, a file's body a diff,
    the rest plain. The executor stays the one source of what a plan will do."""
    blocks: list[Block] = []
    mode = "text"
    for line in preview.splitlines():
        m = _STEP.match(line)
        if not line.startswith("   "):
            mode = {"advice": "markdown", "create": "diff", "edit": "diff"}.get(m.group(1), "text") if m else "text"
            _add(blocks, "text", line)
            continue
        body = line[3:]
        kind = mode if not (mode == "diff" and body.startswith("(")) else "text"
        _add(blocks, kind, body if kind != "text" else line)
    return blocks


def _add(blocks: list[Block], kind: str, line: str) -> None:
    if blocks and blocks[-1].kind == kind:
        blocks[-1].text += "\n" + line
    else:
        blocks.append(Block(kind, line))


_DIFF_STYLE = (("+++", "bold"), ("---", "bold"), ("@@", "cyan"), ("+", "green"), ("-", "red"))


class DiffLines:
    """A diff whose long lines wrap with an indent under their +/- column, never at column 0."""

    def __init__(self, text: str, indent: int = 4):
        self.lines = text.splitlines()
        self.indent = indent

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = max(options.max_width, self.indent + 10)
        for raw in self.lines:
            line = terminal_safe(raw, keep_newlines=False)
            style = next((s for p, s in _DIFF_STYLE if line.startswith(p)), "")
            first, rest = line[:width], line[width:]
            yield Text(first, style=style, no_wrap=True, overflow="crop")
            step = width - self.indent
            while rest:
                yield Text(" " * (self.indent - 2) + "↪ " + rest[:step], style=style, no_wrap=True, overflow="crop")
                rest = rest[step:]


class Hanging:
    """Plain lines word-wrapped with their continuation indented under the text (a step's
    "1. create: ..." wraps under "create", not at column 0)."""

    def __init__(self, text: str, style: str = ""):
        self.lines = terminal_safe(text).splitlines()
        self.style = style

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        import textwrap

        width = max(options.max_width, 20)
        for line in self.lines:
            lead = len(line) - len(line.lstrip())
            m = _STEP.match(line)
            indent = lead + (len(m.group(0)) - len(m.group(1)) if m else 2)
            # Not at a hyphen: `--undefined-only` cut after `--undefined-` reads as two words.
            for piece in textwrap.wrap(line, width, subsequent_indent=" " * indent, break_on_hyphens=False) or [""]:
                yield Text(piece, style=self.style, no_wrap=True, overflow="crop")


_FENCE = re.compile(r"```[^\n]*\n(.*?)```", re.S)


def plan_commands(prepared, is_root: bool) -> list[str]:
    """The commands a user can run by hand: the plans' commands (with sudo where they need root),
    environment lines, and the shell blocks of advice."""
    out: list[str] = []
    for prep in prepared:
        for s in prep.steps:
            if s.kind == "command" and s.argv:
                out.append(("sudo " if s.needs_root and not is_root else "") + shlex.join(s.argv))
            elif s.kind == "env" and s.text:
                out.append(s.text)
            elif s.kind == "advice":
                out += [block.strip() for block in _FENCE.findall(s.text or "") if block.strip()]
    return [terminal_safe(c) for c in out]


def copy_summary(script: str) -> str:
    """What `c` put on the clipboard, as the user will see it pasted: its lines, and among them
    the commands (a line ended by a backslash is one command with the next) and the comments."""
    lines = script.splitlines()
    commands = comments = 0
    continued = False
    for line in map(str.strip, lines):
        if continued:
            continued = line.endswith("\\")
        elif line.startswith("#"):
            comments += 1
        elif line:
            commands += 1
            continued = line.endswith("\\")
    parts = [plural(commands, "command")] + ([plural(comments, "comment")] if comments else [])
    return f"{plural(len(lines), 'line')} ({', '.join(parts)})"


def changes_anything(prepared) -> bool:
    """Whether applying would change anything: a plan of advice only (or already as wanted) has no Apply."""
    from troubleshoot.fixes import service

    return any(service.changes(p) for p in prepared)


def apply_blocker(prepared, errors: list[str], built: bool, applied: str | None, is_root: bool) -> str | None:
    """Why `a` cannot apply now, in a sentence; None when it can."""
    from troubleshoot.fixes import executor, service

    if not built:
        return "the plan is still being built"
    if applied:
        return f"already applied as {applied} (undo it from History)"
    if not prepared:
        return ("no plan could be built: " + "; ".join(errors)) if errors else "there is no plan"
    changing = [p for p in prepared if service.changes(p)]
    if not changing:
        if any(s.kind in ("advice", "command", "env") for p in prepared for s in p.steps):
            return "advice only: troubleshoot changes nothing here; c copies the commands to run by hand"
        return "nothing to change: everything is already as wanted"
    if any(p.needs_root for p in changing) and not is_root:
        return f"needs root: run `{executor.sudo_line(changing[0].plan)}` in a terminal (c copies it)"
    return None


class FixScreen(ModalScreen[None]):
    """The plans of a diagnosis's fixes; apply asks first and reports each step."""

    BINDINGS = [Binding("a", "apply", "Apply"), Binding("c", "copy", "Copy commands"),
                Binding("escape,q", "close", "Close")]

    def __init__(self, diagnosis, ctx: CommandContext, facts: Callable[[bool], Mapping | None]):
        """`facts(needed)`: the facts the fixes plan with (those the diagnosis was made with)."""
        super().__init__()
        self.diagnosis = diagnosis
        self.ctx = ctx
        self.facts = facts
        self.root = ctx.options.root
        self.service: FixService | None = None  # made in build(): loading the fixers is a plugin hook
        self.prepared: list = []
        self.errors: list[str] = []
        self.preview_text = ""
        self.built = False
        self.applied: str | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="fix-dialog"):
            yield Static(Text("Fixes for: " + terminal_safe(self.diagnosis.title, False)), id="fix-title")
            with VerticalScroll(id="fix-body"):
                yield Static("Building the plan…", id="fix-status", markup=False)
            yield Static("", id="fix-why", markup=False)
            with Horizontal(id="buttons"):
                apply = Button("Apply (a)", id="apply", variant="warning", disabled=True, compact=True)
                apply.display = False  # shown once the plan is known to change something
                yield apply
                yield Button("Copy commands (c)", id="copy", compact=True)
                yield Button("Close (esc)", id="close", variant="primary", compact=True)

    def on_mount(self) -> None:
        self.build()

    @work(thread=True)
    def build(self) -> None:
        from troubleshoot.fixes.service import requests_of

        self.service = self.ctx.fix_service(self.facts)
        plans = self.service.plan(requests_of(self.diagnosis), strict=False)
        self.prepared, self.errors = plans.prepared, plans.errors
        self.app.call_from_thread(self._show)

    def _show(self) -> None:
        body = self.query_one("#fix-body", VerticalScroll)
        self.query_one("#fix-status", Static).remove()
        widgets = []
        for prep in self.prepared:
            text = self.service.preview(prep)
            self.preview_text += text
            for b in preview_blocks(text):
                if b.kind == "markdown":
                    widgets.append(DataMarkdown(b.text, classes="fix-advice"))
                elif b.kind == "diff":
                    widgets.append(Static(DiffLines(b.text), classes="fix-diff"))
                else:
                    widgets.append(Static(Hanging(b.text), classes="fix-text"))
        for e in self.errors:
            widgets.append(Static(Hanging(f"cannot plan: {e}", style="bold red")))
        if not widgets:
            widgets.append(Static("Nothing to do.", markup=False))
        body.mount_all(widgets)
        self.built = True
        self._update_apply()

    def _update_apply(self) -> None:
        """Apply is shown for a plan that changes something (disabled while something stops it);
        the line above the buttons says why it is missing or disabled."""
        from troubleshoot.fixes import executor

        why = self._blocker()
        button = self.query_one("#apply", Button)
        button.display = self.built and changes_anything(self.prepared)
        button.disabled = why is not None
        self.query_one("#copy", Button).disabled = not plan_commands(self.prepared, executor._is_root())
        if not self.built or why is None:
            self._say("")
        else:
            self._say(f"Cannot apply: {why}" if button.display else why[:1].upper() + why[1:])

    def _blocker(self) -> str | None:
        from troubleshoot.fixes import executor

        return apply_blocker(self.prepared, self.errors, self.built, self.applied, executor._is_root())

    def _say(self, text: str, kind: str = "") -> None:
        """The dialog's message line: why Apply is missing, what `a` or `c` did (a dialog shows no
        toast: tui.notices). `kind`: "" (a standing note), "refused" or "done"."""
        line = self.query_one("#fix-why", Static)
        line.set_class(kind == "refused", "-refused")
        line.set_class(kind == "done", "-done")
        line.update(Text(terminal_safe(text)))

    @on(Button.Pressed, "#close")
    def action_close(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#copy")
    def action_copy(self) -> None:
        from troubleshoot import safeio, userstate
        from troubleshoot.fixes import executor

        commands = plan_commands(self.prepared, executor._is_root())
        if not commands:
            self._say("This plan has no command to copy.", "refused")
            return
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", self.diagnosis.rule.id)
        path = userstate.state_dir("commands") / f"{name}.sh"
        script = f"# troubleshoot: commands for {terminal_safe(self.diagnosis.title, False)}\n" + "\n".join(commands) + "\n"
        self.app.copy_to_clipboard(script)  # OSC 52: works where the terminal allows it
        try:
            safeio.atomic_write(path, script.encode(), mode=0o600)
            saved = f" and saved them to {path}"
        except OSError as exc:
            saved = f"; could not save them to {path}: {exc.strerror or exc}"
        # No full stop after the path: it would be copied with it.
        self._say(f"Copied {copy_summary(script)} to the clipboard (OSC 52, where the terminal allows it){saved}",
                  "done")

    @on(Button.Pressed, "#apply")
    def action_apply(self) -> None:
        from troubleshoot.fixes import service

        why = self._blocker()
        if why:
            nothing = self.built and not changes_anything(self.prepared)
            self._say(f"a: {'nothing to apply' if nothing else 'cannot apply'} — {why}", "refused")
            return
        changing = [p for p in self.prepared if service.changes(p)]  # the others are skipped
        root_needed = [p.plan.title for p in changing if p.needs_root]
        where = f" under {self.root}" if self.root else " on this machine"
        note = (" They need root: " + "; ".join(root_needed) + ".") if root_needed else ""
        plans = "the fix plan" if len(changing) == 1 else f"{len(changing)} fix plans"
        self.app.push_screen(ConfirmScreen(f"Apply {plans}{where}? Every file is backed up "
                                           f"first and the change can be undone from History.{note}"),
                             callback=lambda ok: self.apply_all() if ok else None)

    @work(thread=True, exclusive=True)
    def apply_all(self) -> None:
        """Every plan through the fix service, as `troubleshoot fix --apply --yes` applies them
        (confirmed once, for all, by the dialog): a plan that changes nothing is skipped."""
        from troubleshoot.errors import TroubleshootError

        lines: list[str] = []
        applied: list[str] = []

        def report(a) -> None:
            out = a.outcome
            if out is None:
                lines.append(f"  nothing to change: {a.prep.plan.title}")
                return
            lines.extend([f"  done: {d}" for d in out.done] + [f"  skipped: {d}" for d in out.skipped])
            if out.failed:
                lines.append(f"✖ FAILED: {out.failed} — undo from History ({out.entry.id})")
                return
            verdict = {True: "verified", False: "VERIFICATION FAILED (undo from History)", None: "not verified"}[out.verified]
            lines.append(f"✔ applied as {out.entry.id}: {verdict} {out.verify_detail}")
            applied.append(out.entry.id)

        try:
            self.service.apply(self.prepared, confirm=lambda prep: True, on_applied=report)
        except TroubleshootError as exc:
            lines.append(f"✖ {exc}")
        self.app.call_from_thread(self._applied, "\n".join(lines), applied[-1] if applied else "this session")

    def _applied(self, report: str, applied: str) -> None:
        # The user may have closed the modal meanwhile: nothing to show then.
        if not self.is_attached:
            return
        self.applied = applied
        result = Static(Text(terminal_safe(report), style="bold"), id="fix-result")
        body = self.query_one("#fix-body", VerticalScroll)
        body.mount(result)
        body.scroll_end(animate=False)
        self._update_apply()
