"""Fixers that change the system: kernel modules, the container runtime, RAM disks, limits."""

from __future__ import annotations

import re
import shutil
import sys

from troubleshoot_fixers import distro
from troubleshoot_fixers.facts import fact, is_plain, printable
from troubleshoot.fixes.api import Fixer, FixerError, Param
from troubleshoot.fixes.plan import (Advice, EnsureLine, LineMatch, MergeStructured, Plan, RunCommand, SetOption,
                                     Verify, WriteFile, ensure_lines)

SIZE = r"\d+[KMGkmg]?"
ABS_PATH = r"/[A-Za-z0-9._/+-]*"




def _family(snapshot) -> str | None:
    """debian, redhat, suse or arch (fixers/distro.py), None for anything else."""
    return distro.family(snapshot)


def _unsupported(what: str, by_hand: str, snapshot) -> Advice:
    return distro.unsupported(what, by_hand, snapshot)


def _refuse_zero(fixer: str, size: str) -> None:
    """tmpfs reads size=0 as no limit at all: such a RAM disk may take every page of memory."""
    if int(re.match(r"\d+", size).group(0)) == 0:
        raise FixerError(f"fixer {fixer!r}: size={size} means unlimited for tmpfs (it could fill all memory); "
                         f"give a real size such as 16G, or size=auto")


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


NOUVEAU_CONF = "/etc/modprobe.d/blacklist-nouveau.conf"
NOUVEAU_MODESET = LineMatch(r"^\s*options\s+nouveau\s+modeset=\S*\s*$")  # only a line that sets modeset alone


class BlacklistNouveau(Fixer):
    id = "blacklist-nouveau"
    title = "Blacklist the nouveau driver so the NVIDIA driver can own the GPU"
    needs_snapshot = True

    def plan(self, params, snapshot):
        family = _family(snapshot)
        initramfs = {"debian": ("update-initramfs", "-u"), "arch": ("mkinitcpio", "-P")}.get(family, ("dracut", "--force"))
        return Plan(self.id, self.title, params, (
            # Both lines in one write; an older modeset value is changed in place, every other
            # line of an existing file (options of other modules) is kept.
            ensure_lines(NOUVEAU_CONF, (("blacklist nouveau", None), ("options nouveau modeset=0", NOUVEAU_MODESET)),
                         why="stop nouveau from loading at boot", mode=0o644, needs_root=True),
            RunCommand(initramfs, why="rebuild the initramfs, which otherwise still loads nouveau early in boot",
                       needs_root=True, undo=initramfs),
            Advice("Reboot to unload nouveau (`sudo reboot`), then install or reload the NVIDIA driver; "
                   "check with `lsmod | grep -E 'nouveau|nvidia'` and `nvidia-smi`."),
        ), verify=Verify("nouveau is blacklisted", condition="kernel.nouveau_blacklisted == true", probes=("kernel",)),
            notes=("nouveau stays loaded until the reboot.",))


# NVIDIA's container repositories sign with one key, "NVIDIA CORPORATION (Open Source Projects)
# <cudatools@nvidia.com>", primary fingerprint C95B 321B 61E8 8C18 09C4 F759 DDCA E044 F796 ECB0,
# as `gpg --show-keys` prints for https://nvidia.github.io/libnvidia-container/gpgkey (quoted by
# NVIDIA's own tracker: github.com/NVIDIA/nvidia-container-toolkit/issues/1460). A rotated key
# makes the check refuse, loudly, until this constant is updated: never a silent install.
TOOLKIT_KEY_URL = "https://nvidia.github.io/libnvidia-container/gpgkey"
TOOLKIT_KEY_FPR = "C95B321B61E88C1809C4F759DDCAE044F796ECB0"
TOOLKIT_KEYRING = "/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg"
TOOLKIT_RPM_KEY = "/etc/pki/rpm-gpg/RPM-GPG-KEY-nvidia-container-toolkit"
TOOLKIT_APT_LIST = "/etc/apt/sources.list.d/nvidia-container-toolkit.list"
# NVIDIA's nvidia-container-toolkit.repo, with the key read from the verified local copy instead
# of fetched again (and trusted on first use) by dnf/zypper.
TOOLKIT_REPO = """[nvidia-container-toolkit]
name=nvidia-container-toolkit
baseurl=https://nvidia.github.io/libnvidia-container/stable/rpm/$basearch
repo_gpgcheck=1
gpgcheck=0
enabled=1
gpgkey=file://{key}
sslverify=1
"""


