"""Fixers that change the system: kernel modules, the container runtime, RAM disks, limits."""

from __future__ import annotations

import shutil

from troubleshoot_fixers.facts import fact
from troubleshoot.fixes.api import Fixer, FixerError, Param
from troubleshoot.fixes.plan import Advice, EnsureLine, MergeStructured, Plan, RunCommand, Verify, WriteFile

SIZE = r"\d+[KMGkmg]?"
ABS_PATH = r"/[A-Za-z0-9._/+-]*"




def _family(snapshot) -> str:
    """'debian' or 'redhat', from the snapshot's OS or the tools on this machine."""
    os_name = (fact(snapshot, "host", "os") or "").lower()
    if any(w in os_name for w in ("ubuntu", "debian", "mint", "pop!_os")):
        return "debian"
    if any(w in os_name for w in ("red hat", "rhel", "rocky", "alma", "centos", "fedora", "amazon", "oracle")):
        return "redhat"
    return "redhat" if shutil.which("dnf") and not shutil.which("apt-get") else "debian"


class BlacklistNouveau(Fixer):
    id = "blacklist-nouveau"
    title = "Blacklist the nouveau driver so the NVIDIA driver can own the GPU"
    needs_snapshot = True

    def plan(self, params, snapshot):
        initramfs = (("update-initramfs", "-u") if _family(snapshot) == "debian" else ("dracut", "--force"))
        return Plan(self.id, self.title, params, (
            WriteFile("/etc/modprobe.d/blacklist-nouveau.conf", "blacklist nouveau\noptions nouveau modeset=0\n",
                      why="stop nouveau from loading at boot", mode=0o644, needs_root=True),
            RunCommand(initramfs, why="rebuild the initramfs, which otherwise still loads nouveau early in boot",
                       needs_root=True, undo=initramfs),
            Advice("Reboot to unload nouveau (`sudo reboot`), then install or reload the NVIDIA driver; "
                   "check with `lsmod | grep -E 'nouveau|nvidia'` and `nvidia-smi`."),
        ), verify=Verify("nouveau is blacklisted", condition="kernel.nouveau_blacklisted == true", probes=("kernel",)),
            notes=("nouveau stays loaded until the reboot.",))


class NvidiaContainerToolkit(Fixer):
    id = "nvidia-container-toolkit"
    title = "Install and configure the NVIDIA Container Toolkit for Docker"
    params = (Param("install", type=bool, default=True, help="install the toolkit packages (false: configure only)"),)
    needs_snapshot = True

    def plan(self, params, snapshot):
        actions = []
        have_ctk = bool(fact(snapshot, "docker", "nvidia_ctk_version")) or bool(shutil.which("nvidia-ctk"))
        if params["install"] and not have_ctk:
            if _family(snapshot) == "debian":
                key = "/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg"
                actions += [
                    RunCommand(("curl", "-fsSL", "-o", "/tmp/nvidia-container-toolkit.gpgkey",
                                "https://nvidia.github.io/libnvidia-container/gpgkey"), why="NVIDIA's repository key"),
                    RunCommand(("gpg", "--batch", "--yes", "--dearmor", "-o", key, "/tmp/nvidia-container-toolkit.gpgkey"),
                               why="install the key for apt", needs_root=True),
                    WriteFile("/etc/apt/sources.list.d/nvidia-container-toolkit.list",
                              f"deb [signed-by={key}] https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH) /\n",
                              why="NVIDIA's apt repository (the official list)", mode=0o644, needs_root=True),
                    RunCommand(("apt-get", "update"), why="read the new repository", needs_root=True),
                    RunCommand(("apt-get", "install", "-y", "nvidia-container-toolkit"), why="install the toolkit",
                               needs_root=True, undo=("apt-get", "remove", "-y", "nvidia-container-toolkit")),
                ]
            else:
                actions += [
                    RunCommand(("curl", "-fsSL", "-o", "/etc/yum.repos.d/nvidia-container-toolkit.repo",
                                "https://nvidia.github.io/libnvidia-container/stable/rpm/nvidia-container-toolkit.repo"),
                               why="NVIDIA's dnf repository", needs_root=True),
                    RunCommand(("dnf", "install", "-y", "nvidia-container-toolkit"), why="install the toolkit",
                               needs_root=True, undo=("dnf", "remove", "-y", "nvidia-container-toolkit")),
                ]
        actions += [
            # What `nvidia-ctk runtime configure --runtime=docker` writes, done here so that it is
            # previewed as a diff, backed up and undoable, and every other key of the file is kept.
            MergeStructured("/etc/docker/daemon.json",
                            {"runtimes": {"nvidia": {"args": [], "path": "nvidia-container-runtime"}}},
                            why="register the nvidia runtime with Docker (same as nvidia-ctk runtime configure)",
                            needs_root=True),
            RunCommand(("systemctl", "restart", "docker"), why="Docker reads daemon.json at start", needs_root=True),
            Advice("Test: `docker run --rm --gpus all ubuntu nvidia-smi`. Rootless Docker: "
                   "`nvidia-ctk runtime configure --runtime=docker --config=$HOME/.config/docker/daemon.json` and "
                   "`systemctl --user restart docker`."),
        ]
        return Plan(self.id, self.title, params, tuple(actions),
                    verify=Verify("Docker lists the nvidia runtime", condition="docker.nvidia_runtime == true or "
                                  "docker.daemon_json_nvidia_runtime == true", probes=("docker",)))


