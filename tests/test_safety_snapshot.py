"""Untrusted surroundings and untrusted snapshots: troubleshoot started in a folder full of
look-alike modules runs none of them; crafted or absurd snapshots give warnings or one-line errors
(and a fleet report goes on without the bad node); redacted names cannot be recomputed by hashing
a guess; a node name never reaches Slurm's commands as an option or a host list."""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import fakes.slurm
from conftest import REPO, run_cli
from test_output_schemas import assert_valid
from troubleshoot import snapshot
from troubleshoot.errors import TroubleshootError

BASE = json.loads((REPO / "tests" / "fixtures" / "snapshots" / "base.json").read_text())
OOM_LOG = REPO / "examples" / "logs" / "cuda-oom.log"
FAKE_VERSION = "0.0.0+from-the-working-folder"
# Modules the probes' child interpreters import (frameworks, the standard library they use, and
# runpy, which a node's probe command imports); each copy leaves a file behind when it runs.
FRAMEWORKS = ("torch", "tensorflow", "jax")
FRAMEWORK_LOOKALIKES = FRAMEWORKS + ("jaxlib",)
LOOKALIKES = FRAMEWORK_LOOKALIKES + ("json", "ast", "traceback", "runpy")
LOOKALIKE = (f"import os\n"
             f"open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'ran-' + __name__), 'w').close()\n"
             f"__version__ = {FAKE_VERSION!r}\n")
# What the installed console script does: its sys.path holds its own bin folder, never the folder
# the user is in. (`python -m`, as run_cli starts it, puts that folder first: Python's choice.)
CONSOLE = ("import sys; sys.path[:] = [p for p in sys.path if p]; import runpy; "
           "runpy.run_module('troubleshoot', run_name='__main__', alter_sys=True)")