def _keycheck(out: str, dearmor: bool) -> RunCommand:
    argv = (sys.executable, "-m", "troubleshoot_fixers.keycheck", "--url", TOOLKIT_KEY_URL, "--fingerprint",
            TOOLKIT_KEY_FPR, "--out", out) + (("--dearmor",) if dearmor else ())
    return RunCommand(argv, needs_root=True, why=f"NVIDIA's repository key, fetched into a private temporary folder and "
                      f"installed only if its fingerprint is {TOOLKIT_KEY_FPR}")


# The files apt reads repository lines from, as the docker probe lists them.
APT_SOURCES = re.compile(r"/etc/apt/sources\.list|/etc/apt/sources\.list\.d/[A-Za-z0-9_.+-]+\.list")


def _toolkit_source_problem(src) -> str | None:
    """Why a docker.toolkit_apt_sources entry is not an NVIDIA repository line of an apt sources
    file (None when it is one). The fact comes from a snapshot: its path must be a sources file
    and its line one printable line naming NVIDIA's container repositories."""
    from troubleshoot.probes.docker import TOOLKIT_REPOS

    path, line = (src.get("path"), src.get("line")) if isinstance(src, dict) else (None, None)
    if not isinstance(path, str) or not isinstance(line, str):
        return "not a {path, line} entry"
    if not APT_SOURCES.fullmatch(path) or path == TOOLKIT_APT_LIST:
        return f"{path!r} is not an apt sources file"
    if not is_plain(line):
        return "its line holds a line break or a control character"
    if line.lstrip().startswith("#") or not TOOLKIT_REPOS.search(line):
        return "its line is not an active NVIDIA container repository line"
    return None


def _old_toolkit_sources(snapshot) -> list:
    """Old nvidia-docker / libnvidia-container apt lines make `apt-get update` fail ("Conflicting
    values set for option Signed-By"): each is commented out in place (backed up, undoable), and
    only when the file exists and has exactly that line: nothing is created or appended."""
    actions, ignored = [], []
    for src in fact(snapshot, "docker", "toolkit_apt_sources", default=[]) or []:
        problem = _toolkit_source_problem(src)
        if problem:
            ignored.append(problem)
            continue
        path, line = src["path"], src["line"]
        disabled = f"# disabled by troubleshoot (Signed-By conflict with {TOOLKIT_APT_LIST}): {line}"
        actions.append(EnsureLine(path, disabled, replaces=LineMatch(rf"^{re.escape(line)}$", append=False),
                                  needs_root=True, why=f"an older NVIDIA container repository entry in {path}"))
    if ignored:
        actions.append(Advice(f"Left alone: {len(ignored)} entr{'y' if len(ignored) == 1 else 'ies'} of the facts' "
                              f"docker.toolkit_apt_sources ({printable('; '.join(ignored))[:400]}).",
                              why="old NVIDIA apt lines"))
    return actions


