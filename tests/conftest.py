from __future__ import annotations

import os
import shutil
import subprocess
import sys as _sys
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_sys.path.insert(0, str(REPO / "tests"))  # the `fakes` helpers
SHARED = REPO.parent / "shared"


def pytest_configure(config):
    _keep_bytecode(config)


def pytest_xdist_auto_num_workers(config):
    """`-n auto`: two workers a core for the default suite, whose tests spend much of their time
    waiting on the processes and terminals they drive (a 2-core machine ran it in 132 s instead
    of 164 s beside a CPU-bound job); one a core for the slow group, whose big logs and fuzzing
    keep a core busy each and fill the disk in proportion."""
    cpus = os.cpu_count() or 1
    if "not slow" in (config.getoption("markexpr", "") or ""):
        return min(2 * cpus, cpus + 8)
    return cpus


def _keep_bytecode(config) -> None:
    """Where the environment forbids writing bytecode ($PYTHONDONTWRITEBYTECODE, as container
    images often set), every interpreter a test starts (the command, its probes, a job) would
    compile this checkout's modules again (half of a small command's start), and pytest would
    rewrite every test module again. This process, the run's workers and the processes they
    start keep it in pytest's cache folder instead ($PYTHONPYCACHEPREFIX), never in the source
    tree. Set here, before the workers start, it reaches them all."""
    if not os.environ.get("PYTHONDONTWRITEBYTECODE") or os.environ.get("PYTHONPYCACHEPREFIX"):
        return
    cache = getattr(config, "cache", None)  # None under -p no:cacheprovider
    if cache is None:
        return
    try:
        folder = cache.mkdir("pycache")
    except OSError:
        return
    os.environ["PYTHONPYCACHEPREFIX"] = str(folder)
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    sys.pycache_prefix, sys.dont_write_bytecode = str(folder), False  # this process's own imports from now on


def run_cli(*args: str, input: bytes | str | None = None, env: dict | None = None, cwd: Path | None = None,
            timeout: float = 60) -> subprocess.CompletedProcess:
    """Run the real command in a child process, as a user would."""
    if isinstance(input, str):
        input = input.encode()
    return subprocess.run([sys.executable, "-m", "troubleshoot", *args], input=input, capture_output=True,
                          env=env, cwd=cwd or REPO, timeout=timeout)


def diagnose_pasted(text: str) -> dict:
    """The JSON document `troubleshoot diagnose --no-probe` gives for `text` piped in as a log."""
    import json

    p = run_cli("diagnose", "--no-probe", "--format", "json", "--log", "-", input=text)
    assert p.returncode in (0, 1), p.stderr
    return json.loads(p.stdout)


def run_main(*args: str, input: bytes | str | None = None, env: dict | None = None, cwd: Path | None = None,
             timeout: float = 60) -> subprocess.CompletedProcess:
    """The command's `main` in this process, for tests about what a command decides and writes
    rather than about the process that runs it (`run_cli` starts that): the same arguments,
    working folder (the checkout unless given), environment and standard input (a pipe);
    standard output and error as bytes and the exit status, as `run_cli` returns them. Only for
    commands that leave no thread or child behind: not `run`, `tui`, `--follow`, a probe of
    this machine or a fleet probe, nor a plugin found through $PYTHONPATH."""
    import threading

    from troubleshoot import cli

    if isinstance(input, str):
        input = input.encode()
    read_end, write_end = os.pipe()

    def feed() -> None:
        with open(write_end, "wb") as w:
            try:
                w.write(input or b"")
            except BrokenPipeError:  # the command did not read it all
                pass

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    saved_env, saved_cwd, saved_streams = dict(os.environ), os.getcwd(), (sys.stdin, sys.stdout, sys.stderr)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, open(read_end, encoding="utf-8") as stdin:
        try:
            if env is not None:
                os.environ.clear()
                os.environ.update(env)
            os.chdir(cwd or REPO)
            sys.stdin = stdin
            sys.stdout = open(out.fileno(), "w", encoding="utf-8", closefd=False)
            sys.stderr = open(err.fileno(), "w", encoding="utf-8", errors="backslashreplace", closefd=False)
            try:
                code = cli.main(list(args))
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
            except Exception:  # what the interpreter prints for an uncaught exception, and its status
                import traceback

                traceback.print_exc()
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            sys.stdin, sys.stdout, sys.stderr = saved_streams
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_env)
        out.seek(0)
        err.seek(0)
        done = subprocess.CompletedProcess(["troubleshoot", *args], code, out.read(), err.read())
    feeder.join(timeout)
    return done


def torch_build() -> dict | None:
    """The installed torch's version file ({"version": ..., "cuda": ...}), read without importing
    torch (seconds of a start); None when torch is not installed."""
    import ast
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    found = {"version": None, "cuda": None}
    version_py = Path(list(spec.submodule_search_locations)[0]) / "version.py"
    for node in ast.parse(version_py.read_text()).body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        name = {"__version__": "version", "cuda": "cuda"}.get(getattr(target, "id", None))
        if name and getattr(node, "value", None) is not None:
            try:
                found[name] = ast.literal_eval(node.value)
            except ValueError:
                pass
    return found


