"""The plugin manager is built only when a hook a plugin implements is asked for."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from troubleshoot import plugins


def test_the_shipped_hooks_table_is_what_pluggy_finds_in_the_shipped_plugins():
    loaded = plugins.load_plugins(entry_points=False)
    pm = loaded.pm
    found = {}
    for name in plugins.BUILTIN:
        found[name] = pm.get_plugin(name)
    import troubleshoot_fixers.plugin as shipped_fixers

    pm.register(shipped_fixers, name="fixers")
    found["troubleshoot_fixers.plugin"] = shipped_fixers
    for module, plugin in found.items():
        implemented = {h.name for h in pm.get_hookcallers(plugin)}
        assert implemented == plugins.SHIPPED_HOOKS[module], module
    assert set(found) == set(plugins.SHIPPED_HOOKS)


def test_a_hook_no_shipped_plugin_implements_is_answered_without_the_manager():
    loaded = plugins.Plugins(entry_points=[("fixers", "troubleshoot_fixers.plugin")])
    assert loaded.collect("troubleshoot_rule_dirs") == []
    assert loaded._pm is None
    assert any(p.name == "host" for p in loaded.collect("troubleshoot_probes"))
    assert loaded._pm is not None


def test_a_small_diagnosis_imports_neither_pluggy_nor_dataclasses(tmp_path):
    """With only the shipped plugins installed: pluggy, dataclasses and inspect are 5-7 ms of a
    start that asks nothing of them."""
    log = tmp_path / "train.log"
    log.write_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
    code = textwrap.dedent(f"""
        import io, sys
        from troubleshoot import cli, plugins
        found = plugins._entry_points()
        sys.stdout = io.StringIO()
        cli.main(["diagnose", "--no-probe", "--format", "json", "--log", {str(log)!r}])
        out = sys.stdout.getvalue()
        sys.stdout = sys.__stdout__
        print(all(v in plugins.SHIPPED_HOOKS for _, v in found), "pluggy" in sys.modules, '"cuda-oom"' in out,
              sorted(m for m in ("dataclasses", "inspect") if m in sys.modules))
    """)
    for _ in range(2):  # the second as every run after a first: the entry points of `-c` cached too
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    only_shipped, imported, diagnosed, also = done.stdout.split(maxsplit=3)
    assert diagnosed == "True" and also.strip() == "[]"
    if only_shipped == "True":  # another installed plugin has the manager built, rightly
        assert imported == "False"


def test_another_installed_plugin_has_its_rule_folders_collected(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    site = tmp_path / "site"
    (site / "acme_rules_ts").mkdir(parents=True)
    (site / "acme_rules_ts" / "__init__.py").write_text("")
    (site / "acme_rules_ts" / "plugin.py").write_text(textwrap.dedent("""
        from troubleshoot.hookspecs import hookimpl

        @hookimpl
        def troubleshoot_rule_dirs():
            return ["acme-rules"]
    """))
    dist = site / "acme_rules_ts-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-rules-ts\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[troubleshoot]\nacme = acme_rules_ts.plugin\n")
    monkeypatch.setattr(sys, "path", [sys.path[0], str(site), *sys.path[1:]])
    try:
        loaded = plugins.load_plugins()
        assert loaded._pm is not None  # built at once: a plugin whose hooks are not known
        assert loaded.collect("troubleshoot_rule_dirs") == ["acme-rules"]
        assert loaded.problems == []
    finally:
        sys.modules.pop("acme_rules_ts.plugin", None)
        sys.modules.pop("acme_rules_ts", None)


def test_a_shipped_plugin_that_fails_to_load_is_told_when_the_manager_is_built():
    told = []
    loaded = plugins.Plugins(entry_points=[("fixers", "troubleshoot_fixers.no_such_module")])
    loaded.report = told.append
    loaded.collect("troubleshoot_fixers")
    assert len(told) == 1 and "troubleshoot_fixers.no_such_module" in told[0] and loaded.problems == told