def _toolkit_install(snapshot) -> list:
    d = distro.detect(snapshot)
    install = "nvidia-container-toolkit"
    if d.family == "debian":
        return [
            *_old_toolkit_sources(snapshot),
            _keycheck(TOOLKIT_KEYRING, dearmor=True),
            WriteFile(TOOLKIT_APT_LIST, f"deb [signed-by={TOOLKIT_KEYRING}] "
                      "https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH) /\n",
                      why="NVIDIA's apt repository (the official list)", mode=0o644, needs_root=True),
            RunCommand(("apt-get", "update"), why="read the new repository", needs_root=True),
            RunCommand(("apt-get", "install", "-y", install), why="install the toolkit", needs_root=True,
                       undo=("apt-get", "remove", "-y", install)),
        ]
    if d.family in ("redhat", "suse"):
        repo_dir, tool = ("/etc/yum.repos.d", "dnf") if d.family == "redhat" else ("/etc/zypp/repos.d", "zypper")
        cmd = ("dnf", "install", "-y", install) if tool == "dnf" else ("zypper", "--non-interactive", "install", install)
        return [
            _keycheck(TOOLKIT_RPM_KEY, dearmor=False),
            RunCommand(("rpm", "--import", TOOLKIT_RPM_KEY), why="trust the checked key for the repository's metadata",
                       needs_root=True),
            WriteFile(f"{repo_dir}/nvidia-container-toolkit.repo", TOOLKIT_REPO.format(key=TOOLKIT_RPM_KEY),
                      why=f"NVIDIA's {tool} repository, its key read from the checked copy", mode=0o644, needs_root=True),
            RunCommand(cmd, why="install the toolkit", needs_root=True,
                       undo=(tool, "remove", "-y", install) if tool == "dnf" else ("zypper", "remove", install)),
        ]
    if d.family == "arch":
        return [RunCommand(("pacman", "-S", "--needed", "--noconfirm", install), needs_root=True,
                           why="the toolkit from Arch's extra repository (signed by Arch)",
                           undo=("pacman", "-R", install))]
    return [_unsupported("install the NVIDIA Container Toolkit", "follow https://docs.nvidia.com/datacenter/cloud-native/"
                         "container-toolkit/latest/install-guide.html for your package manager, check the key's "
                         f"fingerprint ({TOOLKIT_KEY_FPR}) before trusting it, then run this fixer with install=false.",
                         snapshot)]


def restart_docker(snapshot, why: str) -> list:
    """`systemctl restart docker` stops every running container (unless live-restore is on):
    the plan says which, from the facts, or from `docker ps` now when this machine is the one
    being fixed and was not probed."""
    running = fact(snapshot, "docker", "containers_running") if snapshot else None
    if not snapshot:
        from troubleshoot.probes.base import ProbeContext
        from troubleshoot.probes.docker import running_containers

        running = running_containers(ProbeContext())
    live_restore = fact(snapshot, "docker", "daemon_json", "live-restore") is True
    if not isinstance(running, list):
        warn = ("could not list running containers (no Docker facts: the daemon was not reachable, or the snapshot "
                "has none): check `docker ps` first; every running container stops when Docker restarts")
    elif not running:
        warn = "no container is running: nothing stops"
    else:
        names = [printable(f"{c.get('name') or c.get('id')} ({c.get('image')})")[:120] for c in running
                 if isinstance(c, dict)]
        warn = (f"{len(names)} running container(s) {'keep running (live-restore is on)' if live_restore else 'STOP'} "
                f"when Docker restarts: {', '.join(names[:20])}{' ...' if len(names) > 20 else ''}")
    return [Advice(f"Warning: {warn}.", why="before restarting Docker"),
            RunCommand(("systemctl", "restart", "docker"), why=why, needs_root=True)]


