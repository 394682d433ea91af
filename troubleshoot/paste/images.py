"""The container image a job runs in, as the pasted command, script or manifest names it, and the
CUDA inside that image: facts under `container.*`, read before the job itself says anything.

An image counts only where something runs, pulls or builds from it:

- `docker run`/`create`/`pull` (also `podman`, `nerdctl`, `nvidia-docker`, `docker container run`,
  `docker image pull`), the image being the first argument after the options;
- Slurm's pyxis `--container-image=nvcr.io#nvidia/pytorch:24.01-py3`, `--image=` (`kubectl run`,
  Shifter), `docker://...` given to `singularity`/`apptainer`/`enroot`;
- a Compose or Kubernetes `image:` line, a Dockerfile's `FROM` (also as `docker build` prints it).

An image word anywhere else (prose, a traceback) is not one. The image's CUDA comes from its tag
where the tag names it (`-cuda12.1-`, `-cu121`, `nvidia/cuda:12.4.1-...`), else from the tables of
troubleshoot/data/container-images.yaml (NGC releases, TensorFlow's tested builds); an image none
of them knows is reported without a CUDA.
"""

from __future__ import annotations

import functools
import re
import shlex
from dataclasses import dataclass

from troubleshoot.paste.dumps import Found

# ------------------------------------------------------------------------ where a line names an image

# The container CLIs' verbs that run or fetch an image; a single space, as the needles require.
_CLI = re.compile(r"(?:^|[\s;&|(`])(?:\S*/)?(?:nvidia-)?(?:docker|podman|nerdctl) "
                  r"(?:container |image (?=pull))?(?P<verb>run|create|pull)(?=\s|$)")
# Pyxis (`srun`/`sbatch --container-image`), `kubectl run --image=`, Shifter's `--image=docker:...`.
_IMAGE_OPTION = re.compile(r"(?:^|\s)--(?:container-)?image(?:=|\s+)(?P<ref>[^\s;|&]+)")
_TRANSPORT = re.compile(r"(?:^|[\s=\"'])docker://(?P<ref>[^\s;|&\"']+)")
_TRANSPORT_TOOLS = re.compile(r"\b(?:singularity|apptainer|enroot|srun|sbatch|SBATCH)\b|--container-image")
_RUNS = re.compile(r"\b(?:exec|run|shell|start|srun)\b")
# Compose and Kubernetes manifests: `image: repo:tag`, `- image: "repo:tag"  # comment`.
_YAML_IMAGE = re.compile(r"^\s*(?:-\s+)?image: *(?P<q>[\"']?)(?P<ref>[^\s\"'#]+)(?P=q)\s*(?:#.*)?$")
# A Dockerfile's FROM, alone or as `docker build` prints it (`Step 1/8 : FROM ...`, BuildKit's
# `#5 [1/4] FROM ...@sha256:...` and `=> CACHED [1/4] FROM ... 0.0s`). Upper case only: the
# lower-case word begins Python imports and SQL in tracebacks.
_FROM = re.compile(r"^\s*(?:Step \d+/\d+ : |(?:#\d+|=>)\s+(?:CACHED\s+)?\[[^\]]*\]\s+)?FROM +"
                   r"(?:--platform=\S+\s+)?(?P<ref>\S+)(?:\s+(?:AS|as)\s+[\w.-]+)?(?:\s+[\d.]+s)?\s*$")

# The options of `run`/`create`/`pull` that take a value as the next word (Docker's and Podman's).
_VALUE_SHORT = frozenset("acehlmpuvw")
_VALUE_LONG = frozenset(
    "add-host annotation arch attach authfile blkio-weight cap-add cap-drop cert-dir cgroup-parent cgroupns cgroups "
    "cidfile conmon-pidfile cpu-period cpu-quota cpu-rt-period cpu-rt-runtime cpu-shares cpus cpuset-cpus "
    "cpuset-mems creds decryption-key device device-cgroup-rule device-read-bps device-read-iops "
    "device-write-bps device-write-iops dns dns-option dns-search domainname entrypoint env env-file expose "
    "gidmap gpus group-add health-cmd health-interval health-retries health-start-period health-timeout hooks-dir "
    "hostname hostuser ip ip6 ipc isolation kernel-memory label label-file link link-local-ip log-driver log-opt "
    "mac-address memory memory-reservation memory-swap memory-swappiness mount name net network network-alias "
    "oom-score-adj os pid pidfile pids-limit platform pod publish pull restart retry retry-delay runtime secret "
    "security-opt shm-size stop-signal stop-timeout storage-opt subgidname subuidname sysctl timeout tmpfs tz "
    "uidmap ulimit umask user userns uts variant volume volume-driver volumes-from workdir".split())
_SHELL_STOPS = frozenset({"&&", "||", "|", ";", "&", ">", ">>", "2>&1"})


@dataclass(frozen=True)
class Named:
    """An image a line names: as written, normalised, the 0-based line, and whether it runs there."""

    written: str
    ref: str
    line: int
    runs: bool