@pytest.fixture
def rules_dir(tmp_path):
    """Write rule files into a fresh folder: rules_dir({'a.yaml': '...'}) -> Path."""

    def make(files: dict[str, str]) -> Path:
        d = tmp_path / "team-rules"
        d.mkdir(exist_ok=True)
        for name, text in files.items():
            (d / name).write_text(textwrap.dedent(text))
        return d

    return make


@pytest.fixture(scope="session")
def _warm_user_cache(tmp_path_factory):
    """The per-user cache as a user's first few commands leave it: each shipped rule file's YAML,
    the whole shipped rule set, the plugin entry points, lint's verdicts on the shipped patterns,
    the scan's pattern databases and the framework facts of this interpreter. Made once per test
    run by the real commands (a clean config, no $TROUBLESHOOT_RULES), by whichever worker asks
    first; the others wait for it."""
    import fcntl

    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the run's folder, above each worker's own
    home = base / "warm-user"
    cache = home / "xdg-cache"
    with open(base / "warm-user.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the worker that makes it is done, or dies
        if not (home / "made").exists():
            shutil.rmtree(home, ignore_errors=True)
            _make_warm_cache(home, cache)
            (home / "made").write_text(_digest(cache))
    yield cache
    # Each test's cache links these files (_isolated_config): none may have changed under it.
    assert _digest(cache) == (home / "made").read_text(), f"a test changed the shared cache files in {cache}"


def _digest(folder: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    for f in sorted(p for p in folder.rglob("*") if p.is_file()):
        h.update(str(f.relative_to(folder)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def _make_warm_cache(home: Path, cache: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TROUBLESHOOT_RULES"}
    env.update(XDG_CONFIG_HOME=str(home / "xdg-config"), XDG_STATE_HOME=str(home / "xdg-state"),
               XDG_CACHE_HOME=str(cache))
    command = [sys.executable, "-m", "troubleshoot"]
    log = REPO / "examples" / "logs" / "cuda-oom.log"
    # `probe` keeps the framework facts (torch imported once), meanwhile: the first run parses
    # the rule files, the second keeps the rule set, and a log read from a file and one from a
    # pipe leave the pattern database each wants.
    probe = subprocess.Popen([*command, "probe", "--format", "json"], env=env, cwd=REPO, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    try:
        for argv, stdin in ((["rules", "list"], None), (["rules", "lint"], None),
                            (["diagnose", "--no-probe", "--log", str(log)], None),
                            (["diagnose", "--no-probe", "--log", "-"], log.read_bytes())):
            p = subprocess.run([*command, *argv], input=stdin, env=env, cwd=REPO, capture_output=True, timeout=300)
            assert p.returncode == 0, p.stderr.decode()[-2000:]
            wait_for_detached_compile(cache)
        _, err = probe.communicate(timeout=300)
        assert probe.returncode == 0, err.decode()[-2000:]
    finally:
        probe.kill()
        probe.wait()


def wait_for_detached_compile(cache: Path) -> None:
    """A pattern database compiled for the next run after a command has returned is written by
    a process that holds `.compiling` locked until then: taking the lock waits for it."""
    lock = cache / "troubleshoot" / "hyperscan" / ".compiling"
    if lock.exists():
        take = "import fcntl, os, sys; fcntl.flock(os.open(sys.argv[1], os.O_RDWR), fcntl.LOCK_EX)"
        subprocess.run([sys.executable, "-c", take, str(lock)], timeout=300, check=True)


@pytest.fixture(autouse=True)
def _isolated_config(request, tmp_path, monkeypatch):
    """No test reads the developer's own config or TROUBLESHOOT_RULES. Each test has a cache of
    its own, a copy of the one a user's first commands leave (`_warm_user_cache`), so that a
    command does not build the shipped rules or import torch again. A test about the caches
    themselves is marked `cold_cache` and starts from none; `cold_cache("frameworks")` leaves
    out only the caches named (folders of $XDG_CACHE_HOME/troubleshoot)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.delenv("TROUBLESHOOT_RULES", raising=False)
    cold = request.node.get_closest_marker("cold_cache")
    if cold is None or cold.args:
        left_out = set(cold.args) if cold else set()
        # Linked, not copied (a copy per test was 7 s of the suite's CPU): the cache writes an
        # entry as a new file renamed over the old one, so a test's writes never reach the
        # shared files. A test that damages an entry in place starts from an empty cache
        # (`cold_cache`). The compile lock is left out: each test's compiles lock their own.
        shutil.copytree(request.getfixturevalue("_warm_user_cache"), tmp_path / "xdg-cache", symlinks=True,
                        ignore=lambda folder, names: [n for n in names if n in left_out or n == ".compiling"],
                        copy_function=os.link)


@pytest.fixture
def tiny_disk(tmp_path):
    """A real 64 KiB file system, where this machine lets us mount one (root, no sandbox)."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root outside a sandbox)")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)
