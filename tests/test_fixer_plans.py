"""Plans that cannot hurt the machine: the Container Toolkit key checked before it is trusted,
old NVIDIA apt lists disabled (backed up), Docker restarts that name the containers they stop,
driver installs as NVIDIA's guide does them for the distribution of the machine being fixed,
and framework installs pinned to one release. Real gpg, curl and files under --root."""

import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from conftest import REPO, run_main
from troubleshoot.fixes import journal
from troubleshoot.fixes.plan import Advice, EnsureLine, RunCommand, WriteFile
from troubleshoot.probes.base import ProbeContext
from troubleshoot.probes.docker import toolkit_apt_sources
from troubleshoot_fixers import distro
from troubleshoot_fixers.framework import MatchFrameworkToDriver, UpgradeDriver
from troubleshoot_fixers.system import TOOLKIT_KEY_FPR, NvidiaContainerToolkit

BASE_PATH = REPO / "tests" / "fixtures" / "snapshots" / "base.json"
BASE = json.loads(BASE_PATH.read_text())
OLD_LIST = "deb https://nvidia.github.io/nvidia-docker/ubuntu18.04/$(ARCH) /"


def snap(**host):
    """The base machine on another distribution, without the Container Toolkit yet."""
    s = copy.deepcopy(BASE)
    s["host"].update(host)
    s["docker"].pop("nvidia_ctk_version", None)
    return s


def plan(fixer, snapshot, **params):
    return fixer.plan(fixer.validate(params), snapshot)


def texts(pl) -> str:
    return "\n".join(a.text for a in pl.actions if isinstance(a, Advice))


# ----------------------------------------------------------------- the toolkit's key

def test_toolkit_key_is_checked_in_a_private_folder_before_apt_trusts_it():
    pl = plan(NvidiaContainerToolkit(), snap(os_id="ubuntu", os_id_like="debian", os_version_id="22.04"))
    argvs = [a.argv for a in pl.actions if isinstance(a, RunCommand)]
    # The interpreter that runs the key check lives wherever the tool is installed (a venv under
    # /tmp, say): only the arguments after it must not name a fixed temporary path.
    for argv in argvs:
        args = argv[1:] if argv[0] == sys.executable else argv
        assert not any(tmp in arg for arg in args for tmp in ("/tmp", "/var/tmp")), ("a fixed temporary path", argv)
    assert not any(argv[0] == "gpg" for argv in argvs), "nothing dearmored outside the check"
    check = next(i for i, a in enumerate(pl.actions) if isinstance(a, RunCommand) and "troubleshoot_fixers.keycheck" in a.argv)
    argv = pl.actions[check].argv
    assert argv[:3] == (sys.executable, "-m", "troubleshoot_fixers.keycheck")  # the tool's own interpreter
    assert argv[argv.index("--fingerprint") + 1] == TOOLKIT_KEY_FPR and "--dearmor" in argv
    trusted = next(i for i, a in enumerate(pl.actions) if isinstance(a, WriteFile) and a.path.endswith("toolkit.list"))
    update = next(i for i, a in enumerate(pl.actions) if isinstance(a, RunCommand) and a.argv[:2] == ("apt-get", "update"))
    assert check < trusted < update


