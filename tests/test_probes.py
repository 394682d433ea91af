"""Probes replay recorded outputs of real machines (tests/fixtures/machines/*/SOURCE.md),
the runner bounds hung and failing probes, and a plugin adds its own probe."""

import json
import os
import sys
import time
from pathlib import Path


from conftest import REPO, run_cli
from fakes.nvsmi import FakeNVML
from troubleshoot.probes import docker, kernel, nvml
from troubleshoot.probes.base import CmdResult, Probe, ProbeContext, run_probes

MACHINES = REPO / "tests" / "fixtures" / "machines"


def replay(commands: dict[str, str], whichable=("dmesg", "docker", "journalctl")):
    """A runner that answers recorded outputs by command name, and a matching `which`."""

    def runner(argv, timeout):
        name = os.path.basename(argv[0])
        if name not in commands:
            return CmdResult(tuple(argv), None, error=f"{name}: command not found")
        return CmdResult(tuple(argv), 0, commands[name], "")

    return runner, (lambda n: f"/usr/bin/{n}" if n in commands and n in whichable else None)


def lsmod_to_proc_modules(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("Module")]
    return "\n".join(f"{ln.split()[0]} {ln.split()[1]} 0 - Live 0x0000000000000000" for ln in lines) + "\n"


def root_with(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = tmp_path / rel.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path


# ---------------------------------------------------------------- NVML

def test_nvml_healthy_multi_gpu_server():
    facts = nvml.probe(ProbeContext(nvml=FakeNVML(MACHINES / "healthy-multi-gpu" / "nvidia-smi-q.txt")))
    assert facts["available"] and facts["driver_version"] == "555.42.02" and facts["cuda_driver_version"] == "12.5"
    assert len(facts["gpus"]) == 4
    g = facts["gpus"][0]
    assert g["name"] == "NVIDIA A100-SXM4-80GB" and g["memory_total_mib"] == 81920
    assert (g["pcie_gen_current"], g["pcie_gen_max"], g["pcie_width_current"], g["pcie_width_max"]) == (4, 4, 16, 16)
    assert g["ecc_uncorrected_volatile"] == 0 and g["remapped_rows_failure"] is False
    assert g["throttle_reasons"] == ["gpu_idle"] and g["persistence_mode"] is True and g["processes"] == []


def test_nvml_consumer_card_loses_fields_not_gpus():
    facts = nvml.probe(ProbeContext(nvml=FakeNVML(MACHINES / "consumer-card" / "nvidia-smi-q.txt")))
    assert len(facts["gpus"]) == 2
    g = facts["gpus"][0]
    assert g["name"] == "NVIDIA GeForce RTX 3090" and g["temperature_c"] is not None
    assert g["ecc_uncorrected_volatile"] is None and "ecc_uncorrected_volatile" in g["errors"]
    assert g["remapped_rows_failure"] is None and "remapped_rows" in g["errors"]


def test_nvml_pcie_degraded_and_power_capped_recordings():
    deg = nvml.probe(ProbeContext(nvml=FakeNVML(MACHINES / "pcie-degraded" / "nvidia-smi-q.txt")))
    assert (deg["gpus"][0]["pcie_width_current"], deg["gpus"][0]["pcie_width_max"]) == (4, 8)
    capped = nvml.probe(ProbeContext(nvml=FakeNVML(MACHINES / "throttled" / "nvidia-smi-q-a40x10-sw-power-cap.txt")))
    assert sum("sw_power_cap" in g["throttle_reasons"] for g in capped["gpus"]) == 2


def test_nvml_init_failure_is_a_fact():
    import pynvml

    facts = nvml.probe(ProbeContext(nvml=FakeNVML({"driver": None, "cuda": None, "gpus": []},
                                                  init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)))
    assert facts == {"available": False, "error": "nvmlInit failed: Driver Not Loaded", "gpus": []}


def test_recorded_pcie_degraded_machine_is_diagnosed(tmp_path):
    facts = nvml.probe(ProbeContext(nvml=FakeNVML(MACHINES / "pcie-degraded" / "nvidia-smi-q.txt")))
    snap = {"schema": 1, "nvml": facts}
    (tmp_path / "s.json").write_text(json.dumps(snap))
    p = run_cli("diagnose", "--format", "json", "--snapshot", str(tmp_path / "s.json"))
    symptoms = [d["symptom"] for d in json.loads(p.stdout)["diagnoses"]]
    assert "pcie-degraded" in symptoms


# ---------------------------------------------------------------- kernel

def test_kernel_nouveau_box(tmp_path):
    lsmod = (MACHINES / "nouveau-loaded" / "lsmod.txt").read_text()
    root = root_with(tmp_path, {"/proc/modules": lsmod_to_proc_modules(lsmod)})
    runner, which = replay({"dmesg": (MACHINES / "nouveau-loaded" / "dmesg.txt").read_text()})
    facts = kernel.probe(ProbeContext(root=root, runner=runner, which=which))
    assert facts["modules"]["nouveau"] is True and facts["modules"]["nvidia"] is False
    assert facts["nouveau_blacklisted"] is False and facts["xid_events"] == []
    assert facts["kernel_log_source"] == "dmesg"


def test_kernel_nvidia_box_with_xid_79_and_blacklist(tmp_path):
    root = root_with(tmp_path, {
        "/proc/modules": lsmod_to_proc_modules((MACHINES / "misc" / "lsmod-nvidia.txt").read_text()),
        "/proc/driver/nvidia/version": (MACHINES / "healthy-multi-gpu" / "proc-driver-nvidia-version.txt").read_text(),
        "/etc/modprobe.d/blacklist-nouveau.conf": "blacklist nouveau\noptions nouveau modeset=0\n",
    })
    runner, which = replay({"dmesg": (MACHINES / "xid-79" / "dmesg.txt").read_text()})
    facts = kernel.probe(ProbeContext(root=root, runner=runner, which=which))
    assert facts["modules"]["nvidia"] and facts["modules"]["nvidia_uvm"] and not facts["modules"]["nouveau"]
    assert facts["nvidia_module_version"] == "565.57.01"
    assert facts["nouveau_blacklisted"] and facts["nouveau_blacklist_files"] == ["/etc/modprobe.d/blacklist-nouveau.conf"]
    assert [(x["code"], x["pci"]) for x in facts["xid_events"]] == [(79, "0000:03:00")]


def test_kernel_log_unreadable_is_a_fact(tmp_path):
    def runner(argv, timeout):
        return CmdResult(tuple(argv), 1, "", "dmesg: read kernel buffer failed: Operation not permitted")

    facts = kernel.probe(ProbeContext(root=tmp_path, runner=runner, which=lambda n: "/bin/" + n if n == "dmesg" else None))
    assert facts["xid_events"] is None and "Operation not permitted" in facts["kernel_log_error"]
    assert facts["modules"] is None and facts["error"] == "cannot read /proc/modules"


def test_multiline_fallen_off_the_bus_counts_as_xid_79():
    events = kernel.parse_xids((MACHINES / "xid-79" / "dmesg-fallen-off-no-xid.txt").read_text())
    assert [(e["code"], e["pci"]) for e in events] == [(79, "0000:b3:00.0")]


# ---------------------------------------------------------------- docker

def test_docker_without_nvidia_runtime(tmp_path):
    runner, which = replay({"docker": (MACHINES / "docker-no-nvidia-runtime" / "docker-info.json").read_text()})
    facts = docker.probe(ProbeContext(root=tmp_path, runner=runner, which=which))
    assert facts["installed"] and facts["server_version"] == "20.10.12"
    assert "nvidia" not in facts["runtimes"] and facts["nvidia_runtime"] is False
    assert facts["in_container"] is False


def test_docker_daemon_down_recorded_here(tmp_path):
    rec = REPO / "tests" / "fixtures" / "recorded"
    out, err = (rec / "docker-info-daemon-down.json").read_text(), (rec / "docker-info-daemon-down.stderr").read_text()

    def runner(argv, timeout):
        return CmdResult(tuple(argv), 1, out, err)

    root = root_with(tmp_path, {"/etc/docker/daemon.json": '{"runtimes": {"nvidia": {"path": "nvidia-container-runtime"}}}',
                                "/.dockerenv": ""})
    facts = docker.probe(ProbeContext(root=root, runner=runner, which=lambda n: "/usr/bin/docker" if n == "docker" else None))
    assert facts["installed"] and facts["server_version"] is None and "Cannot connect" in facts["server_error"]
    assert facts["client_version"] == "28.2.2" and facts["daemon_json_nvidia_runtime"] is True
    assert facts["in_container"] is True


def test_docker_missing_and_bad_daemon_json(tmp_path):
    root = root_with(tmp_path, {"/etc/docker/daemon.json": "{not json"})
    facts = docker.probe(ProbeContext(root=root, which=lambda n: None))
    assert facts["installed"] is False and facts["error"] == "docker: command not found"
    assert "not valid JSON" in facts["daemon_json_error"]


# ---------------------------------------------------------------- runner

def test_runner_bounds_hung_and_broken_probes():
    def hang(ctx):
        time.sleep(30)
        return {}

    def boom(ctx):
        raise OSError("permission denied: /dev/nvidiactl")

    seen = []
    started = time.monotonic()
    snap = run_probes([Probe("hung", hang, timeout=0.5), Probe("boom", boom, timeout=2),
                       Probe("fine", lambda c: {"available": True, "x": 1}, timeout=2)], ProbeContext(),
                      on_result=lambda o: seen.append(o.name))
    assert time.monotonic() - started < 10  # bounded by the hung probe's own timeout, not 30 s
    assert snap["hung"] == {"available": False, "error": "timed out after 0.5s"}
    assert snap["probes"]["hung"]["status"] == "timeout"
    assert snap["boom"]["available"] is False and "permission denied" in snap["boom"]["error"]
    assert snap["probes"]["boom"]["status"] == "error"
    assert snap["fine"]["x"] == 1 and sorted(seen) == ["boom", "fine", "hung"]


def test_command_runner_never_raises():
    from troubleshoot.probes.base import run_command

    assert run_command(["/nonexistent/tool"], 1).error == "/nonexistent/tool: command not found"
    r = run_command([sys.executable, "-c", "import time; time.sleep(5)"], 0.3)
    assert r.error and "timed out" in r.error
    assert run_command([sys.executable, "-c", "print('hi')"], 5).stdout.strip() == "hi"


def test_frameworks_probe_survives_a_broken_interpreter(tmp_path):
    from troubleshoot.probes import frameworks

    facts = frameworks.probe(ProbeContext(python=str(tmp_path / "no-python")))
    assert facts["available"] is False and "not found" in facts["error"]
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'Segmentation fault' >&2\nexit 139\n")
    fake.chmod(0o755)
    facts = frameworks.probe(ProbeContext(python=str(fake)))
    assert facts["available"] is False and "Segmentation fault" in facts["error"]


# ---------------------------------------------------------------- plugins

def test_local_plugin_adds_a_probe_and_rules(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO / "tests" / "plugins"))
    p = run_cli("-p", "acme_probe", "probe", "--format", "json", env=env)
    assert p.returncode == 0, p.stderr
    snap = json.loads(p.stdout)
    assert snap["acme"] == {"available": True, "scratch_free_gib": 3, "mount": "/scratch"}
    path = tmp_path / "s.json"
    path.write_text(p.stdout.decode())
    p = run_cli("-p", "acme_probe", "diagnose", "--format", "json", "--snapshot", str(path), env=env)
    ds = json.loads(p.stdout)["diagnoses"]
    hit = next(d for d in ds if d["rule"] == "acme-scratch-nearly-full")
    assert hit["explain"] == "/scratch has 3 GiB free; jobs staging data there will stall."
    lint = run_cli("-p", "acme_probe", "rules", "lint", env=env)
    assert lint.returncode == 0, lint.stdout
    # `rules why` sees the plugin's rule folder like every other command.
    why = run_cli("-p", "acme_probe", "rules", "why", "acme-scratch-nearly-full", "--snapshot", str(path), env=env)
    assert why.returncode == 0, why.stderr
    assert b"acme-scratch-nearly-full" in why.stdout and b": fired" in why.stdout
    assert b"acme.scratch_free_gib = 3" in why.stdout


def test_missing_plugin_module_is_a_one_line_error():
    p = run_cli("-p", "no_such_plugin_mod", "probe")
    assert p.returncode == 2 and "cannot load plugin module 'no_such_plugin_mod'" in p.stderr.decode()