class RamDisk(Fixer):
    id = "ramdisk"
    title = "Put the dataset on a RAM disk (tmpfs)"
    params = (
        Param("size", default="auto", pattern=SIZE + "|auto", help="tmpfs size, e.g. 64G, or auto (half the free RAM)"),
        Param("path", default="/mnt/ramdisk", pattern=ABS_PATH, help="mount point"),
        Param("source", pattern=ABS_PATH, help="dataset folder to copy into the RAM disk"),
        Param("fstab", type=bool, default=False, help="also add an /etc/fstab line so it survives reboots"),
    )
    needs_snapshot = True

    def plan(self, params, snapshot):
        size = params["size"]
        if size == "auto":
            free = fact(snapshot, "io", "mem_available_mib")
            if not free:
                raise FixerError("fixer 'ramdisk': size=auto needs the machine's free memory; give size=NNG")
            size = f"{max(1, free // 2 // 1024)}G"
        path = params["path"]
        actions = [
            RunCommand(("mkdir", "-p", path), why="mount point", needs_root=True),
            RunCommand(("mount", "-t", "tmpfs", "-o", f"size={size},mode=1777", "tmpfs", path),
                       why=f"a {size} RAM disk (memory is used only as files are written)", needs_root=True,
                       undo=("umount", path)),
        ]
        if params["fstab"]:
            actions.append(EnsureLine("/etc/fstab", f"tmpfs {path} tmpfs size={size},mode=1777 0 0",
                                      why="mount it at every boot (its content is still lost on reboot)",
                                      replaces=rf"^\S+\s+{path}\s+tmpfs\s", needs_root=True))
        if params["source"]:
            actions.append(RunCommand(("cp", "-a", "--", params["source"].rstrip("/") + "/.", path),
                                      why="stage the dataset into RAM"))
        actions.append(Advice(f"Point the DataLoader at `{path}`. A RAM disk's content is lost on reboot and counts "
                              f"against the machine's memory (and a container's memory limit)."))
        return Plan(self.id, self.title, {**params, "size": size}, tuple(actions),
                    verify=Verify(f"{path} is a tmpfs mount", argv=("mountpoint", "-q", path)))


class RaiseShm(Fixer):
    id = "raise-shm"
    title = "Give /dev/shm enough room for DataLoader workers and NCCL"
    params = (Param("size", default="16G", pattern=SIZE, help="new /dev/shm size, e.g. 16G"),
              Param("fstab", type=bool, default=False, help="keep the size across reboots via /etc/fstab"))
    needs_snapshot = True

    def plan(self, params, snapshot):
        size = params["size"]
        if fact(snapshot, "docker", "in_container"):
            return Plan(self.id, self.title, params, (Advice(
                f"/dev/shm of a container is set when it starts: restart it with `--shm-size={size}` (or `--ipc=host`); "
                f"in compose `shm_size: \"{size}\"`; in Kubernetes mount an `emptyDir` with `medium: Memory` at /dev/shm. "
                "If you cannot, use `torch.multiprocessing.set_sharing_strategy('file_system')` or fewer workers."),))
        actions = [RunCommand(("mount", "-o", f"remount,size={size}", "/dev/shm"), why=f"resize /dev/shm to {size} now",
                              needs_root=True)]
        if params["fstab"]:
            actions.append(EnsureLine("/etc/fstab", f"tmpfs /dev/shm tmpfs defaults,size={size} 0 0",
                                      why="keep the size after reboots", replaces=r"^\S+\s+/dev/shm\s", needs_root=True))
        return Plan(self.id, self.title, params, tuple(actions),
                    verify=Verify("/dev/shm is at least 1 GiB", condition="io.shm_size_mib >= 1024", probes=("io",)))


class RaiseNofile(Fixer):
    id = "raise-nofile"
    title = "Raise the open-files limit"
    params = (Param("limit", type=int, default=65536, help="new soft and hard limit"),)

    def plan(self, params, snapshot):
        n = params["limit"]
        if not 1024 <= n <= 1 << 24:
            raise FixerError(f"fixer 'raise-nofile': limit {n} is outside 1024..16777216")
        return Plan(self.id, self.title, params, (
            EnsureLine("/etc/security/limits.conf", f"*    soft    nofile    {n}", why="soft limit for login sessions",
                       replaces=r"^\*\s+soft\s+nofile\s", needs_root=True),
            EnsureLine("/etc/security/limits.conf", f"*    hard    nofile    {n}", why="hard limit for login sessions",
                       replaces=r"^\*\s+hard\s+nofile\s", needs_root=True),
            Advice(f"Applies to new logins. Right now, in the job's shell: `ulimit -n {n}` (up to the hard limit). "
                   f"systemd services: `LimitNOFILE={n}`; Docker: `--ulimit nofile={n}:{n}`; Slurm: set it on the nodes."),
        ), notes=("Check after logging in again: `ulimit -n` (or `troubleshoot probe`: io.nofile_soft).",))


FIXERS = [BlacklistNouveau(), NvidiaContainerToolkit(), RamDisk(), RaiseShm(), RaiseNofile()]
