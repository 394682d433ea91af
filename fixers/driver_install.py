"""How NVIDIA's Driver Installation Guide installs a driver branch, per distribution, as data.

Source: https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/ ("Kernel Modules",
table "Open GPU kernel module installation", and the per-distribution network repository
pages). Since the 560 branch the open kernel modules (`nvidia-open`) are the default and
suggested flavour; they need a Turing or newer GPU (compute capability 7.5+); Maxwell, Pascal
and Volta need the proprietary flavour, whose last branch is 580. Arch is not in NVIDIA's guide:
its own packages (`nvidia-open`, signed by Arch) are used.
"""

from __future__ import annotations

from dataclasses import dataclass

PRODUCTION = "580"  # the current production (long-term support) branch
LAST_PROPRIETARY_ONLY_GPUS = "580"  # Maxwell/Pascal/Volta: no branch after this one
OPEN_MIN_CC = 7.5  # Turing
GUIDE = "https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/"
# Debian/Ubuntu: "Starting with branch 590, the Ubuntu packages have been renamed by removing
# the branch designation from the package name. Switching branches, installing specific driver
# versions, and upgrade or downgrade requirements will be supported through version locking
# (pinning) packages" (the guide's "Ubuntu 590 and later packages"); `nvidia-driver-pinning-580`
# exists too, and the guide suggests "installing the pinning package prior to installing the
# driver". Checked against public install scripts for 580, 590, 595 and 610 (2026-12).
APT_PINNING_FROM = 580
UNVERSIONED_APT_FROM = 590
REPO = "https://developer.download.nvidia.com/compute/cuda/repos"


@dataclass(frozen=True)
class Install:
    commands: tuple[str, ...]  # exactly as the user types them
    fabric_manager: tuple[str, ...]  # the same branch's Fabric Manager, for NVSwitch systems


def repo_arch(machine: str | None) -> str:
    return "sbsa" if machine in ("aarch64", "arm64") else "x86_64"


def commands(distro, branch: str, open_modules: bool, machine: str | None) -> Install | None:
    """The guide's commands for `distro` (fixers/distro.Distro); None where it has none."""
    arch, major, os_id = repo_arch(machine), distro.major, distro.id or ""
    fm_enable = "sudo systemctl enable --now nvidia-fabricmanager"
    if major is None and distro.family != "arch":  # NVIDIA's repository URLs name the release
        return None
    if distro.family == "debian":
        slug = f"ubuntu{(distro.version or '').replace('.', '')}" if os_id == "ubuntu" else f"debian{major}"
        # From 590 the packages lost the branch from their names and a pinning package holds
        # the branch; 580 has both (the pinning package first, as the guide suggests).
        renamed = int(branch) >= UNVERSIONED_APT_FROM
        suffix = "" if renamed else f"-{branch}"
        pkg = ("nvidia-open" if open_modules else "cuda-drivers") + suffix
        pin = (f"sudo apt-get install -y nvidia-driver-pinning-{branch}",) if int(branch) >= APT_PINNING_FROM else ()
        return Install((f"wget {REPO}/{slug}/{arch}/cuda-keyring_1.1-1_all.deb",
                        "sudo dpkg -i cuda-keyring_1.1-1_all.deb",
                        "sudo apt-get update") + pin + (f"sudo apt-get install -y {pkg}",),
                       (f"sudo apt-get install -y nvidia-fabricmanager{suffix}", fm_enable))
    if distro.family == "redhat":
        if os_id == "fedora":
            slug, lock = f"fedora{major}", True
        elif os_id in ("amzn", "amazon"):
            slug, lock = f"amzn{major}", False
        else:
            slug, lock = f"rhel{major}", (major or 0) >= 10
        first = (f"sudo dnf config-manager --add-repo {REPO}/{slug}/{arch}/cuda-{slug}.repo",)
        if lock:  # RHEL 10, Fedora: no module streams; a version lock keeps the branch
            pick = (f"sudo dnf install -y {'nvidia-open' if open_modules else 'cuda-drivers'}",
                    f"sudo dnf versionlock add '*nvidia*{branch}*'")
        else:  # RHEL/Rocky/Alma/Oracle 8 and 9: the branch is a module stream
            stream = f"{branch}-open" if open_modules else f"{branch}-dkms"
            pick = (f"sudo dnf module enable -y nvidia-driver:{stream}",
                    f"sudo dnf install -y {'nvidia-open' if open_modules else 'cuda-drivers'}")
        return Install(first + pick, ("sudo dnf install -y nvidia-fabric-manager", fm_enable))
    if distro.family == "suse":
        slug = f"sles{major}" if os_id.startswith("sle") else f"opensuse{major}"
        pkg = f"nvidia-open-{branch}" if open_modules else f"cuda-drivers-{branch}"
        return Install((f"sudo zypper addrepo {REPO}/{slug}/{arch}/cuda-{slug}.repo",
                        "sudo zypper refresh",
                        f"sudo zypper install -y {pkg}"),
                       ("sudo zypper install -y nvidia-fabric-manager", fm_enable))
    if distro.family == "arch":
        pkg = "nvidia-open" if open_modules else f"nvidia-{LAST_PROPRIETARY_ONLY_GPUS}xx-dkms (AUR)"
        return Install((f"sudo pacman -S --needed {pkg}",) if open_modules else
                       (f"install {pkg}: Arch's own nvidia packages are open-module only",),
                       ("install nvidia-fabricmanager at the driver's exact version (AUR), then: " + fm_enable,))
    return None


def runfile(branch: str, open_modules: bool) -> str:
    flavour = "open" if open_modules else "proprietary"
    return (f"download the {branch} branch's .run installer from https://www.nvidia.com/en-us/drivers/ and run "
            f"`sudo sh NVIDIA-Linux-*.run --kernel-module-type={flavour}` (it does not follow kernel updates: "
            f"rerun it after each); see {GUIDE}")
