"""The import layers of the package, as pyproject.toml's [tool.importlinter] contracts state
them: every module imports only from the layers below its own, and no package's modules import
each other in a cycle. The same check runs by hand with `lint-imports`."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Run in a child: import-linter builds the graph of the package found first on sys.path, and
# the check below must see a modified copy, not the installed one.
LINT = ("import sys; from importlinter.cli import lint_imports; "
        "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True, no_logo=True))")


def _lint(project: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", LINT], cwd=project, env={"PYTHONPATH": str(project),
                          "PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"}, capture_output=True, text=True, timeout=300)


def _copy_of_the_package(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    shutil.copytree(ROOT / "troubleshoot", project / "troubleshoot",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy(ROOT / "pyproject.toml", project / "pyproject.toml")
    return project


def test_the_package_keeps_its_layer_contracts(tmp_path):
    r = _lint(_copy_of_the_package(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 kept, 0 broken" in r.stdout


def test_an_upward_import_breaks_the_layer_contract(tmp_path):
    project = _copy_of_the_package(tmp_path)
    diagnose = project / "troubleshoot" / "engine" / "diagnose.py"
    diagnose.write_text(diagnose.read_text() + "\nimport troubleshoot.tui.app  # the engine reaching up to a front end\n")
    r = _lint(project)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "troubleshoot.engine is not allowed to import troubleshoot.tui" in r.stdout
    assert "troubleshoot.engine.diagnose -> troubleshoot.tui.app" in r.stdout


def test_a_cycle_inside_a_package_breaks_the_acyclic_contract(tmp_path):
    project = _copy_of_the_package(tmp_path)
    scan_init = project / "troubleshoot" / "scan" / "result.py"
    # result.py is imported by stream.py; importing stream back closes a cycle in one layer.
    scan_init.write_text(scan_init.read_text() + "\nfrom troubleshoot.scan import stream  # a cycle\n")
    r = _lint(project)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "No cycles are allowed in troubleshoot.scan" in r.stdout