@pytest.fixture(scope="module")
def gpg_keys():
    """Two throw-away signing keys, armored, in a short folder (gpg-agent's socket path is limited)."""
    if not shutil.which("gpg"):
        pytest.skip("gpg is not installed")
    home = tempfile.mkdtemp(prefix="ts-gpg-", dir="/tmp")
    gpg = ["gpg", "--homedir", home, "--batch", "--passphrase", "", "--pinentry-mode", "loopback"]
    keys = {}
    try:
        for name in ("vendor", "intruder"):
            subprocess.run(gpg + ["--quick-gen-key", f"{name} <{name}@example.com>", "ed25519", "sign", "never"],
                           check=True, capture_output=True, timeout=120)
            out = subprocess.run(gpg + ["--with-colons", "--list-keys", f"{name}@example.com"], check=True,
                                 capture_output=True, text=True).stdout
            fpr = next(ln.split(":")[9] for ln in out.splitlines() if ln.startswith("fpr:"))
            armored = subprocess.run(gpg + ["--armor", "--export", fpr], check=True, capture_output=True).stdout
            keys[name] = (fpr, armored)
        yield keys
    finally:
        subprocess.run(["gpgconf", "--homedir", home, "--kill", "gpg-agent"], capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


def keycheck(tmp_path, key: bytes, fingerprint: str, *extra):
    src = tmp_path / "served" / "gpgkey"
    src.parent.mkdir(exist_ok=True)
    src.write_bytes(key)
    # A curl in front of the real one records the folder it downloads into.
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    (bindir / "curl").write_text('#!/bin/sh\nout=""; prev=""\n'
                                 'for a in "$@"; do [ "$prev" = -o ] && out="$a"; prev="$a"; done\n'
                                 f'stat -c "%a %n" "$(dirname "$out")" >> {tmp_path}/seen\n'
                                 f'exec {shutil.which("curl")} "$@"\n')
    (bindir / "curl").chmod(0o755)
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "TMPDIR": str(tmp)}
    out = tmp_path / "keyrings" / "toolkit.gpg"
    p = subprocess.run([sys.executable, "-m", "troubleshoot_fixers.keycheck", "--url", src.as_uri(), "--fingerprint",
                        fingerprint, "--out", str(out), *extra], capture_output=True, text=True, env=env, timeout=120)
    return p, out, tmp


def test_keycheck_installs_the_expected_key_dearmored_from_a_private_folder(tmp_path, gpg_keys):
    fpr, armored = gpg_keys["vendor"]
    p, out, tmp = keycheck(tmp_path, armored, fpr, "--dearmor")
    assert p.returncode == 0, p.stderr
    assert out.read_bytes()[:1] != b"-" and len(out.read_bytes()) > 32  # binary, as apt's signed-by wants
    seen = (tmp_path / "seen").read_text().split()
    assert seen[0] == "700" and seen[1].startswith(str(tmp / "troubleshoot-key-"))  # mkdtemp: 0700, random name
    assert list(tmp.iterdir()) == []  # and removed afterwards
    assert oct(out.stat().st_mode & 0o777) == "0o644"


@pytest.mark.parametrize("case", ["other key", "extra key"])
def test_keycheck_refuses_a_key_that_is_not_exactly_the_vendors(tmp_path, gpg_keys, case):
    fpr, armored = gpg_keys["vendor"]
    intruder = gpg_keys["intruder"][1]
    key = intruder if case == "other key" else armored + intruder
    p, out, _ = keycheck(tmp_path, key, fpr)
    assert p.returncode == 1
    assert p.stderr.count("\n") == 1 and "refused the key" in p.stderr and f"expected exactly {fpr}" in p.stderr
    assert not out.exists()


# ----------------------------------------------------------------- old apt lists

def test_old_nvidia_docker_list_is_found_by_the_probe_and_disabled_with_a_backup(tmp_path):
    root = tmp_path / "root"
    lists = root / "etc" / "apt" / "sources.list.d"
    lists.mkdir(parents=True)
    old = lists / "nvidia-docker.list"
    old_bytes = f"{OLD_LIST}\ndeb https://example.com/other stable main\n".encode()
    old.write_bytes(old_bytes)
    (lists / "unrelated.list").write_text("deb http://deb.debian.org/debian bookworm main\n")
    found = toolkit_apt_sources(ProbeContext(root=root))
    assert found == [{"path": "/etc/apt/sources.list.d/nvidia-docker.list", "line": OLD_LIST}]

    s = snap(os_id="ubuntu", os_id_like="debian", os_version_id="22.04")
    s["docker"].update(toolkit_apt_sources=found, nvidia_ctk_version="1.17.0")
    f = tmp_path / "snap.json"
    f.write_text(json.dumps(s))
    p = run_main("fix", "nvidia-container-toolkit", "--snapshot", str(f), "--root", str(root), "--apply", "--yes")
    assert p.returncode == 0, p.stderr
    lines = old.read_text().splitlines()
    assert lines[0].startswith("# disabled by troubleshoot (Signed-By conflict") and lines[0].endswith(OLD_LIST)
    assert lines[1] == "deb https://example.com/other stable main"
    eid = next(e.id for _, e in journal.entries() if isinstance(e, journal.Entry))
    assert run_main("undo", eid).returncode == 0
    assert old.read_bytes() == old_bytes


