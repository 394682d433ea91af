"""What a start loads: `--version` and a small diagnosis load only what they use (each module
below costs every start milliseconds; benchmarks/scan_bench.py --start-only measures the whole)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO, wait_for_detached_compile

OOM_LOG = REPO / "tests" / "fixtures" / "ranks" / "per-rank" / "job.gpu-02.rank3.log"


# Each watched module's first importer in the package, so that a failure says which code path
# loaded it (a finder that only looks: it returns None and the import goes on as usual). Modules
# the interpreter loaded before the package ran (a site-packages `.pth` file can import tempfile
# at every start) are the environment's, not the package's: they are left out.
WATCH = ("import sys\n"
         "BEFORE = set(sys.modules)\n"
         "class Watch:\n"
         "    def find_spec(self, name, path=None, target=None):\n"
         "        if name in WATCHED:\n"
         "            f = sys._getframe(1)\n"
         "            while f and '/troubleshoot/' not in f.f_code.co_filename: f = f.f_back\n"
         "            BY.setdefault(name, f'{f.f_code.co_filename}:{f.f_lineno}' if f else '?')\n"
         "BY = {}\n"
         "sys.meta_path.insert(0, Watch())\n")


def _loaded_after(args: list[str], modules: tuple[str, ...], env=None, runs: int = 1) -> dict[str, str]:
    """The `modules` loaded after the real entry point ran `args`, each with the line in the
    package that imported it (the last of `runs` runs, in one cache folder: the rule set is kept
    from the second build on, the first fills the caches that build reads; a database compiled
    after a run is waited for, as the next run of a user's would find it)."""
    code = (f"WATCHED = {modules!r}\n" + WATCH +
            "from troubleshoot import cli; sys.argv = ['troubleshoot'] + sys.argv[1:];\n"
            "try:\n    cli.main()\nexcept SystemExit:\n    pass\n"
            "sys.stderr.write('\\nLOADED=' + repr({m: BY.get(m, '?') for m in WATCHED\n"
            "                                     if m in sys.modules and m not in BEFORE}))")
    for _ in range(runs):
        p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, cwd=REPO, env=env,
                           timeout=60, check=False)
        wait_for_detached_compile(Path(os.environ["XDG_CACHE_HOME"]))
    return ast.literal_eval(p.stderr.decode().rpartition("LOADED=")[2].strip())


def test_version_builds_no_subcommand_and_sets_nothing_up():
    loaded = _loaded_after(["--version"], ("troubleshoot.cli_fix", "troubleshoot.cli_diagnose", "troubleshoot.scan.reader",
                                           "ctypes", "troubleshoot.context"))
    assert loaded == {}


def test_a_small_diagnosis_loads_no_module_it_does_not_use():
    loaded = _loaded_after(["diagnose", "--no-probe", "--format", "json", "--log", str(OOM_LOG)],
                           ("textwrap", "tempfile", "importlib.metadata", "textual", "rich", "troubleshoot.tui"), runs=3)
    assert loaded == {}


def test_a_small_log_has_the_pattern_database_compiled_for_the_next_run(tmp_path):
    """A small log is scanned with RE2 (compiling hyperscan's database would cost more than the
    scan); the database is then compiled by a detached process, and the next run loads it."""
    env = {k: v for k, v in os.environ.items() if k not in ("TROUBLESHOOT_SCAN_ENGINE", "TROUBLESHOOT_SCAN_FORK")}
    env["XDG_CACHE_HOME"] = str(tmp_path / "fresh-cache")
    scan_with = ("import sys; from troubleshoot.engine.ruleset import load_ruleset;"
                 "from troubleshoot.engine.diagnose import scan_patterns; from troubleshoot.scan import Scanner;"
                 "s = Scanner(scan_patterns(load_ruleset(use_config=False).rules));"
                 f"print(s.scan(open({str(OOM_LOG)!r}, 'rb')).backend)")
    before = subprocess.run([sys.executable, "-c", scan_with], capture_output=True, env=env, timeout=120, check=True)
    assert before.stdout.decode().strip() == "re2"
    p = subprocess.run([sys.executable, "-m", "troubleshoot", "diagnose", "--no-probe", "--log", str(OOM_LOG)],
                       capture_output=True, env=env, cwd=REPO, timeout=120, check=False)
    assert p.returncode == 0, p.stderr.decode()
    lock = tmp_path / "fresh-cache" / "troubleshoot" / "hyperscan" / ".compiling"
    assert lock.exists()  # taken before the command returned, held until the database is written
    wait = "import fcntl, os, sys; fcntl.flock(os.open(sys.argv[1], os.O_RDWR), fcntl.LOCK_EX)"
    subprocess.run([sys.executable, "-c", wait, str(lock)], timeout=120, check=True)
    after = subprocess.run([sys.executable, "-c", scan_with], capture_output=True, env=env, timeout=120, check=True)
    assert after.stdout.decode().strip() == "hyperscan"