class NvidiaContainerToolkit(Fixer):
    id = "nvidia-container-toolkit"
    title = "Install and configure the NVIDIA Container Toolkit for Docker"
    params = (Param("install", type=bool, default=True, help="install the toolkit packages (false: configure only)"),)
    needs_snapshot = True

    def plan(self, params, snapshot):
        actions = []
        # This machine's PATH only when it is the machine being fixed (no snapshot given).
        have_ctk = bool(fact(snapshot, "docker", "nvidia_ctk_version")) or (not snapshot and bool(shutil.which("nvidia-ctk")))
        if params["install"] and not have_ctk:
            actions += _toolkit_install(snapshot)
        elif distro.family(snapshot) == "debian":
            actions += _old_toolkit_sources(snapshot)
        actions += [
            # What `nvidia-ctk runtime configure --runtime=docker` writes, done here so that it is
            # previewed as a diff, backed up and undoable, and every other key of the file is kept.
            MergeStructured("/etc/docker/daemon.json",
                            {"runtimes": {"nvidia": {"args": [], "path": "nvidia-container-runtime"}}},
                            why="register the nvidia runtime with Docker (same as nvidia-ctk runtime configure)",
                            needs_root=True),
            *restart_docker(snapshot, "Docker reads daemon.json at start"),
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
        _refuse_zero(self.id, size)
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
                                      replaces=LineMatch(rf"^\S+\s+{re.escape(field)}\s+tmpfs(?:\s|$)"),
                                      needs_root=True, check="fstab"))
        if params["source"]:
            actions.append(RunCommand(("cp", "-a", "--", params["source"].rstrip("/") + "/.", path),
                                      why="stage the dataset into RAM"))
        actions.append(Advice(f"Point the DataLoader at `{path}`. A RAM disk's content is lost on reboot and counts "
                              f"against the machine's memory (and a container's memory limit)."))
        notes = () if ceiling else ("Memory unknown (no snapshot): check `free -g` and the container's limit before "
                                    "applying; a RAM disk larger than free memory leads to OOM kills.",)
        return Plan(self.id, self.title, {**params, "size": size, "path": path}, tuple(actions), notes=notes,
                    verify=Verify(f"{path} is a tmpfs mount", argv=("mountpoint", "-q", path)))


