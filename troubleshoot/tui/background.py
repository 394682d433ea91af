"""Background work the TUI can walk away from: probes, rule loading, scans, diagnoses.

Textual's thread workers run in the event loop's default executor, which the interpreter joins
at exit: a 1 GB scan or an `import torch` probe would hold `q` for seconds. These jobs run in
daemon threads instead, share one stop flag (the scanner checks it per chunk, probes stop
waiting) and one child runner (`stop()` kills the probes' child processes). A job started
again in its group supersedes the previous run: that one is told to stop and its result is
dropped, so an old scan never overwrites a newer one.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from troubleshoot.errors import TroubleshootError


class _Flag:
    """Set when the whole app stops or this run was superseded."""

    def __init__(self, app_stop: threading.Event):
        self._app_stop = app_stop
        self._own = threading.Event()

    def set(self) -> None:
        self._own.set()

    def is_set(self) -> bool:
        return self._own.is_set() or self._app_stop.is_set()


class Background:
    def __init__(self, app):
        self.app = app
        self.stopped = threading.Event()
        self._runner = None
        self._runs: dict[str, _Flag] = {}
        self._lock = threading.Lock()

    @property
    def runner(self):
        """The probes' child runner, made on first use (the probe modules load after the first paint)."""
        from troubleshoot.probes.base import ChildRunner

        with self._lock:
            if self._runner is None:
                self._runner = ChildRunner()
                if self.stopped.is_set():
                    self._runner.kill()
            return self._runner

    def start(self, group: str, fn: Callable[[_Flag], Any], on_done: Callable[[Any], None],
              on_error: Callable[[TroubleshootError], None] | None = None) -> None:
        """Run `fn(cancel)` in a daemon thread; `on_done(result)` runs on the app's thread."""
        flag = _Flag(self.stopped)
        with self._lock:
            old = self._runs.get(group)
            if old is not None:
                old.set()
            self._runs[group] = flag

        def current() -> bool:
            with self._lock:  # a superseded run's result is dropped
                return self._runs.get(group, flag) is flag and not flag.is_set()

        def deliver(callback, value) -> None:
            if callback is None or not current():
                return
            # Scheduled on the app's loop, not run inside call_from_thread: an exception there
            # would come back to this thread and vanish; on the loop it ends the app (exit 1).
            self._post(lambda: callback(value) if current() else None)

        def body() -> None:
            from troubleshoot.scan import ScanCancelled

            try:
                try:
                    result = fn(flag)
                except ScanCancelled:
                    return
                except TroubleshootError as exc:
                    deliver(on_error, exc)
                    return
                except Exception as exc:  # a bug: crash the app (non-zero exit, the error printed after)
                    if not self.stopped.is_set():
                        self._post(lambda exc=exc: _reraise(exc))  # bound now: `exc` is unset after the block
                    return
                deliver(on_done, result)
            finally:  # listed until its result is posted: `idle()` means nothing is left to arrive
                with self._lock:
                    if self._runs.get(group) is flag:
                        del self._runs[group]

        threading.Thread(target=body, name=f"tui-{group}", daemon=True).start()

    def idle(self) -> bool:
        """No job is running (tests wait on this before taking a picture)."""
        with self._lock:
            return not self._runs

    def _post(self, fn: Callable[[], None]) -> None:
        try:
            self.app.call_from_thread(self.app.call_later, fn)
        except RuntimeError:  # the app closed meanwhile
            pass

    def stop(self) -> None:
        """The user quits: every run is told to stop, the probes' children are killed."""
        self.stopped.set()
        with self._lock:
            runner = self._runner
        if runner is not None:
            runner.kill()


def _reraise(exc: BaseException) -> None:
    raise exc