def run_installed(*args: str, cwd: Path, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return subprocess.run([sys.executable, "-c", CONSOLE, *args], cwd=cwd, env=env, capture_output=True,
                          timeout=timeout)


@pytest.fixture
def user_cache() -> Path:
    """The test's own per-user cache (tests/conftest.py)."""
    return Path(os.environ["XDG_CACHE_HOME"])


def shared_cache_env(cache: Path, **extra: str) -> dict:
    return {**os.environ, "XDG_CACHE_HOME": str(cache), **extra}


def lookalike_folder(root: Path, names) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name in names:
        (root / f"{name}.py").write_text(LOOKALIKE)
    return root


def ran(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("ran-*"))


def assert_real_frameworks(frameworks: dict) -> None:
    assert frameworks["available"] is True, frameworks
    for name in FRAMEWORKS:
        info = frameworks.get(name)
        assert info is None or (info.get("version") != FAKE_VERSION and not info.get("import_error")), info


# ---------------------------------------------------------------- code from the working folder

@pytest.mark.parametrize("command", [
    ("probe", "--format", "json"),
    ("diagnose", "--log", str(OOM_LOG), "--format", "json"),
], ids=["probe", "diagnose-with-probing"])
def test_commands_run_no_lookalike_module_from_the_working_folder(tmp_path, user_cache, command):
    folder = lookalike_folder(tmp_path / "downloaded-repo", LOOKALIKES)
    p = run_installed(*command, cwd=folder, env=shared_cache_env(user_cache))
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    assert ran(folder) == []
    doc = json.loads(p.stdout)
    if command[0] == "probe":
        assert_real_frameworks(doc["frameworks"])
    else:
        assert doc["diagnoses"][0]["symptom"] == "cuda-oom"


# The probe imports the real frameworks in a child (not their facts from the cache), with the
# working folder first on the command's own path.
@pytest.mark.cold_cache("frameworks")
def test_probe_started_with_python_m_reports_no_framework_from_the_working_folder(tmp_path, user_cache):
    folder = lookalike_folder(tmp_path / "project", FRAMEWORK_LOOKALIKES)
    p = run_cli("probe", "--format", "json", cwd=folder, env=shared_cache_env(user_cache))
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    assert ran(folder) == []
    assert_real_frameworks(json.loads(p.stdout)["frameworks"])


def test_probed_interpreter_given_by_a_relative_path_still_answers(tmp_path, user_cache):
    # The child leaves the working folder once started; an interpreter named relative to it still starts.
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").symlink_to(sys.executable)
    p = run_cli("probe", "--format", "json", "--python", "bin/python", cwd=tmp_path,
                env=shared_cache_env(user_cache))
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    assert json.loads(p.stdout)["frameworks"]["available"] is True


PATH_PLUGIN = '''
import os, sys
from troubleshoot.hookspecs import hookimpl
from troubleshoot.probes.base import Probe
import helper  # a sibling module: importable while the plugin loads


def _path(ctx):
    here = os.getcwd()
    return {"available": True, "folder_on_path": any(p in ("", ".", here) for p in sys.path)}


@hookimpl
def troubleshoot_probes():
    return [Probe("pathcheck", _path, timeout=2)]
'''


@pytest.mark.parametrize("plugin", ["./team_plugin.py", "team_plugin"], ids=["file", "module"])
def test_a_local_plugin_leaves_the_working_folder_off_the_path_after_it_loads(tmp_path, user_cache, plugin):
    (tmp_path / "team_plugin.py").write_text(PATH_PLUGIN)
    (tmp_path / "helper.py").write_text("")
    p = run_installed("-p", plugin, "probe", "--format", "json", cwd=tmp_path, env=shared_cache_env(user_cache))
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    assert json.loads(p.stdout)["pathcheck"] == {"available": True, "folder_on_path": False}


# ---------------------------------------------------------------- a fake Slurm for fleet probe

@pytest.fixture
def fake_slurm(tmp_path):
    """srun, squeue, scontrol, salloc, sinfo and scancel on PATH that log their arguments; srun
    runs its command here, as on a node (tests/fakes/slurm.py)."""
    return fakes.slurm.fake_slurm(tmp_path)


def test_fleet_probe_nodes_run_no_code_from_the_callers_folder(tmp_path, fake_slurm, user_cache):
    env, calls = fake_slurm
    folder = lookalike_folder(tmp_path / "job-folder", LOOKALIKES)
    env = {**env, "XDG_CACHE_HOME": str(user_cache)}
    p = run_installed("fleet", "probe", "--slurm", "--job", "4242", "--out", str(tmp_path / "snaps"),
                      "--format", "json", cwd=folder, env=env)
    assert ran(folder) == []
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    assert [n["status"] for n in json.loads(p.stdout)["nodes"]] == ["ok"]
    assert_real_frameworks(json.loads((tmp_path / "snaps" / "node1.json").read_text())["frameworks"])


UNSAFE_NODES = ("--uid=0", "-w", "gpu[1-2]", "a,b", "x;reboot")


def test_fleet_probe_never_hands_an_unsafe_node_name_to_srun(tmp_path, fake_slurm, user_cache):
    env, calls = fake_slurm
    env = {**env, "XDG_CACHE_HOME": str(user_cache), "FAKE_SLURM_NAMES": "\n".join(("node1",) + UNSAFE_NODES)}
    p = run_cli("fleet", "probe", "--slurm", "--job", "4242", "--out", str(tmp_path / "snaps"), "--format", "json",
                cwd=tmp_path, env=env)
    err = p.stderr.decode()
    assert p.returncode == 1 and "Traceback" not in err, err[-2000:]
    (srun,) = calls("srun")  # node1 only
    assert not any(bad in arg for arg in srun for bad in UNSAFE_NODES), srun
    assert "--nodelist=node1" in srun and "--" in srun
    assert srun.index("--") < srun.index(sys.executable)  # everything after `--` is the node's command
    doc = json.loads(p.stdout)
    assert_valid("fleet-probe.schema.json", doc)
    status = {n["node"]: (n["status"], n["error"]) for n in doc["nodes"]}
    assert status.pop("node1") == ("ok", None)
    assert set(status) == set(UNSAFE_NODES)
    assert all(s == "failed" and "not a valid node name" in e for s, e in status.values()), status
    assert sorted(f.name for f in (tmp_path / "snaps").iterdir()) == ["node1.json"]


@pytest.mark.parametrize("option", ["--nodelist=-x", "--nodelist=gpu[1-2] --uid=0", "--job=-1", "--job=42;x",
                                    "--partition=--all"])
def test_fleet_probe_refuses_a_selection_that_could_be_an_option(tmp_path, fake_slurm, option):
    env, calls = fake_slurm
    p = run_cli("fleet", "probe", "--slurm", option, "--out", str(tmp_path / "snaps"), cwd=tmp_path, env=env)
    err = p.stderr.decode()
    assert p.returncode == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert "not a valid" in err
    assert calls("scontrol") == calls("salloc") == calls("squeue") == calls("sinfo") == calls("srun") == []


def test_snapshot_node_names_that_could_be_options_are_dropped_at_load(tmp_path, user_cache):
    snap = json.loads(json.dumps(BASE))
    snap["node"] = {"available": True, "hostname": "gpu-07", "slurm_node": "gpu07 state=resume",
                    "kubernetes_node": "--all", "slurm_state": "IDLE"}
    path = tmp_path / "gpu-07.json"
    path.write_text(json.dumps(snap))
    p = run_cli("diagnose", "--snapshot", str(path), "--log", str(OOM_LOG), "--format", "json",
                env=shared_cache_env(user_cache))
    err = p.stderr.decode()
    assert p.returncode == 0 and "Traceback" not in err, err
    assert f"{path}: node.slurm_node: " in err and f"{path}: node.kubernetes_node: " in err
    node = snapshot.load(path).facts["node"]
    assert "slurm_node" not in node and "kubernetes_node" not in node and node["hostname"] == "gpu-07"


# ---------------------------------------------------------------- crafted values

def snapshot_with_libraries(tmp_path: Path, libraries: list, name: str = "snap.json") -> Path:
    snap = json.loads(json.dumps(BASE))
    snap["cuda"]["libraries"] = libraries
    snap["cuda"].pop("versions", None)  # a snapshot from before they were derived: derived at load
    path = tmp_path / name
    path.write_text(json.dumps(snap))
    return path


@pytest.mark.parametrize("version", ["12.\u00b2", "9" * 5000, "12." + "1" * 5000, "\u0661\u0662.4"],
                         ids=["superscript", "5000-digits", "5000-digit-part", "arabic-digits"])
def test_crafted_library_version_is_a_warning_and_the_snapshot_still_diagnoses(tmp_path, user_cache, version):
    path = snapshot_with_libraries(tmp_path, [
        {"name": "libcudart", "version": version, "path": "/usr/lib/libcudart.so.12", "source": "ldconfig"},
        {"name": "libcudart", "version": "12.4.127", "path": "/usr/local/cuda/lib64/libcudart.so.12", "source": "ldconfig"}])
    p = run_cli("diagnose", "--snapshot", str(path), "--log", str(OOM_LOG), "--format", "json",
                env=shared_cache_env(user_cache))
    err = p.stderr.decode()
    assert p.returncode == 0 and "Traceback" not in err, err[-2000:]
    assert f"{path}: cuda.libraries[0].version: " in err and "not a library version" in err
    assert json.loads(p.stdout)["diagnoses"][0]["symptom"] == "cuda-oom"
    cuda = snapshot.load(path).facts["cuda"]
    assert cuda["versions"] == {"libcudart": ["12.4.127"]}


def test_library_entry_without_a_name_is_dropped_at_load(tmp_path, user_cache):
    from troubleshoot.report import probe_text

    path = snapshot_with_libraries(tmp_path, [{"version": "12.4"}, {"name": None, "version": "12.4"},
                                              {"name": "libcudnn", "version": "9.1.0"}])
    p = run_cli("diagnose", "--snapshot", str(path), "--log", str(OOM_LOG), "--format", "json",
                env=shared_cache_env(user_cache))
    err = p.stderr.decode()
    assert p.returncode == 0 and "Traceback" not in err, err[-2000:]
    assert f"{path}: cuda.libraries[0]: no 'name'; ignored" in err
    facts = snapshot.load(path).facts
    assert facts["cuda"]["libraries"] == [{"name": "libcudnn", "version": "9.1.0"}]
    assert "libcudnn 9.1.0" in probe_text.render(facts)  # the machine view of the TUI


def test_fleet_report_goes_on_past_nodes_with_bad_snapshots(tmp_path, user_cache):
    folder = tmp_path / "snaps"
    folder.mkdir()
    for node in ("node1", "node2"):
        (folder / f"{node}.json").write_text(json.dumps(BASE))
    snapshot_with_libraries(folder, [{"name": "libcudart", "version": "12.\u00b2"}], "node3.json")
    many = json.loads(json.dumps(BASE))
    many["nvml"]["gpus"] = [{"index": i} for i in range(20_000)]
    (folder / "node4.json").write_text(json.dumps(many))
    (folder / "node5.json").write_text("{not json")
    p = run_cli("fleet", "diagnose", str(folder), "--format", "json", env=shared_cache_env(user_cache))
    err = p.stderr.decode()
    assert p.returncode == 0 and "Traceback" not in err, err[-2000:]
    doc = json.loads(p.stdout)
    assert doc["nodes"] == ["node1", "node2", "node3"]
    warnings = "\n".join(doc["warnings"])
    assert f"{folder / 'node3.json'}: cuda.libraries[0].version" in warnings
    assert f"{folder / 'node4.json'}: nvml.gpus has 20000 entries" in warnings
    assert f"{folder / 'node5.json'}:1: not valid JSON" in warnings


# ---------------------------------------------------------------- absurd sizes

def test_snapshot_file_too_large_for_one_machine_is_refused_in_one_line(tmp_path, user_cache):
    path = tmp_path / "million-gpus.json"
    with path.open("w") as f:  # 1,000,000 GPUs, written without building them in memory
        f.write('{"schema": 1, "nvml": {"gpus": [')
        f.write(",".join(['{"index": 0}'] * 1_000_000))
        f.write("]}}")
    p = run_cli("diagnose", "--snapshot", str(path), "--log", str(OOM_LOG), env=shared_cache_env(user_cache))
    err = p.stderr.decode()
    assert p.returncode == 2 and err.count("\n") == 1 and "Traceback" not in err, err[-2000:]
    assert str(path) in err and "MiB" in err and "larger than" in err


def _many_gpus(snap):
    snap["nvml"]["gpus"] = [{"index": i} for i in range(20_000)]


def _many_env(snap):
    snap["env"] = {f"VAR_{i}": "x" for i in range(20_000)}


def _long_plugin_list(snap):
    snap["acme"] = {"samples": [0] * 300_000}


def _many_values(snap):
    snap["acme"] = {"rows": [[0] * 5_000 for _ in range(100)]}


@pytest.mark.parametrize("make, fragment", [
    (_many_gpus, "nvml.gpus has 20000 entries (at most 1024)"),
    (_many_env, "env has 20000 keys (at most 10000)"),
    (_long_plugin_list, "acme.samples has 300000 entries (at most 10000)"),
    (_many_values, "more than 250000 values"),
], ids=["gpus", "env", "plugin-list", "values"])
def test_snapshot_with_absurd_sections_is_refused_naming_the_section(tmp_path, user_cache, make, fragment):
    snap = json.loads(json.dumps(BASE))
    make(snap)
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(snap))
    p = run_cli("diagnose", "--snapshot", str(path), "--log", str(OOM_LOG), env=shared_cache_env(user_cache))
    err = p.stderr.decode()
    assert p.returncode == 2 and err.count("\n") == 1 and "Traceback" not in err, err[-2000:]
    assert f"{path}: {fragment}" in err


