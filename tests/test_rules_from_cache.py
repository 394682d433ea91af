"""A run whose rule set comes from the cache pays only for reading it: PyYAML, the rule loader
and the pattern checks are not even imported, and importing the engine puts no stand-in for
PyYAML into sys.modules."""

import subprocess
import sys

import pytest

from conftest import REPO

# The first of three runs parses the rule files: no cache is kept yet.
pytestmark = pytest.mark.cold_cache

CHECK = """
import sys, io
from troubleshoot import cli
sys.stdin = io.TextIOWrapper(io.BytesIO(b''))
try:
    cli.main(['diagnose', '--no-probe', '--log', {log!r}, '--format', 'json'])
except SystemExit:
    pass
loaded = [m for m in sys.modules if m.split('.')[0] == 'yaml' or m in {modules!r}]
sys.stderr.write(repr(loaded))
sys.exit(1 if loaded else 0)
"""
NOT_NEEDED = ("troubleshoot.engine.loader", "troubleshoot.engine.documents", "troubleshoot.engine.patterncheck",
              "troubleshoot.engine.symptoms")


def test_a_run_with_cached_rules_imports_neither_yaml_nor_the_loader(tmp_path):
    log = tmp_path / "job.log"
    log.write_text("step 1\nRuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    code = CHECK.format(log=str(log), modules=NOT_NEEDED)
    # The first run parses the rule files, the second builds the rule set from their cached YAML
    # and keeps it: the third reads it.
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=REPO) for _ in range(3)]
    assert "yaml" in runs[0].stderr.decode()
    assert runs[2].returncode == 0, runs[2].stderr.decode()[-2000:]


def test_yaml_is_imported_only_by_the_functions_that_parse():
    code = ("import sys; from troubleshoot.engine import documents, loader, ruleset, yamldoc;"
            "assert 'yaml' not in sys.modules, 'imported with the engine';"
            "data, _ = yamldoc.load('a: 1'); assert data == {'a': 1} and 'yaml' in sys.modules")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=REPO)
    assert p.returncode == 0, p.stderr.decode()
