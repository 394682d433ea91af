"""The Rules tab: the loaded rules, a filter (`/`), the selected rule's detail and the lint's
problems. It renders report.ruleview.RuleView objects, made once per rule set when the tab is first
shown (a few hundred rows that the first frame does not wait for)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import on
from textual.actions import SkipAction
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Input, Static

from troubleshoot.tui.views import plural, rule_columns, rule_detail, rule_matches, rule_row

if TYPE_CHECKING:
    from troubleshoot.engine.ruleset import RuleSet
    from troubleshoot.report.ruleview import RuleView


class RulesPane(Vertical):
    BINDINGS = [Binding("escape", "leave_filter", "Leave the filter", show=False)]

    def __init__(self) -> None:
        super().__init__()
        self.ruleset: RuleSet | None = None
        self._views: dict[str, RuleView] | None = None  # by id, in table order; made when first shown
        self.stale = False  # filled again when next shown (a new rule set, another width)

    def compose(self) -> ComposeResult:
        with Horizontal(id="rules-bar"):
            yield Input(placeholder="/ filter: words in the id, symptom, title, text or patterns",
                        id="rules-filter", compact=True)
            yield Static("", id="rules-count", markup=False)
        yield Static("", id="rules-problems", markup=False)
        with Horizontal(classes="pane"):
            yield DataTable(id="rules-table", cursor_type="row", zebra_stripes=True)
            with VerticalScroll(id="rule-detail"):
                yield Static("", id="rule-text", markup=False)

    def set_rules(self, ruleset: RuleSet) -> None:
        self.ruleset, self._views, self.stale = ruleset, None, True

    def show_problems(self, problems: list[str], linted: bool) -> None:
        """How many rules and packs, whether the full lint ran, and the first problems."""
        note = f"{plural(len(self.ruleset.rules), 'rule')} from {plural(len(self.ruleset.packs), 'pack')}"
        note += "." if linted else ", linting…"
        if problems:
            note += f" {plural(len(problems), 'problem')}:\n" + "\n".join(problems[:5])
            if len(problems) > 5:
                note += f"\n… and {len(problems) - 5} more (troubleshoot rules lint)"
        self.query_one("#rules-problems", Static).update(note)

    def focus_filter(self) -> None:
        self.query_one("#rules-filter", Input).focus()

    def fill_if_stale(self) -> None:
        if self.stale:
            self.stale = False
            self.fill()

    def fill(self) -> None:
        if self.ruleset is None:
            return
        if self._views is None:
            from troubleshoot.report.ruleview import rule_view

            ordered = sorted(self.ruleset.rules, key=lambda r: (r.symptom, r.id))
            self._views = {r.id: rule_view(r) for r in ordered}
        query = self.query_one("#rules-filter", Input).value
        rules = [v for v in self._views.values() if rule_matches(v, query)]
        table = self.query_one("#rules-table", DataTable)
        cols = rule_columns(rules, table.size.width or self.app.size.width)
        table.clear(columns=True)
        table.add_column("id", width=cols.id)
        table.add_column("symptom", width=cols.symptom)
        table.add_column("sev.", width=cols.severity)
        for v in rules:
            table.add_row(*rule_row(v, cols), key=v.record["id"])
        count = f"{len(rules)} of {len(self.ruleset.rules)}" if query.strip() else ""
        self.query_one("#rules-count", Static).update(count)
        if not rules:
            self.query_one("#rule-text", Static).update("No rule matches the filter." if query.strip() else "")

    @on(Input.Changed, "#rules-filter")
    def _filter_changed(self) -> None:
        self.fill()

    @on(Input.Submitted, "#rules-filter")
    def _filter_done(self) -> None:
        self.query_one("#rules-table").focus()

    @on(DataTable.RowHighlighted, "#rules-table")
    def _rule_row(self, event: DataTable.RowHighlighted) -> None:
        view = self._views.get(event.row_key.value) if self._views and event.row_key else None
        if view is None:
            return
        self.query_one("#rule-text", Static).update(rule_detail(view))
        self.query_one("#rule-detail", VerticalScroll).scroll_home(animate=False)

    def action_leave_filter(self) -> None:
        """esc in the filter: clear it, and when it is clear, back to the table."""
        focused = self.screen.focused
        if focused is None or focused.id != "rules-filter":
            raise SkipAction()
        if focused.value:
            focused.value = ""
        else:
            self.query_one("#rules-table").focus()