def images(lines: list[str]) -> Found | None:
    named = [n for start, text in _commands(lines) for n in _named(text, start, lines)]
    if not named:
        return None
    # Several images in one paste: the job ran in the last one run. Earlier runs are usually
    # attempts the user replaced, and an image only pulled or built from may not be the one the
    # job ran in; without any run, the last image named stands for it.
    runs = [n for n in named if n.runs]
    chosen = (runs or named)[-1]
    found = Found()
    found.put("container", "image", chosen.written, chosen.line)
    image = resolve(chosen.ref)
    if image is not None:
        for key, value in image.facts().items():
            found.put("container", key, value, chosen.line)
    return found


def _commands(lines: list[str]) -> list[tuple[int, str]]:
    """(first line, text) of each logical line: a line ending in a backslash goes on."""
    out, start, parts = [], None, []
    for i, text in enumerate(lines):
        stripped = text.rstrip()
        if start is None:
            start = i
        if stripped.endswith("\\") and i + 1 < len(lines):
            parts.append(stripped[:-1])
            continue
        parts.append(text)
        out.append((start, " ".join(parts)))
        start, parts = None, []
    return out


def _named(text: str, start: int, lines: list[str]) -> list[Named]:
    found: list[tuple[str, bool]] = []
    if "FROM " in text:
        m = _FROM.match(text)
        if m:
            found.append((m.group("ref"), False))
    if "image:" in text:
        m = _YAML_IMAGE.match(text)
        if m:
            found.append((m.group("ref"), True))
    if "-image" in text:
        found += [(m.group("ref"), True) for m in _IMAGE_OPTION.finditer(text)]
    if "docker://" in text and _TRANSPORT_TOOLS.search(text):
        for m in _TRANSPORT.finditer(text):
            found.append((m.group("ref"), bool(_RUNS.search(text[:m.start()]))))
    for m in _CLI.finditer(text) if (" run" in text or " create" in text or " pull" in text) else ():
        word = _cli_image(text[m.end():], m.group("verb"))
        if word:
            found.append((word, m.group("verb") != "pull"))
    out = []
    for written, runs in found:
        written = written.strip("\"'`").rstrip(",;)`'\"")
        ref = normalise(written)
        if ref:
            out.append(Named(written, ref, _line_of(written, start, lines), runs))
    return out


def _cli_image(rest: str, verb: str) -> str | None:
    """The first word after the options of `docker run|create|pull ...`."""
    rest = re.split(r"\s#", rest, maxsplit=1)[0]
    try:
        words = shlex.split(rest)
    except ValueError:  # an unbalanced quote in a pasted line
        words = rest.split()
    i = 0
    while i < len(words):
        word = words[i]
        if word in _SHELL_STOPS:
            return None
        if word.startswith("--"):
            name = word[2:]
            i += 2 if "=" not in name and name in _VALUE_LONG else 1
        elif word.startswith("-") and len(word) > 1:
            letters = word[1:]
            i += 2 if letters.isalpha() and letters[-1] in _VALUE_SHORT and verb != "pull" else 1
        else:
            return word
    return None


def _line_of(written: str, start: int, lines: list[str]) -> int:
    for i in range(start, len(lines)):
        if written in lines[i]:
            return i
        if not lines[i].rstrip().endswith("\\"):
            break
    return start


# ------------------------------------------------------------------------ image references

_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*(?::\d+)?"
_REFERENCE = re.compile(rf"(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*(?::\w[\w.-]{{0,127}})?"
                        rf"(?:@sha256:[0-9a-f]+)?")
DOCKER_HUB = frozenset({"docker.io", "index.docker.io", "registry-1.docker.io"})


def normalise(written: str) -> str | None:
    """`registry/path:tag` of an image as a command wrote it (`docker://`, Shifter's `docker:`,
    pyxis' and enroot's `[user@]registry#path`), or None for a word that is no image reference.
    A bare name without a tag or a repository (`ubuntu`, a shell word) says nothing of CUDA."""
    ref = written.strip()
    if ref.startswith("docker://"):
        ref = ref[len("docker://"):]
    elif ref.startswith("docker:") and not ref[7:8].isdigit():
        ref = ref[len("docker:"):]
    if "#" in ref:
        registry, _, path = ref.partition("#")
        registry = registry.rpartition("@")[2]
        ref = f"{registry}/{path}" if registry else path
    if not _REFERENCE.fullmatch(ref):
        return None
    if "/" not in ref and ":" not in ref.partition("@")[0]:
        return None
    return ref


def split_reference(ref: str) -> tuple[str, str, str]:
    """(registry, repository path, tag) of a normalised reference; Docker Hub's official images
    under `library/`."""
    name = ref.partition("@")[0]
    first, slash, rest = name.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        registry, name = first.lower(), rest
    else:
        registry = "docker.io"
    path, _, tag = name.partition(":")
    registry = "docker.io" if registry in DOCKER_HUB else registry
    if registry == "docker.io" and "/" not in path:
        path = f"library/{path}"
    return registry, path, tag


# ------------------------------------------------------------------------ the CUDA inside an image