SHM_LINE = r"^\S+\s+/dev/shm/?(?:\s|$)"  # fstab's /dev/shm line (LineMatch skips the commented ones)


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
        known = isinstance(current, int) and not isinstance(current, bool) and current > 0
        ceiling = _memory_ceiling_mib(snapshot)
        if size == "auto":
            if not ceiling:
                raise FixerError("fixer 'raise-shm': size=auto needs the machine's memory (a snapshot or probe); "
                                 "give size=NNG")
            size = f"{max(1, ceiling // 2 // 1024)}G"
        _refuse_zero(self.id, size)
        if known and _mib(size) <= current:
            return Plan(self.id, self.title, {**params, "size": size}, (Advice(
                f"/dev/shm is already {current // 1024} GiB, not smaller than {size}: nothing to raise. If workers "
                f"still fail on shared memory, check `df -h /dev/shm` while the job runs and the container's "
                f"--shm-size."),))
        if fact(snapshot, "docker", "in_container"):
            return Plan(self.id, self.title, params, (Advice(
                f"/dev/shm of a container is set when it starts: restart it with `--shm-size={size}` (or `--ipc=host`); "
                f"in compose `shm_size: \"{size}\"`; in Kubernetes mount an `emptyDir` with `medium: Memory` at /dev/shm. "
                "If you cannot, use `torch.multiprocessing.set_sharing_strategy('file_system')` or fewer workers."),))
        if not known:
            raise FixerError(f"fixer 'raise-shm': the current size of /dev/shm is unknown (no io.shm_size_mib in the "
                             f"facts), so size={size} could shrink it; run it on the machine itself, or with a "
                             f"snapshot from `troubleshoot probe`")
        return self._resize(params, size, ceiling)

    def _resize(self, params, size: str, ceiling: int | None) -> Plan:
        notes = []
        if ceiling and _mib(size) > ceiling // 2:
            notes.append(f"{size} is more than half of the {ceiling // 1024} GiB of memory: tmpfs pages count as "
                         f"memory, so a full /dev/shm can lead to OOM kills.")
        actions = [RunCommand(("mount", "-o", f"remount,size={size}", "/dev/shm"), why=f"resize /dev/shm to {size} now",
                              needs_root=True)]
        if params["fstab"]:
            # Only the size option of the active line changes (nosuid, nodev, noexec... stay); a
            # larger size already there is kept; a full line is added only when there is none.
            rule = LineMatch(SHM_LINE, option=SetOption(3, "size", size, never_lower=True))
            actions.append(EnsureLine("/etc/fstab", f"tmpfs /dev/shm tmpfs defaults,nosuid,nodev,size={size} 0 0",
                                      why="keep the size after reboots", replaces=rule, needs_root=True,
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


def _limit(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _nofile_now(snapshot) -> tuple[int, int]:
    """(soft, hard) open-files limits of the machine being fixed: from its facts, or from this
    process when no snapshot was given (then this machine is the one being fixed)."""
    if snapshot:
        soft, hard = _limit(fact(snapshot, "io", "nofile_soft")), _limit(fact(snapshot, "io", "nofile_hard"))
    else:
        import resource

        soft, hard = (_limit(v) if v != resource.RLIM_INFINITY else None
                      for v in resource.getrlimit(resource.RLIMIT_NOFILE))
    if soft is None or hard is None:
        raise FixerError("fixer 'raise-nofile': the current open-files limits are unknown (no io.nofile_soft and "
                         "io.nofile_hard in the facts), so the new ones could lower them; run it on the machine "
                         "itself, or with a snapshot from `troubleshoot probe`")
    return soft, hard


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
        soft_now, hard_now = _nofile_now(snapshot)
        if soft_now > hard_now or hard_now > nr_open:
            raise FixerError(f"fixer 'raise-nofile': the facts' limits (soft {soft_now}, hard {hard_now}) do not fit "
                             f"the kernel's fs.nr_open ({nr_open}); probe the machine again")
        # Each limit only ever goes up: a hard limit of 1048576 stays when 65536 is asked.
        soft, hard = max(n, soft_now), max(n, hard_now)
        if (soft, hard) == (soft_now, hard_now):
            return Plan(self.id, self.title, params, (Advice(
                f"The open-files limits are already soft {soft_now}, hard {hard_now}: not lower than {n}, nothing to "
                f"raise. A job that still hits `Too many open files` runs with other limits: check `ulimit -n` in "
                f"its own shell, systemd's `LimitNOFILE=`, Docker's `--ulimit nofile=`."),))
        return Plan(self.id, self.title, params, (
            WriteFile(self.DROP_IN, _limits_conf(soft, hard), why="soft and hard limits for login sessions, root "
                      "included", mode=0o644, needs_root=True),
            Advice(f"Applies to new logins. Right now, in the job's shell: `ulimit -n {soft}` (up to the hard limit). "
                   f"systemd services: `LimitNOFILE={soft}:{hard}`; Docker: `--ulimit nofile={soft}:{hard}`; Slurm: "
                   f"set it on the nodes."),
        ), notes=("Check after logging in again: `ulimit -n` (or `troubleshoot probe`: io.nofile_soft).",
                  f"Capped by the kernel's fs.nr_open ({nr_open}); never lower than today's soft {soft_now} and "
                  f"hard {hard_now}."))


def _limits_conf(soft: int, hard: int) -> str:
    # limits.conf(5): a '*' entry does not apply to root, so root gets its own lines; a
    # drop-in under limits.d leaves the distribution's limits.conf untouched.
    return ("# Written by troubleshoot (fixer raise-nofile); remove this file to undo.\n"
            f"*       soft    nofile    {soft}\n"
            f"*       hard    nofile    {hard}\n"
            f"root    soft    nofile    {soft}\n"
            f"root    hard    nofile    {hard}\n")


FIXERS = [BlacklistNouveau(), NvidiaContainerToolkit(), RamDisk(), RaiseShm(), RaiseNofile()]