def test_a_stray_path_in_the_facts_is_not_followed():
    s = snap(os_id="debian", os_version_id="12")
    s["docker"]["toolkit_apt_sources"] = [{"path": "/home/ana/.bashrc", "line": "x"}, "junk", {"path": 3}]
    pl = plan(NvidiaContainerToolkit(), s)
    assert not [a for a in pl.actions if isinstance(a, EnsureLine)]


# ----------------------------------------------------------------- docker restarts

@pytest.mark.parametrize("docker, says", [
    ({"containers_running": [{"id": "3f2a", "name": "trainer", "image": "nvcr.io/nvidia/pytorch:24.01-py3"},
                             {"id": "9b1c", "name": "jupyter", "image": "jupyter/base"}]},
     "2 running container(s) STOP when Docker restarts: trainer (nvcr.io/nvidia/pytorch:24.01-py3), jupyter (jupyter/base)"),
    ({"containers_running": []}, "no container is running"),
    (None, "could not list running containers"),
])
def test_docker_restart_warns_with_the_running_containers(tmp_path, docker, says):
    s = snap(os_id="ubuntu", os_version_id="22.04")
    if docker is None:
        del s["docker"]
    else:
        s["docker"].update(docker, nvidia_ctk_version="1.17.0")
    f = tmp_path / "snap.json"
    f.write_text(json.dumps(s))
    out = run_main("fix", "nvidia-container-toolkit", "--snapshot", str(f)).stdout.decode()
    warn = out.index(says)
    assert warn < out.index("run [root]: systemctl restart docker")


# ----------------------------------------------------------------- distribution

@pytest.mark.parametrize("host, family", [
    ({"os_id": "rocky", "os_id_like": "rhel centos fedora", "os": "Rocky Linux 9.3 (Blue Onyx)"}, "redhat"),
    ({"os_id": "opensuse-leap", "os_id_like": "suse opensuse", "os": "openSUSE Leap 15.5"}, "suse"),
    ({"os_id": "sles", "os": "SUSE Linux Enterprise Server 15 SP5"}, "suse"),
    ({"os_id": "arch", "os": "Arch Linux"}, "arch"),
    ({"os_id": "pop", "os_id_like": "ubuntu debian", "os": "Pop!_OS 22.04 LTS"}, "debian"),
    ({"os_id": "gentoo", "os": "Gentoo Linux"}, None),
    ({"os_id": None, "os": "AlmaLinux 9.4"}, "redhat"),  # a snapshot from before host.os_id
])
def test_distribution_comes_from_the_snapshot_not_this_machine(host, family):
    assert distro.family(snap(**host)) == family


def test_a_foreign_snapshot_never_uses_this_machines_tools(tmp_path, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "nvidia-ctk").write_text("#!/bin/sh\necho 1.17.0\n")
    (bindir / "nvidia-ctk").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    s = snap(os_id="rocky", os_version_id="9.3")
    s["docker"].pop("nvidia_ctk_version", None)
    pl = plan(NvidiaContainerToolkit(), s)
    cmds = [a.argv for a in pl.actions if isinstance(a, RunCommand)]
    assert ("dnf", "install", "-y", "nvidia-container-toolkit") in cmds  # the snapshot's machine lacks it


def test_unsupported_distribution_says_what_to_do_by_hand():
    pl = plan(NvidiaContainerToolkit(), snap(os_id="gentoo", os="Gentoo Linux"))
    text = texts(pl)
    assert "Gentoo Linux: not a distribution troubleshoot knows how to install the NVIDIA Container Toolkit" in text
    assert "unsupported. Here is what to do by hand" in text and TOOLKIT_KEY_FPR in text


