"""Plugin discovery: built-in plugins, the `troubleshoot` entry-point group, and `-p module`.
A command loads them once, through its `context.CommandContext`, which tells their problems.

The plugin manager (pluggy) is built when a hook one of the plugins implements is first asked
for. With only the shipped plugins installed, which implement no rule folders, `diagnose
--no-probe` asks for nothing they answer, and never imports pluggy nor registers a plugin:
3-4 ms of a small diagnosis's start. Any other plugin (an entry point, `-p`) has the manager
built at once, so that its load problems are met before the command reads anything.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from typing import TYPE_CHECKING, Callable, Sequence

from troubleshoot import usercache
from troubleshoot.errors import TroubleshootError

if TYPE_CHECKING:
    import pluggy

ENTRY_POINT_GROUP = "troubleshoot"
BUILTIN = ("troubleshoot.probes.builtin",)
# The hooks each shipped plugin implements, by module (a test holds this to what pluggy finds
# in them): what lets a hook no plugin implements be answered without the manager.
SHIPPED_HOOKS = {
    "troubleshoot.probes.builtin": frozenset({"troubleshoot_probes"}),
    "troubleshoot_fixers.plugin": frozenset({"troubleshoot_fixers"}),
}
_ENTRY_POINTS = usercache.Cache("plugins", format=2)


class Plugins:
    """The loaded plugins. `pm`: their pluggy manager, built on first use; `problems`: what
    went wrong loading or calling them; `report`: told of each hook failure as it happens (the
    command context's warning), since hooks run long after the plugins were loaded."""

    def __init__(self, pm: pluggy.PluginManager | None = None, modules: Sequence[str] = (),
                 entry_points: Sequence[tuple[str, str]] = ()):
        self._pm = pm
        self._modules = tuple(modules)  # -p plugins and entry points registered when it is built
        self._entry_points = tuple(entry_points)
        self.problems: list[str] = []
        self.report: Callable[[str], None] | None = None

    @property
    def pm(self) -> pluggy.PluginManager:
        if self._pm is None:
            self._pm = _manager(self, self._modules, self._entry_points)
        return self._pm

    def _unbuilt_lacks(self, hook: str) -> bool:
        """Whether the manager is not built yet and none of its plugins would implement `hook`
        (only shipped plugins are waiting, and none of them does)."""
        if self._pm is not None or self._modules:
            return False
        waiting = [*BUILTIN, *(value for _, value in self._entry_points)]
        return all(hook not in SHIPPED_HOOKS.get(m, (hook,)) for m in waiting)

    def collect(self, hook: str) -> list:
        """Flatten one hook's lists over all plugins; a plugin that raises is reported, not fatal."""
        if self._unbuilt_lacks(hook):
            return []
        out: list = []
        caller = getattr(self.pm.hook, hook)
        for impl in reversed(caller.get_hookimpls()):
            try:
                result = impl.function()
            except Exception as exc:  # a broken plugin must not stop a diagnosis
                self._problem(f"plugin {impl.plugin_name}: {hook} failed: {type(exc).__name__}: {exc}")
                continue
            if result:
                out.extend(result)
        return out

    def _problem(self, problem: str) -> None:
        if problem not in self.problems:
            self.problems.append(problem)
            if self.report is not None:
                self.report(problem)


def load_plugins(modules: Sequence[str] = (), entry_points: bool = True) -> Plugins:
    found = _entry_points() if entry_points else []
    plugins = Plugins(modules=modules, entry_points=found)
    if modules or any(value not in SHIPPED_HOOKS for _, value in found):
        plugins.pm  # built now: a -p plugin that cannot load stops the command here
    return plugins


def _manager(plugins: Plugins, modules: Sequence[str], entry_points: Sequence[tuple[str, str]]) -> pluggy.PluginManager:
    import pluggy

    from troubleshoot import hookspecs

    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    for name in BUILTIN:
        pm.register(importlib.import_module(name), name=name)
    _load_entry_points(pm, plugins, entry_points)
    for name in modules:
        module = _import_local(name)
        if pm.is_registered(module) or pm.has_plugin(name):
            continue
        pm.register(module, name=name)
    return pm


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


def _load_entry_points(pm: pluggy.PluginManager, plugins: Plugins, found: Sequence[tuple[str, str]]) -> None:
    for name, value in found:
        if pm.has_plugin(name):
            continue
        try:
            plugin = _load(value)
        except Exception as exc:
            plugins._problem(f"plugin {name} ({value}) failed to load: {type(exc).__name__}: {exc}")
            continue
        try:
            pm.register(plugin, name=name)
        except ValueError as exc:
            plugins._problem(f"plugin {name}: {exc}")


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