# ---------------------------------------------------------------- redaction

def test_redacted_names_cannot_be_recomputed_by_hashing_a_guess(user_cache):
    env = shared_cache_env(user_cache)
    first, second = (json.loads(run_cli("probe", "--format", "json", "--redact", env=env).stdout) for _ in range(2))
    host = socket.gethostname()
    placeholder = first["host"]["hostname"]
    assert re.fullmatch(r"<host-[0-9a-f]{8}>", placeholder)
    assert placeholder != f"<host-{hashlib.sha256(host.encode()).hexdigest()[:8]}>"
    assert first["node"]["hostname"] == placeholder  # the same name, the same placeholder, in one snapshot
    assert second["host"]["hostname"] != placeholder  # but two snapshots cannot be linked by it
    # and the key is nowhere in it: nothing but the probes' areas and the documented facts
    documented = snapshot.schema()["properties"]
    assert set(first) <= set(first["probes"]) | {"schema", "collected_at", "probes", "redacted"}
    for area in ("host", "node"):
        assert set(first[area]) <= set(documented[area]["properties"])


def test_redaction_of_names_with_undecodable_bytes_does_not_fail(user_cache):
    home = "/home/ana\udc80x"  # the bytes b"/home/ana\x80x", as Python reads them from the environment
    p = run_cli("probe", "--format", "json", "--redact", env=shared_cache_env(user_cache, HOME=home))
    err = p.stderr.decode()
    assert p.returncode == 0 and "Traceback" not in err, err[-2000:]
    assert re.fullmatch(r"<home-[0-9a-f]{8}>", json.loads(p.stdout)["host"]["home"])
    assert b"/home/ana" not in p.stdout and b"ana\\udc80" not in p.stdout
    red = snapshot.redact({"schema": 1, "host": {"hostname": "gpu\udc80node", "user": "\udcff"},
                           "env": {"SLURM_NODELIST": "gpu\udc80node"}})
    assert re.fullmatch(r"<host-[0-9a-f]{8}>", red["host"]["hostname"])
    assert red["env"]["SLURM_NODELIST"] == red["host"]["hostname"]


def test_one_key_redacts_several_snapshots_alike():
    key = snapshot.redaction_key()
    a = {"schema": 1, "host": {"hostname": "gpu-node-07"}, "collected_at": "a"}
    b = {"schema": 1, "host": {"hostname": "gpu-node-07"}, "collected_at": "b"}
    assert snapshot.redact(a, key)["host"] == snapshot.redact(b, key)["host"]
    assert snapshot.redact(a)["host"] != snapshot.redact(b)["host"]


def test_check_names_the_section_that_is_too_long():
    with pytest.raises(TroubleshootError, match=r"^x: nvml\.gpus has 2000 entries \(at most 1024\)"):
        snapshot.check({"schema": 1, "nvml": {"gpus": [{}] * 2000}}, "x")
