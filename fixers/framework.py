"""Fixers that line up the framework build and the NVIDIA driver."""

from __future__ import annotations

import re
from dataclasses import dataclass

from troubleshoot.values import parse_version
from troubleshoot_fixers.facts import fact, version_fact
from troubleshoot.fixes.api import Fixer, FixerError, Param
from troubleshoot.fixes.plan import Advice, Plan, RunCommand, Verify
from troubleshoot_fixers.torch_releases import Release


# The interpreter named by the facts runs pip: it must be a python executable, by a plain path.
PYTHON = re.compile(r"(?:/[^/\x00-\x1f\x7f]+)*/python[0-9.]*|python[0-9.]*")


def _interpreter(snapshot) -> str:
    python = fact(snapshot, "frameworks", "python")
    if python is None or python == "":
        return "python3"
    text = python if isinstance(python, str) else ""
    if not PYTHON.fullmatch(text) or any(p in (".", "..") for p in text.split("/")) \
            or not all(c.isprintable() for c in text):
        raise FixerError(f"fixer 'match-framework-to-driver': the facts' interpreter frameworks.python = {python!r} "
                         f"is not the path of a python executable; run it on the machine itself, or fix the snapshot")
    return python


def driver_floor(cuda: str) -> str | None:
    """The oldest driver that runs CUDA `cuda` (NVIDIA's table, troubleshoot/data/cuda-drivers.yaml)."""
    from troubleshoot.cudadrivers import minimum_driver

    return minimum_driver(cuda)


@dataclass(frozen=True)
class TorchChoice:
    release: Release
    cuda: str  # the build's CUDA, MAJOR.MINOR
    how: str  # cudadrivers.NATIVE or cudadrivers.MINOR_COMPAT

    @property
    def tag(self) -> str:
        return "cu" + self.cuda.replace(".", "")


def _python_fits(release: Release, python: str | None) -> bool:
    minor = parse_version(".".join(python.split(".")[:2])) if python else None
    if minor is None:
        return True
    return parse_version(release.python[0]) <= minor <= parse_version(release.python[1])


def _build(release: Release, driver_cuda: str, driver: str | None, native_only: bool) -> TorchChoice | None:
    """The release's build for this driver: the newest the driver runs natively, else (unless
    `native_only`) the oldest that runs through minor-version compatibility: the nearest to what
    the driver knows, and the one that still carries kernels for the oldest GPUs."""
    from troubleshoot.cudadrivers import MINOR_COMPAT, NATIVE, runs_on

    how = {c: runs_on(c, driver_cuda, driver) for c in release.cuda}
    native = [c for c in release.cuda if how[c] == NATIVE]
    if native:
        return TorchChoice(release, max(native, key=parse_version), NATIVE)
    compat = [c for c in release.cuda if how[c] == MINOR_COMPAT]
    if compat and not native_only:
        return TorchChoice(release, min(compat, key=parse_version), MINOR_COMPAT)
    return None


def _through_compat(installed_cuda: str | None, driver_cuda: str, driver: str | None) -> bool:
    """The installed build runs on this driver only through minor-version compatibility."""
    from troubleshoot.cudadrivers import MINOR_COMPAT, runs_on

    return bool(installed_cuda) and runs_on(installed_cuda, driver_cuda, driver) == MINOR_COMPAT


def choose_torch(installed: str, installed_cuda: str | None, driver_cuda: str, driver: str | None,
                 python: str | None) -> TorchChoice | None:
    """The PyTorch build to install: the installed release's minor series first (its last patch
    release), else the newest release with wheels for this Python. A build the driver runs
    through minor-version compatibility counts, except when the installed build already runs
    that way: then only a build the driver supports natively is an answer."""
    from troubleshoot_fixers.torch_releases import RELEASES

    native_only = _through_compat(installed_cuda, driver_cuda, driver)
    releases = [r for r in RELEASES if _python_fits(r, python)]
    series = ".".join(installed.split(".")[:2]) if installed else None
    ordered = [r for r in releases if r.series == series] + [r for r in releases if r.series != series]
    return next((c for c in (_build(r, driver_cuda, driver, native_only) for r in ordered) if c), None)


def _minor_compat_note(choice: TorchChoice, driver: str | None, driver_cuda: str) -> str:
    major = choice.cuda.split(".")[0]
    return (f"torch {choice.release.torch}+{choice.tag} runs on this driver ({driver or 'version unknown'}, "
            f"CUDA {driver_cuda}) through CUDA minor-version compatibility: NVIDIA supports any CUDA {major}.x "
            f"build on a driver ≥ {driver_floor(choice.cuda)}. Its compiled kernels run as they are, but PTX JIT "
            f"compilation needs a driver of CUDA {choice.cuda} or newer: a GPU newer than the build's kernels, or an "
            f"extension or "
            f"library that ships only PTX, fails with \"the provided PTX was compiled with an unsupported toolchain\", "
            f"and CUDA features newer than the driver return cudaErrorCallRequiresNewerDriver. Upgrading the driver "
            f"(fixer upgrade-driver) lifts both limits.")


