"""Notifications that never cover what the user is reading.

On the main screen they sit at the bottom right, above the footer (app.tcss): over the end of a
scrolling pane at worst, never over the status line, the tabs, a table or the detail's title.
A dialog (fix preview, export, confirmation, help) shows none: what it has to say it says in
its own message line, and what the app tells meanwhile (a probe's warning, a job that failed)
is held and told when the last dialog closes, its timeout starting then, so that nothing is
missed behind a dialog and nothing expires unseen.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Seconds on screen: an acknowledgement ("Reloading rules…") is read at a glance, a warning or an
# error is read and maybe acted on.
QUICK, READ = 3.0, 10.0


def default_timeout(severity: str) -> float:
    return QUICK if severity == "information" else READ


@dataclass(frozen=True)
class Notice:
    """One notification, as `App.notify` takes it."""

    message: str
    title: str = ""
    severity: str = "information"
    timeout: float = QUICK
    markup: bool = True


@dataclass
class Notices:
    """The notices held while a dialog is up, in the order they were told."""

    held: list[Notice] = field(default_factory=list)

    def hold(self, notice: Notice) -> None:
        # The same words twice (a warning repeated by each retry) are told once.
        if notice not in self.held:
            self.held.append(notice)

    def release(self) -> list[Notice]:
        out, self.held = self.held, []
        return out
