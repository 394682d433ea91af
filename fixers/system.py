"""Fixers that change the system: kernel modules, the container runtime, RAM disks, limits."""

from __future__ import annotations

import re
import shutil

from troubleshoot_fixers.facts import fact
from troubleshoot.fixes.api import Fixer, FixerError, Param
from troubleshoot.fixes.plan import Advice, EnsureLine, MergeStructured, Plan, RunCommand, Verify, WriteFile

SIZE = r"\d+[KMGkmg]?"
ABS_PATH = r"/[A-Za-z0-9._/+-]*"




_FAMILIES = (("debian", ("ubuntu", "debian", "mint", "pop")), ("redhat", ("rhel", "red hat", "rocky", "alma", "centos",
             "fedora", "amazon", "oracle", "ol")), ("suse", ("suse", "sles", "opensuse")), ("arch", ("arch", "manjaro")))


def _family(snapshot) -> str | None:
    """debian, redhat, suse or arch: from the snapshot's OS (the machine being fixed), else this
    machine's /etc/os-release (ID and ID_LIKE); None when it is none of these."""
    words = str(fact(snapshot, "host", "os") or "").lower()
    if not words and not snapshot:
        try:
            with open("/etc/os-release", encoding="utf-8", errors="replace") as f:
                text = f.read(1 << 16)
        except OSError:
            text = ""
        ids = re.findall(r'^(?:ID|ID_LIKE)="?([^"\n]*)"?', text, re.M)
        words = " ".join(ids).lower()
    tokens = set(re.split(r"[^a-z0-9]+", words)) | {words}
    for family, names in _FAMILIES:
        if any(n in tokens or (" " in n and n in words) for n in names):
            return family
    return None


def _unsupported(what: str, by_hand: str, snapshot) -> Advice:
    os_name = fact(snapshot, "host", "os") or "this distribution"
    return Advice(f"{os_name} is not one troubleshoot knows how to {what} on (Debian/Ubuntu, RHEL/Rocky/Alma/Fedora, "
                  f"SUSE, Arch). By hand: {by_hand}")