def _torch_install(python: str, driver_cuda: str, snapshot):
    """Exact torch, torchvision and torchaudio of one release, built for a CUDA the driver runs.

    Pins carry the build's local label (2.7.0+cu126): `torch==2.7.0` would count an installed
    2.7.0+cu128 as satisfied, and `pip install -U` never downgrades."""
    from troubleshoot.cudadrivers import MINOR_COMPAT

    installed = str(fact(snapshot, "frameworks", "torch", "version") or "").split("+")[0]
    installed = installed if parse_version(installed) is not None else ""
    installed_cuda = version_fact(snapshot, "frameworks", "torch", "cuda")
    driver = version_fact(snapshot, "nvml", "driver_version")
    py = version_fact(snapshot, "frameworks", "python_version")
    choice = choose_torch(installed, installed_cuda, driver_cuda, driver, py)
    if choice is None:
        for_py = f" with wheels for Python {'.'.join(py.split('.')[:2])}" if py else ""
        raise FixerError(f"the driver supports only CUDA {driver_cuda}: no PyTorch release in the table{for_py} runs "
                         f"on it; upgrade the driver (fixer upgrade-driver)")
    r, tag = choice.release, choice.tag
    argv = (python, "-m", "pip", "install", f"torch=={r.torch}+{tag}", f"torchvision=={r.torchvision}+{tag}",
            f"torchaudio=={r.torchaudio}+{tag}", r.index_option, f"https://download.pytorch.org/whl/{tag}")
    why = (f"PyTorch {r.torch} with its torchvision {r.torchvision} and torchaudio {r.torchaudio}, built for CUDA "
           f"{choice.cuda} (driver {driver or '?'} supports CUDA ≤ {driver_cuda}"
           + (", and runs CUDA " + choice.cuda.split(".")[0] + ".x builds through minor-version compatibility)"
              if choice.how == MINOR_COMPAT else ")"))
    notes = []
    via_compat = _through_compat(installed_cuda, driver_cuda, driver)
    iv = parse_version(installed) if installed else None
    if iv is not None and iv > parse_version(r.torch):
        which = "no build of it is for a CUDA this driver supports natively" if via_compat else \
            "no build of it runs on this driver"
        notes.append(f"This is a DOWNGRADE: torch {installed} is installed, and {which}. "
                     f"To keep {installed}, upgrade the driver instead (fixer upgrade-driver).")
    if choice.how == MINOR_COMPAT:
        notes.append(_minor_compat_note(choice, driver, driver_cuda))
    elif via_compat:
        notes.append(f"torch {installed or '?'} (CUDA {installed_cuda}) already runs on this driver through "
                     f"minor-version compatibility, only without PTX JIT compilation; this build is one the driver "
                     f"supports natively. Replace it only if that limit is what failed.")
    if r.index_option != "--index-url":
        notes.append(f"pytorch.org installs {r.torch} with {r.index_option}: the CUDA build from its index, "
                     f"the dependencies from PyPI.")
    notes.append("Pinned exactly, so pip replaces a newer or mismatched torch, torchvision and torchaudio together.")
    return argv, why, tuple(notes)


class MatchFrameworkToDriver(Fixer):
    id = "match-framework-to-driver"
    title = "Install a framework build that this driver supports"
    params = (Param("framework", default="torch", choices=("torch", "tensorflow", "jax")),)
    needs_snapshot = True

    def plan(self, params, snapshot):
        fw = params["framework"]
        driver_cuda = version_fact(snapshot, "nvml", "cuda_driver_version")
        python = _interpreter(snapshot)
        if not driver_cuda:
            return Plan(self.id, self.title, params, (Advice(
                "No driver facts: run `nvidia-smi` and read `CUDA Version` (the newest CUDA the driver supports), "
                "then pick the matching build: PyTorch `pip install torch --index-url "
                "https://download.pytorch.org/whl/cuXYZ` with XYZ at most that version (cu118, cu121, cu124, "
                "cu126, cu128, cu130); JAX `pip install -U \"jax[cuda12]\"` needs CUDA 12 (driver ≥ 525); "
                "TensorFlow ≥ 2.15 `pip install \"tensorflow[and-cuda]\"` needs CUDA 12."),))
        dv = parse_version(driver_cuda)
        if fw == "torch":
            argv, why, notes = _torch_install(python, driver_cuda, snapshot)
            verify = Verify("torch sees the GPU", condition="frameworks.torch.cuda_available == true",
                            probes=("frameworks",))
        elif fw == "jax":
            if dv < parse_version("12.0"):
                raise FixerError(f"current JAX needs CUDA 12 (driver ≥ 525); this driver supports CUDA {driver_cuda}")
            argv = (python, "-m", "pip", "install", "--upgrade", "jax[cuda12]")
            why, notes = f"JAX with CUDA 12 wheels (driver supports {driver_cuda})", ()
            verify = Verify("JAX uses the GPU", condition="frameworks.jax.cuda_available == true", probes=("frameworks",))
        else:
            if dv < parse_version("12.0"):
                raise FixerError(f"TensorFlow ≥ 2.15 needs CUDA 12; this driver supports CUDA {driver_cuda}: "
                                 f"pin tensorflow==2.14 with CUDA 11.8 libraries or upgrade the driver")
            argv = (python, "-m", "pip", "install", "--upgrade", "tensorflow[and-cuda]")
            why, notes = f"TensorFlow with its CUDA 12 libraries from pip (driver supports {driver_cuda})", ()
            verify = Verify("TensorFlow sees the GPU", condition="frameworks.tensorflow.cuda_available == true",
                            probes=("frameworks",))
        return Plan(self.id, f"Install {fw} built for a CUDA this driver supports", params,
                    (RunCommand(argv, why=why),), verify=verify, notes=notes)


