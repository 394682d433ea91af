"""Plugin discovery: built-in plugins, the `troubleshoot` entry-point group, and `-p module`.
A command loads them once, through its `context.CommandContext`, which tells their problems."""

from __future__ import annotations

import contextlib
import importlib
import sys
from dataclasses import field
from typing import Callable, Sequence

import pluggy

from troubleshoot import hookspecs, usercache
from troubleshoot.errors import TroubleshootError
from troubleshoot.records import record

ENTRY_POINT_GROUP = "troubleshoot"
BUILTIN = ("troubleshoot.probes.builtin",)
_ENTRY_POINTS = usercache.Cache("plugins", format=2)


@record
class Plugins:
    pm: pluggy.PluginManager
    problems: list[str] = field(default_factory=list)
    # Told of each hook failure as it happens (the command context's warning): hooks run long
    # after the plugins were loaded and their load problems told.
    report: Callable[[str], None] | None = None

    def collect(self, hook: str) -> list:
        """Flatten one hook's lists over all plugins; a plugin that raises is reported, not fatal."""
        out: list = []
        caller = getattr(self.pm.hook, hook)
        for impl in reversed(caller.get_hookimpls()):
            try:
                result = impl.function()
            except Exception as exc:  # a broken plugin must not stop a diagnosis
                problem = f"plugin {impl.plugin_name}: {hook} failed: {type(exc).__name__}: {exc}"
                if problem not in self.problems:
                    self.problems.append(problem)
                    if self.report is not None:
                        self.report(problem)
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
        module = _import_local(name)
        if pm.is_registered(module) or pm.has_plugin(name):
            continue
        pm.register(module, name=name)
    return plugins


def _import_local(name: str):
    """A `-p` plugin: a file path (`./plugin.py`, `team/plugin.py`) or a module name, looked up
    in the current folder too (a console script's sys.path holds its own bin folder, not the
    folder the user is in)."""
    import os

    as_file = name.endswith(".py") or os.sep in name or (os.altsep and os.altsep in name)
    try:
        if as_file:
            return _import_file(name)
        with _on_path(os.getcwd()):
            return importlib.import_module(name)
    except TroubleshootError:
        raise
    except Exception as exc:
        what = "file" if as_file else "module"
        raise TroubleshootError(f"cannot load plugin {what} {name!r} (-p): {type(exc).__name__}: {exc}") from None


def _import_file(name: str):
    from pathlib import Path

    path = Path(name).expanduser()
    if not path.is_file():
        raise TroubleshootError(f"cannot load plugin file {name!r} (-p): no such file")
    # Its folder is on the path while it is imported, so that it can import its sibling modules.
    with _on_path(str(path.resolve().parent)):
        return _exec_file(name, path)


@contextlib.contextmanager
def _on_path(folder: str):
    """`folder` last on sys.path (an installed module of the same name still wins) for the
    duration of one plugin's import only: the folder a user happens to be in, or a plugin's,
    must not answer the lazy imports that come later (pynvml, a framework, the standard library)."""
    added = folder not in sys.path
    if added:
        sys.path.append(folder)
    try:
        yield
    finally:
        if added and folder in sys.path:
            sys.path.remove(folder)


def _exec_file(name: str, path):
    import importlib.util
    from pathlib import Path

    module_name = path.stem
    existing = sys.modules.get(module_name)
    if existing is not None:
        if Path(getattr(existing, "__file__", "") or "").resolve() == path.resolve():
            return existing
        module_name = f"troubleshoot_plugin_{path.stem}"  # never shadow a module already imported
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise TroubleshootError(f"cannot load plugin file {name!r} (-p): not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and pickling look the module up by name
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module


def _load_entry_points(plugins: Plugins) -> None:
    for name, value in _entry_points():
        if plugins.pm.has_plugin(name):
            continue
        try:
            plugin = _load(value)
        except Exception as exc:
            plugins.problems.append(f"plugin {name} ({value}) failed to load: {type(exc).__name__}: {exc}")
            continue
        try:
            plugins.pm.register(plugin, name=name)
        except ValueError as exc:
            plugins.problems.append(f"plugin {name}: {exc}")


def _entry_points() -> list[tuple[str, str]]:
    """(name, value) of the `troubleshoot` entry points. Reading every installed package's
    metadata is a good part of a cold start, so the list is cached, stamped with the interpreter,
    its search path and each folder on it (installing, upgrading or removing a package changes
    its folder's times)."""
    import marshal

    # sys.path[0] is the script's folder or the working directory: it changes all the time and
    # holds no installed package, so only its name counts.
    first = sys.path[0] if sys.path else None
    # One entry per interpreter and search path: two venvs on one machine must not keep
    # overwriting each other's list (each run would then read every package's metadata).
    key = (sys.executable, sys.version, tuple(sys.path[1:]))
    stamp = (first, usercache.file_stamps(entry or "." for entry in sys.path[1:]))
    blob = _ENTRY_POINTS.get(key, stamp)
    try:
        found = marshal.loads(blob) if blob else None
    except (ValueError, EOFError, TypeError):
        found = None
    if isinstance(found, tuple) and all(isinstance(e, tuple) and len(e) == 2 for e in found):
        return [(str(n), str(v)) for n, v in found]
    from importlib.metadata import entry_points

    found = tuple((ep.name, ep.value) for ep in entry_points(group=ENTRY_POINT_GROUP))
    _ENTRY_POINTS.put(key, stamp, marshal.dumps(found))
    return list(found)


def _load(value: str):
    """What an entry point names: `package.module` or `package.module:attribute.path`."""
    module, _, attr = value.split("[", 1)[0].partition(":")
    obj = importlib.import_module(module.strip())
    for part in attr.strip().split(".") if attr.strip() else ():
        obj = getattr(obj, part)
    return obj
