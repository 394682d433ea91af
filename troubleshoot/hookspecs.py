"""The plugin API of troubleshoot: the hooks a plugin may implement.

A plugin is a module (or object) with functions marked ``@hookimpl`` whose names are the hooks
below. troubleshoot finds plugins through the entry-point group ``troubleshoot`` (the shipped
fixers register themselves exactly like a third-party package would), and through
``-p module`` on the command line for a local module. Example ``pyproject.toml`` of a plugin::

    [project.entry-points.troubleshoot]
    acme = "acme_troubleshoot.plugin"

and in ``acme_troubleshoot/plugin.py``::

    from troubleshoot.hookspecs import hookimpl

    @hookimpl
    def troubleshoot_rule_dirs():
        return [Path(__file__).parent / "rules"]

Every hook returns a list; troubleshoot collects the lists of all plugins. A hook that raises
is reported (with the plugin's name) and skipped: one broken plugin never stops a diagnosis.
"""

from __future__ import annotations

import pluggy

PROJECT = "troubleshoot"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def troubleshoot_probes():
    """Return a list of :class:`troubleshoot.probes.base.Probe` this plugin provides.

    A probe reads one area of the machine and returns a JSON-able dict of facts, stored in
    the snapshot under the probe's ``name`` (which must not clash with another probe's).
    Rules read those facts by dotted path (``name.key``). A probe must never raise for a
    missing tool, library or permission: it returns ``{"available": False, "error": "..."}``.
    It runs in its own thread with its own ``timeout`` (seconds); a probe that overruns is
    reported as timed out and its facts are ``{"available": False, "error": "timed out ..."}``.
    Use ``ctx.run(argv, timeout)`` for commands and ``ctx.path("/proc/...")`` for files, so
    that tests can replay recorded outputs.
    """


@hookspec
def troubleshoot_rule_dirs():
    """Return a list of folders (``pathlib.Path`` or str) holding rule files.

    They are loaded after the shipped rules and before the user's config, ``$TROUBLESHOOT_RULES``
    and ``--rules`` folders, so they can add rules, override shipped ones by id, or disable them
    (see docs/rules.md, *Rule packs*).
    """


@hookspec
def troubleshoot_fixers():
    """Return a list of fixers (see docs/plugins.md) that rules may name in ``fixes:``."""