def _mib(size: str) -> int:
    n = int(re.match(r"\d+", size).group(0))
    unit = size[-1].upper() if size[-1].isalpha() else ""
    return {"K": n // 1024, "M": n, "G": n * 1024, "": n // (1 << 20)}[unit]


def _memory_ceiling_mib(snapshot) -> int | None:
    """The memory a RAM-backed filesystem may take: the machine's, or its cgroup's when lower."""
    values = [v for v in (fact(snapshot, "io", "mem_total_mib"), fact(snapshot, "io", "cgroup_memory_limit_mib"))
              if isinstance(v, int) and v > 0]
    return min(values) if values else None


SYSTEM_DIRS = {"etc", "usr", "bin", "sbin", "lib", "lib32", "lib64", "boot", "dev", "proc", "sys", "run", "root",
               "var", "snap", "opt"}


def _mount_point(fixer: str, path: str) -> str:
    from troubleshoot.safeio import UnsafePath, components

    try:
        parts = components(path)
    except UnsafePath as exc:
        raise FixerError(f"fixer {fixer!r}: {exc}") from None
    if not parts or parts[0] in SYSTEM_DIRS:
        raise FixerError(f"fixer {fixer!r}: {path} is not a sane mount point for a RAM disk (use e.g. /mnt/ramdisk)")
    return "/" + "/".join(parts)


def _fstab_escape(field: str) -> str:
    """fstab(5): spaces and tabs in a field are written as octal escapes."""
    return "".join(f"\\{ord(c):03o}" if c in " \t\n\\#" else c for c in field)


class BlacklistNouveau(Fixer):
    id = "blacklist-nouveau"
    title = "Blacklist the nouveau driver so the NVIDIA driver can own the GPU"
    needs_snapshot = True

    def plan(self, params, snapshot):
        family = _family(snapshot)
        initramfs = {"debian": ("update-initramfs", "-u"), "arch": ("mkinitcpio", "-P")}.get(family, ("dracut", "--force"))
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
        ceiling = _memory_ceiling_mib(snapshot)
        size = params["size"]
        if size == "auto":
            free = fact(snapshot, "io", "mem_available_mib")
            limits = [v for v in (free, ceiling) if isinstance(v, int) and v > 0]
            if not limits:
                raise FixerError("fixer 'ramdisk': size=auto needs the machine's memory (a snapshot or probe); "
                                 "give size=NNG")
            size = f"{max(1, min(limits) // 2 // 1024)}G"
        if ceiling and _mib(size) > ceiling // 2:
            raise FixerError(f"fixer 'ramdisk': {size} is more than half of the {ceiling // 1024} GiB this machine "
                             f"(or its cgroup) has; a full RAM disk would push the job into the OOM killer. "
                             f"Use size=auto or at most {max(1, ceiling // 2 // 1024)}G")
        path = _mount_point(self.id, params["path"])
        actions = [
            RunCommand(("mkdir", "-p", path), why="mount point", needs_root=True),
            RunCommand(("mount", "-t", "tmpfs", "-o", f"size={size},mode=1777", "tmpfs", path),
                       why=f"a {size} RAM disk (memory is used only as files are written)", needs_root=True,
                       undo=("umount", path)),
        ]
        if params["fstab"]:
            field = _fstab_escape(path)
            actions.append(EnsureLine("/etc/fstab", f"tmpfs {field} tmpfs size={size},mode=1777 0 0",
                                      why="mount it at every boot (its content is still lost on reboot)",
                                      replaces=rf"^\S+\s+{re.escape(field)}\s+tmpfs\s", needs_root=True,
                                      check="fstab"))
        if params["source"]:
            actions.append(RunCommand(("cp", "-a", "--", params["source"].rstrip("/") + "/.", path),
                                      why="stage the dataset into RAM"))
        actions.append(Advice(f"Point the DataLoader at `{path}`. A RAM disk's content is lost on reboot and counts "
                              f"against the machine's memory (and a container's memory limit)."))
        notes = () if ceiling else ("Memory unknown (no snapshot): check `free -g` and the container's limit before "
                                    f"applying; a RAM disk larger than free memory leads to OOM kills.",)
        return Plan(self.id, self.title, {**params, "size": size, "path": path}, tuple(actions), notes=notes,
                    verify=Verify(f"{path} is a tmpfs mount", argv=("mountpoint", "-q", path)))


class RaiseShm(Fixer):
    id = "raise-shm"
    title = "Give /dev/shm enough room for DataLoader workers and NCCL"
    params = (Param("size", default="auto", pattern=SIZE + "|auto",
                    help="new /dev/shm size, e.g. 16G, or auto (half the memory, never less than today)"),
              Param("fstab", type=bool, default=False, help="keep the size across reboots via /etc/fstab"))
    needs_snapshot = True

    def plan(self, params, snapshot):
        size = params["size"]
        current = fact(snapshot, "io", "shm_size_mib")
        ceiling = _memory_ceiling_mib(snapshot)
        if size == "auto":
            if not ceiling:
                raise FixerError("fixer 'raise-shm': size=auto needs the machine's memory (a snapshot or probe); "
                                 "give size=NNG")
            size = f"{max(1, ceiling // 2 // 1024)}G"
        if isinstance(current, int) and _mib(size) <= current:
            return Plan(self.id, self.title, {**params, "size": size}, (Advice(
                f"/dev/shm is already {current // 1024} GiB, not smaller than {size}: nothing to raise. If workers "
                f"still fail on shared memory, check `df -h /dev/shm` while the job runs and the container's "
                f"--shm-size."),))
        if fact(snapshot, "docker", "in_container"):
            return Plan(self.id, self.title, params, (Advice(
                f"/dev/shm of a container is set when it starts: restart it with `--shm-size={size}` (or `--ipc=host`); "
                f"in compose `shm_size: \"{size}\"`; in Kubernetes mount an `emptyDir` with `medium: Memory` at /dev/shm. "
                "If you cannot, use `torch.multiprocessing.set_sharing_strategy('file_system')` or fewer workers."),))
        notes = []
        if ceiling and _mib(size) > ceiling // 2:
            notes.append(f"{size} is more than half of the {ceiling // 1024} GiB of memory: tmpfs pages count as "
                         f"memory, so a full /dev/shm can lead to OOM kills.")
        actions = [RunCommand(("mount", "-o", f"remount,size={size}", "/dev/shm"), why=f"resize /dev/shm to {size} now",
                              needs_root=True)]
        if params["fstab"]:
            actions.append(EnsureLine("/etc/fstab", f"tmpfs /dev/shm tmpfs defaults,size={size} 0 0",
                                      why="keep the size after reboots", replaces=r"^\S+\s+/dev/shm\s", needs_root=True,
                                      check="fstab"))
        return Plan(self.id, self.title, {**params, "size": size}, tuple(actions), notes=tuple(notes),
                    verify=Verify("/dev/shm is at least 1 GiB", condition="io.shm_size_mib >= 1024", probes=("io",)))


DEFAULT_NR_OPEN = 1 << 20  # the kernel's default fs.nr_open


def _nr_open(snapshot) -> int:
    """The kernel's per-process ceiling on open files: a nofile limit above it makes PAM fail
    at login (`pam_open_session: Permission denied`), so every limit is capped by it."""
    value = fact(snapshot, "io", "nr_open")
    if isinstance(value, int) and value > 0:
        return value
    if not snapshot:
        try:
            with open("/proc/sys/fs/nr_open", encoding="ascii") as f:
                return int(f.read(32).strip())
        except (OSError, ValueError):
            pass
    return DEFAULT_NR_OPEN


class RaiseNofile(Fixer):
    id = "raise-nofile"
    title = "Raise the open-files limit"
    params = (Param("limit", type=int, default=65536, help="new soft and hard limit (at most fs.nr_open)"),)
    DROP_IN = "/etc/security/limits.d/90-troubleshoot-nofile.conf"

    def plan(self, params, snapshot):
        n = params["limit"]
        nr_open = _nr_open(snapshot)
        if n < 1024:
            raise FixerError(f"fixer 'raise-nofile': limit {n} is below 1024; that would lower the usual default")
        if n > nr_open:
            raise FixerError(f"fixer 'raise-nofile': limit {n} is above the kernel's fs.nr_open ({nr_open}); PAM "
                             f"would refuse every new login (`pam_open_session: Permission denied`). Use at most "
                             f"{nr_open}, or raise fs.nr_open first (sysctl).")
        # limits.conf(5): a '*' entry does not apply to root, so root gets its own lines; a
        # drop-in under limits.d leaves the distribution's limits.conf untouched.
        content = ("# Written by troubleshoot (fixer raise-nofile); remove this file to undo.\n"
                   f"*       soft    nofile    {n}\n"
                   f"*       hard    nofile    {n}\n"
                   f"root    soft    nofile    {n}\n"
                   f"root    hard    nofile    {n}\n")
        return Plan(self.id, self.title, params, (
            WriteFile(self.DROP_IN, content, why="soft and hard limits for login sessions, root included",
                      mode=0o644, needs_root=True),
            Advice(f"Applies to new logins. Right now, in the job's shell: `ulimit -n {n}` (up to the hard limit). "
                   f"systemd services: `LimitNOFILE={n}`; Docker: `--ulimit nofile={n}:{n}`; Slurm: set it on the nodes."),
        ), notes=("Check after logging in again: `ulimit -n` (or `troubleshoot probe`: io.nofile_soft).",
                  f"Capped by the kernel's fs.nr_open ({nr_open})."))


FIXERS = [BlacklistNouveau(), NvidiaContainerToolkit(), RamDisk(), RaiseShm(), RaiseNofile()]
