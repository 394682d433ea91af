"""The terminal driver the `tui` command runs with: `q` ends the process at once."""

from __future__ import annotations

import signal
import sys


def quick_exit_driver():
    """Textual's Linux driver joins its input thread on exit, and that thread sleeps in
    select(0.1) twice: up to 0.2 s after `q`. When the app is quitting for good the thread
    (which only reads keys) is left to end on its own; suspend/resume still joins it."""
    if sys.platform == "win32":
        return None
    import termios

    from textual.drivers.linux_driver import LinuxDriver

    class QuickExitDriver(LinuxDriver):
        quitting = False

        def disable_input(self) -> None:
            if not self.quitting or self.exit_event.is_set():
                return super().disable_input()
            signal.signal(signal.SIGWINCH, signal.SIG_DFL)
            self._disable_mouse_support()
            self.exit_event.set()
            try:
                termios.tcflush(self.fileno, termios.TCIFLUSH)
            except termios.error:
                pass

    return QuickExitDriver