# ----------------------------------------------------------------- upgrade-driver

def gpus(*ccs):
    return [{"index": i, "name": "GPU", "compute_capability": cc} for i, cc in enumerate(ccs)]


@pytest.mark.parametrize("host, wants, never", [
    ({"os_id": "ubuntu", "os_id_like": "debian", "os_version_id": "22.04"},
     ["repos/ubuntu2204/x86_64/cuda-keyring_1.1-1_all.deb", "sudo dpkg -i cuda-keyring_1.1-1_all.deb",
      "sudo apt-get install -y nvidia-driver-pinning-580", "sudo apt-get install -y nvidia-open-580"],
     ["dnf", "ubuntu-drivers"]),
    ({"os_id": "debian", "os_version_id": "12"}, ["repos/debian12/x86_64/", "nvidia-open-580"], []),
    ({"os_id": "rocky", "os_id_like": "rhel centos fedora", "os_version_id": "9.3"},
     ["repos/rhel9/x86_64/cuda-rhel9.repo", "sudo dnf module enable -y nvidia-driver:580-open",
      "sudo dnf install -y nvidia-open"], ["dnf module install", "nvidia-driver:580\n"]),
    ({"os_id": "rhel", "os_version_id": "10.0"}, ["sudo dnf install -y nvidia-open", "versionlock add '*nvidia*580*'"],
     ["dnf module"]),
    ({"os_id": "fedora", "os_version_id": "41"}, ["repos/fedora41/", "versionlock"], ["dnf module"]),
    ({"os_id": "sles", "os_id_like": "suse", "os_version_id": "15.5"},
     ["sudo zypper addrepo https://developer.download.nvidia.com/compute/cuda/repos/sles15/x86_64/cuda-sles15.repo",
      "sudo zypper install -y nvidia-open-580"], ["apt"]),
    ({"os_id": "arch", "os": "Arch Linux"}, ["sudo pacman -S --needed nvidia-open"], ["apt", "dnf"]),
    ({"os_id": "gentoo", "os": "Gentoo Linux"}, ["unsupported. Here is what to do by hand", "--kernel-module-type=open"],
     ["apt", "dnf"]),
])
def test_upgrade_driver_follows_nvidias_guide_for_the_distribution(host, wants, never):
    s = snap(**host)
    s["nvml"]["gpus"] = gpus("8.0", "8.0")
    pl = plan(UpgradeDriver(), s)
    text = texts(pl)
    for w in wants:
        assert w in text, (w, text)
    for n in never:
        assert n not in text, (n, text)
    assert "nvidia-fabricmanager" not in text  # no NVSwitch in these facts


def test_upgrade_driver_proposes_a_current_branch_not_the_oldest_that_works():
    s = snap(os_id="ubuntu", os_version_id="22.04")
    s["frameworks"]["torch"] = {"version": "2.5.1+cu121", "cuda": "12.1"}  # needs >= 525.60.13
    pl = plan(UpgradeDriver(), s)
    assert pl.meta["branch"] == "580" and "Needed: ≥ 525.60.13" in texts(pl) and "nvidia-open-525" not in texts(pl)
    newer = plan(UpgradeDriver(), s, min_version="590.44.01")
    # From 590 apt's packages carry no branch; the pinning package holds the branch.
    text = texts(newer)
    assert newer.meta["branch"] == "590" and "nvidia-open-590" not in text
    assert text.index("sudo apt-get install -y nvidia-driver-pinning-590") < text.index("sudo apt-get install -y nvidia-open\n")