# A tag that names its CUDA: `2.0.1-cuda11.7-cudnn8-runtime`, `cuda-12.1`, `torch2.1-cu121`.
_TAG_CUDA = re.compile(r"(?:^|[-_.])cuda[-_]?(?P<major>\d{1,2})\.(?P<minor>\d{1,2})(?=$|[-_.])")
_TAG_CU = re.compile(r"(?:^|[-_.])cu(?P<digits>\d{2,3})(?=$|[-_.])")
_CUDA_IMAGE_TAG = re.compile(r"(?P<major>\d{1,2})\.(?P<minor>\d{1,2})(?:\.\d+)?(?=$|-)")
_NGC_TAG = re.compile(r"(?P<release>\d\d\.\d\d(?:\.\d+)?)-(?:tf[12]-)?py3")
_TF_TAG = re.compile(r"(?P<major>\d+)\.(?P<minor>\d+)\.\d+(?:rc\d+)?-gpu(?:-jupyter)?(?:-py3)?")


@dataclass(frozen=True)
class ImageCuda:
    """What the tag or a table says of an image: its CUDA, where that came from, the driver
    NVIDIA names for it (NGC), the branches forward compatibility serves (branch floors)."""

    cuda: str
    source: str
    stated_driver: str | None = None
    compat: tuple[str, ...] = ()

    @property
    def major_minor(self) -> str:
        return ".".join(self.cuda.split(".")[:2])

    def facts(self) -> dict:
        from troubleshoot.cudadrivers import minimum_driver

        out: dict = {"image_cuda": self.major_minor, "image_cuda_source": self.source}
        floor = minimum_driver(self.major_minor)
        least = _newest(floor, self.stated_driver)
        if least:
            out["image_min_driver"] = least
        if floor:
            out["image_min_driver_compat"] = floor
        compat = self.compat or _compat_for(self.major_minor)
        if compat:
            out["image_forward_compat"] = [{"branch": f.split(".")[0], "floor": f,
                                            "below": str(int(f.split(".")[0]) + 1)} for f in compat]
        return out


def resolve(ref: str) -> ImageCuda | None:
    """The CUDA of a normalised image reference: its tag first, then the tables; None unknown."""
    registry, path, tag = split_reference(ref)
    m = _TAG_CUDA.search(tag)
    if m:
        return ImageCuda(f"{int(m['major'])}.{int(m['minor'])}", "tag")
    m = _TAG_CU.search(tag)
    if m:
        digits = m["digits"]
        if len(digits) == 3 or digits[0] != "1":  # `cu12` names a major release only
            return ImageCuda(f"{digits[:-1]}.{digits[-1]}", "tag")
    if path == "nvidia/cuda" and registry in ("docker.io", "nvcr.io"):
        m = _CUDA_IMAGE_TAG.match(tag)
        return ImageCuda(f"{int(m['major'])}.{int(m['minor'])}", "tag") if m else None
    if registry == "nvcr.io" and path.startswith("nvidia/"):
        m = _NGC_TAG.fullmatch(tag)
        row = _tables()["ngc"].get(path.rsplit("/", 1)[-1], {}).get(m["release"]) if m else None
        if row:
            return ImageCuda(str(row["cuda"]), "ngc", _text(row.get("driver")), tuple(map(str, row.get("compat", ()))))
        return None
    if registry == "docker.io" and path == "tensorflow/tensorflow":
        m = _TF_TAG.fullmatch(tag)
        cuda = _tables()["tensorflow"].get(f"{m['major']}.{m['minor']}") if m else None
        if cuda:
            cuda = str(cuda)
            return ImageCuda(cuda if "." in cuda else f"{cuda}.0", "tensorflow")
    return None


@functools.lru_cache(maxsize=1)
def _tables() -> dict:
    # Read like the driver tables (cudadrivers): parsed once, and only for an image the tag
    # leaves unresolved.
    from pathlib import Path

    from troubleshoot.engine.documents import load_data_file

    return load_data_file(Path(__file__).parents[1] / "data" / "container-images.yaml", "container image table")


def _text(value) -> str | None:
    return None if value is None else str(value)


def _newest(a: str | None, b: str | None) -> str | None:
    """The newer of two driver versions (either may be missing): NVIDIA's stated minimum for an
    NGC release, never below what its CUDA release itself needs."""
    from troubleshoot.values import parse_version

    if not a or not b:
        return a or b
    return b if parse_version(b) > parse_version(a) else a


@functools.lru_cache(maxsize=64)
def _compat_for(cuda: str) -> tuple[str, ...]:
    """The forward-compatible branches NVIDIA lists for a CUDA release, from the newest NGC
    release built on it: an image that is no NGC one runs on the same `cuda-compat` package."""
    best: tuple[tuple[int, ...], tuple[str, ...]] = ((), ())
    for rows in _tables()["ngc"].values():
        for release, row in rows.items():
            if row.get("compat") and ".".join(str(row["cuda"]).split(".")[:2]) == cuda:
                key = tuple(int(p) for p in str(release).split("."))
                if key > best[0]:
                    best = (key, tuple(map(str, row["compat"])))
    return best[1]
