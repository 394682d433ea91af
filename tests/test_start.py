"""What a start loads: `--version` and a small diagnosis load only what they use (each module
below costs every start milliseconds; benchmarks/scan_bench.py --start-only measures the whole)."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO

OOM_LOG = REPO / "tests" / "fixtures" / "ranks" / "per-rank" / "job.gpu-02.rank3.log"


def _loaded_after(args: list[str], modules: tuple[str, ...], env=None, runs: int = 1) -> list[str]:
    """The `modules` loaded after the real entry point ran `args` (the last of `runs` runs, in
    one cache folder: the rule set is kept from the second build on, the first fills the
    caches that build reads)."""
    code = ("import sys; from troubleshoot import cli; sys.argv = ['troubleshoot'] + sys.argv[1:];\n"
            "try:\n    cli.main()\nexcept SystemExit:\n    pass\n"
            f"sys.stderr.write('\\nLOADED=' + ','.join(m for m in {modules!r} if m in sys.modules))")
    for _ in range(runs):
        p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, cwd=REPO, env=env,
                           timeout=60, check=False)
    tail = p.stderr.decode().rpartition("LOADED=")[2].strip()
    return [m for m in tail.split(",") if m]


def test_version_builds_no_subcommand_and_sets_nothing_up():
    loaded = _loaded_after(["--version"], ("troubleshoot.cli_fix", "troubleshoot.cli_diagnose", "troubleshoot.scan.reader",
                                           "ctypes", "troubleshoot.context"))
    assert loaded == []


def test_a_small_diagnosis_loads_no_module_it_does_not_use():
    loaded = _loaded_after(["diagnose", "--no-probe", "--format", "json", "--log", str(OOM_LOG)],
                           ("textwrap", "tempfile", "importlib.metadata", "textual", "rich", "troubleshoot.tui"), runs=3)
    assert loaded == []