def test_upgrade_driver_adds_the_same_branchs_fabric_manager_on_nvswitch_systems():
    s = snap(os_id="ubuntu", os_version_id="22.04")
    s["nvml"]["gpus"] = gpus("9.0")
    s["fabric_manager"] = {"available": True, "nvswitch_count": 4, "installed": False}
    text = texts(plan(UpgradeDriver(), s))
    assert "sudo apt-get install -y nvidia-fabricmanager-580" in text
    s["frameworks"]["torch"] = {"version": "2.10.0+cu131", "cuda": "13.1"}
    assert "sudo apt-get install -y nvidia-fabricmanager\n" in texts(plan(UpgradeDriver(), s, min_version="590.44.01"))
    assert "sudo systemctl enable --now nvidia-fabricmanager" in text and "4 NVSwitch" in text
    rocky = snap(os_id="rocky", os_version_id="9.3")
    rocky["fabric_manager"] = {"nvswitch_count": 2}
    assert "sudo dnf install -y nvidia-fabric-manager" in texts(plan(UpgradeDriver(), rocky))


def test_upgrade_driver_uses_proprietary_modules_for_pre_turing_gpus():
    s = snap(os_id="ubuntu", os_version_id="22.04")
    s["nvml"]["gpus"] = gpus("7.0", "8.0")  # a V100 beside an A100: the open modules cannot drive the V100
    text = texts(plan(UpgradeDriver(), s))
    assert "sudo apt-get install -y cuda-drivers-580" in text and "nvidia-open-580" not in text
    assert "proprietary kernel modules (a GPU here is older than Turing)" in text
    from troubleshoot.fixes.api import FixerError

    with pytest.raises(FixerError, match="last driver branch is 580"):
        plan(UpgradeDriver(), s, min_version="590")


# ----------------------------------------------------------------- framework pins

def test_match_framework_to_driver_shows_exact_pins_of_one_release(tmp_path):
    s = copy.deepcopy(BASE)
    s["nvml"]["cuda_driver_version"] = "12.4"
    s["frameworks"]["torch"] = {"version": "2.8.0+cu128", "cuda": "12.8"}
    f = tmp_path / "snap.json"
    f.write_text(json.dumps(s))
    p = run_main("fix", "match-framework-to-driver", "--snapshot", str(f))
    out = p.stdout.decode()
    assert p.returncode == 0, p.stderr
    # The newest release with a build this driver (CUDA <= 12.4) runs: 2.7.1 for CUDA 11.8.
    assert "pip install torch==2.7.1+cu118 torchvision==0.22.1+cu118 torchaudio==2.7.1+cu118 --index-url " \
           "https://download.pytorch.org/whl/cu118" in out
    assert "DOWNGRADE: torch 2.8.0 is installed" in out and "--upgrade" not in out


def test_the_release_table_is_newest_first_and_each_build_has_its_index():
    from troubleshoot.values import parse_version
    from troubleshoot_fixers.torch_releases import RELEASES

    versions = [parse_version(r.torch) for r in RELEASES]
    assert versions == sorted(versions, reverse=True) and len({r.series for r in RELEASES}) == len(RELEASES)
    for r in RELEASES:
        assert r.cuda and all(c.count(".") == 1 for c in r.cuda), r
        assert parse_version(r.python[0]) <= parse_version(r.python[1]), r
        # pytorch.org installs the releases before 2.0 with --extra-index-url, later ones with --index-url
        assert r.index_option == ("--index-url" if versions[RELEASES.index(r)] >= parse_version("2.0") else
                                  "--extra-index-url"), r
    assert {"1.12.1", "1.13.1", "2.0.1", "2.1.2", "2.2.2", "2.3.1"} <= {r.torch for r in RELEASES}


def test_a_python_without_wheels_of_a_release_skips_it(tmp_path):
    s = copy.deepcopy(BASE)
    s["nvml"].update(driver_version="470.82.01", cuda_driver_version="11.4")
    s["frameworks"].update(python_version="3.13.1", torch={"version": "2.1.2+cu121", "cuda": "12.1"})
    pl = plan(MatchFrameworkToDriver(), s)
    # 2.1 has no wheels for Python 3.13: the newest release with a CUDA 11 build that has them.
    assert "torch==2.7.1+cu118" in pl.actions[0].argv