def _compute_capabilities(snapshot) -> list[float]:
    out = []
    for g in fact(snapshot, "nvml", "gpus", default=[]) or []:
        cc = g.get("compute_capability") if isinstance(g, dict) else None
        try:
            out.append(float(cc))
        except (TypeError, ValueError):
            continue
    return out


class UpgradeDriver(Fixer):
    id = "upgrade-driver"
    title = "Install an NVIDIA driver new enough for the installed framework"
    params = (Param("min_version", pattern=r"\d+(?:\.\d+){0,2}", help="minimum driver version, e.g. 525.60.13"),)
    needs_snapshot = True

    def plan(self, params, snapshot):
        from troubleshoot_fixers import distro, driver_install as guide

        need = params["min_version"]
        cuda = version_fact(snapshot, "frameworks", "torch", "cuda") or \
            version_fact(snapshot, "frameworks", "tensorflow", "cuda")
        if not need and cuda:
            need = driver_floor(cuda)
        have = version_fact(snapshot, "nvml", "driver_version")
        # The current production branch, or the branch the minimum needs when that is newer:
        # never the oldest branch that would do (it leaves the machine at its end of life).
        branch = str(max(int(guide.PRODUCTION), int((need or "0").split(".")[0])))
        ccs = _compute_capabilities(snapshot)
        open_modules = not ccs or min(ccs) >= guide.OPEN_MIN_CC
        if not open_modules and int(branch) > int(guide.LAST_PROPRIETARY_ONLY_GPUS):
            raise FixerError(f"fixer 'upgrade-driver': driver ≥ {need} is needed, but a GPU here is older than Turing "
                             f"(compute capability {min(ccs)}), whose last driver branch is "
                             f"{guide.LAST_PROPRIETARY_ONLY_GPUS}: install a framework build for that branch's CUDA "
                             f"instead (fixer match-framework-to-driver)")
        d = distro.detect(snapshot)
        inst = guide.commands(d, branch, open_modules, fact(snapshot, "host", "arch"))
        switches = fact(snapshot, "fabric_manager", "nvswitch_count")
        nvswitch = isinstance(switches, int) and not isinstance(switches, bool) and switches > 0
        flavour = ("open kernel modules (nvidia-open, the default since 560)" if open_modules else
                   "proprietary kernel modules (a GPU here is older than Turing)")
        lines = [f"Installed driver: {have or 'unknown'}. "
                 + (f"Needed: ≥ {need}" + (f" (for CUDA {cuda})" if cuda else "") + ". " if need else "")
                 + f"Proposed: branch {branch}" + (" (the current production branch)" if branch == guide.PRODUCTION else "")
                 + f", {flavour}."]
        if inst is None:
            actions = [distro.unsupported("install the NVIDIA driver", guide.runfile(branch, open_modules), snapshot)]
        else:
            steps = list(inst.commands)
            if nvswitch:
                steps += inst.fabric_manager
            lines.append(f"On {d.name}, as NVIDIA's Driver Installation Guide ({guide.GUIDE}) does it:\n\n"
                         + "\n".join(f"    {c}" for c in steps) + "\n\nthen reboot (`sudo reboot`) and check "
                         "`nvidia-smi`.")
            if nvswitch:
                lines.append(f"This machine has {switches} NVSwitch(es): nvidia-fabricmanager of the same branch, at "
                             "exactly the driver's version, must run or CUDA reports `system not yet initialized`.")
            actions = [Advice("\n\n".join(lines))]
        if not ccs:
            actions.append(Advice("No GPU facts: open modules need a Turing or newer GPU (`nvidia-smi --query-gpu="
                                  "compute_cap --format=csv` ≥ 7.5); for Maxwell, Pascal or Volta use the proprietary "
                                  "flavour (cuda-drivers) of branch 580 at most."))
        if fact(snapshot, "docker", "in_container"):
            actions.append(Advice("This is a container: upgrade the host's driver; the container uses the host's."))
        actions.append(Advice("If the driver cannot change (shared cluster), install a framework build for the CUDA "
                              "it supports instead (fixer match-framework-to-driver)."))
        return Plan(self.id, self.title, params, tuple(actions), meta={"branch": branch, "open_modules": open_modules},
                    notes=("A driver change needs a reboot (or unloading every nvidia module).",
                           "Shown, not run: a driver install needs a reboot and, on shared machines, the admin."))


FIXERS = [MatchFrameworkToDriver(), UpgradeDriver()]
