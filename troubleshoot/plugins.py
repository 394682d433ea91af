"""Plugin discovery: built-in plugins, the `troubleshoot` entry-point group, and `-p module`."""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass, field
from typing import Sequence

import pluggy

from troubleshoot import hookspecs
from troubleshoot.errors import TroubleshootError

ENTRY_POINT_GROUP = "troubleshoot"
BUILTIN = ("troubleshoot.probes.builtin",)


@dataclass
class Plugins:
    pm: pluggy.PluginManager
    problems: list[str] = field(default_factory=list)

    def collect(self, hook: str) -> list:
        """Flatten one hook's lists over all plugins; a plugin that raises is reported, not fatal."""
        out: list = []
        caller = getattr(self.pm.hook, hook)
        for impl in reversed(caller.get_hookimpls()):
            try:
                result = impl.function()
            except Exception as exc:  # a broken plugin must not stop a diagnosis
                self.problems.append(f"plugin {impl.plugin_name}: {hook} failed: {type(exc).__name__}: {exc}")
                continue
            if result:
                out.extend(result)
        return out


def load_plugins(modules: Sequence[str] = (), entry_points: bool = True) -> Plugins:
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    plugins = Plugins(pm)
    for name in BUILTIN:
        pm.register(importlib.import_module(name), name=name)
    if entry_points:
        _load_entry_points(plugins)
    for name in modules:
        try:
            module = importlib.import_module(name)
        except Exception as exc:
            raise TroubleshootError(f"cannot load plugin module {name!r} (-p): {type(exc).__name__}: {exc}") from None
        if pm.is_registered(module) or pm.has_plugin(name):
            continue
        pm.register(module, name=name)
    return plugins


def _load_entry_points(plugins: Plugins) -> None:
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if plugins.pm.has_plugin(ep.name):
            continue
        try:
            plugin = ep.load()
        except Exception as exc:
            plugins.problems.append(f"plugin {ep.name} ({ep.value}) failed to load: {type(exc).__name__}: {exc}")
            continue
        try:
            plugins.pm.register(plugin, name=ep.name)
        except ValueError as exc:
            plugins.problems.append(f"plugin {ep.name}: {exc}")


def warn(problems: Sequence[str]) -> None:
    for p in problems:
        print(f"troubleshoot: warning: {p}", file=sys.stderr)
