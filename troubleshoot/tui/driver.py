"""The terminal driver the `tui` command runs with: `q` ends the process at once."""

from __future__ import annotations

import os
import signal
import sys
import threading


def quick_exit_driver(early=None):
    """A `q` ends the process as soon as the terminal is restored (`exit_now`). Textual's own
    exit would first unmount every widget (30-100 ms on a loaded machine) and then join the
    driver's input thread, which sleeps in select(0.1) twice: up to 0.2 s more. Neither changes
    anything for a process about to end; suspend/resume still joins the thread.
    `early` (tui.early.EarlyKeys): the keys typed before the driver started, and the first key
    before the first frame, which may end the process."""
    if sys.platform == "win32":
        return None
    import termios

    from textual import events
    from textual._xterm_parser import XTermParser
    from textual.drivers.linux_driver import LinuxDriver

    class QuickExitDriver(LinuxDriver):
        quitting = False

        def start_application_mode(self) -> None:
            typed = early.handover() if early is not None else ""
            if typed:
                # Parsed before the input thread reads the terminal: the keys stay in order.
                parser = XTermParser(self._debug)
                self._typed_events = [*parser.feed(typed), *parser.feed("")]
            super().start_application_mode()

        def run_input_thread(self) -> None:
            for event in getattr(self, "_typed_events", ()):
                self.process_message(event)
            self._typed_events = ()
            super().run_input_thread()

        def process_message(self, message) -> None:
            if early is not None and isinstance(message, (events.Key, events.Paste)):
                early.key(getattr(message, "key", None), self._leave_now)
            super().process_message(message)

        def exit_now(self) -> None:
            """The app quits for good (its jobs told to stop): out of application mode, then
            out of the process."""
            self._leave_now()
            if early is not None:
                early.finish()  # the terminal's modes as they were before the early watch
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)

        def _leave_now(self) -> None:
            """Out of application mode, from any thread: writes from other threads are dropped
            from now on, so that none lands after ours (the input thread's early exit leaves
            while the app may be drawing)."""
            me = threading.get_ident()
            write = self._writer_thread.write
            self.write = lambda data: write(data) if threading.get_ident() == me else None
            self.quitting = True
            self.stop_application_mode()
            self._writer_thread.stop()  # flushed

        def disable_input(self) -> None:
            if not self.quitting or self.exit_event.is_set():
                return super().disable_input()
            if threading.current_thread() is threading.main_thread():  # not from _leave_now's thread
                signal.signal(signal.SIGWINCH, signal.SIG_DFL)
            self._disable_mouse_support()
            self.exit_event.set()
            try:
                termios.tcflush(self.fileno, termios.TCIFLUSH)
            except termios.error:
                pass

        def app_mounted(self, stop_jobs) -> None:
            if early is not None:
                early.mounted(stop_jobs)

        def app_drawn(self) -> None:
            if early is not None:
                early.close()

    return QuickExitDriver
