"""The parsers of pasted dumps, each with the literal strings one of which its dump cannot lack.

A parser is named by its module and function and imported the first time it runs: most logs
hold no dump, and the parsers' modules (with their regexes) cost ~10 ms to import.
"""

from __future__ import annotations


class LazyParser:
    """A parser named by its module in this package and its function, imported when first called."""

    __slots__ = ("module", "__name__", "_parse")

    def __init__(self, module: str, name: str):
        self.module, self.__name__, self._parse = module, name, None

    def __call__(self, lines: list[str]):
        if self._parse is None:
            import importlib

            self._parse = getattr(importlib.import_module(f"troubleshoot.paste.{self.module}"), self.__name__)
        return self._parse(lines)

    def __repr__(self) -> str:
        return f"troubleshoot.paste.{self.module}.{self.__name__}"


# The device-selection variables a pasted environment shows (dumps.environment reads them).
PASTED_ENV = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")
# Each parser, with literal strings one of which its dump cannot lack (what its patterns require).
# A log with none of them is never split into lines: most logs hold no dump, and these substring
# searches cost ~25 ms of CPU per 4 MiB head where running every parser over its lines cost ~190 ms.
# A needle that starts with "\n" must begin a line.
PARSERS = (
    (LazyParser("nvsmi", "query"), ("NVSMI LOG", "\nGPU ")),
    (LazyParser("nvsmi", "table"), ("Driver Version:",)),
    (LazyParser("nvsmi", "topology"), ("CPU Affinity",)),
    (LazyParser("dumps", "lsmod"), ("nvidia", "nouveau")),  # every name in probes.kernel.MODULES holds one of them
    (LazyParser("dumps", "lspci"), ("LnkSta", "Kernel driver in use")),
    (LazyParser("dumps", "ldconfig"), ("=>",)),
    (LazyParser("dumps", "docker_info"), ("Runtimes:",)),
    # a listed package is its name then blanks ("torch   2.1.0+cu121"); "torch/" paths in tracebacks are not
    (LazyParser("dumps", "packages"), ("torch ", "torch\t", "tensorflow ", "tensorflow\t", "tensorflow-gpu ", "jax ",
                                       "jaxlib ", "PyTorch version", "Nvidia driver version")),
    (LazyParser("dumps", "environment"), tuple(f"{name}=" for name in PASTED_ENV)),
    # the environment a job printed about itself: OpenMMLab's and detectron2's collect_env,
    # torch.__config__.show(), nvcc --version, NCCL's banner, the driver's load line
    (LazyParser("envblock", "envblock"), ("MMCV", "PyTorch: ", "detectron2", "Detectron2", "Cuda compilation tools",
                                          "NCCL version ", "NVRM: loading", "CUDA Runtime ", "CUDA_VERSION=")),
    # the container image the job runs in: a container CLI's run/create/pull, pyxis' and kubectl's
    # image options, docker:// given to singularity/apptainer/enroot, a manifest's image:, a FROM
    (LazyParser("images", "images"), ("docker run", "docker create", "docker pull", "podman run", "podman create",
                                      "podman pull", "nerdctl run", "nerdctl create", "nerdctl pull", "container run",
                                      "container create", "image pull", "docker://", "--image", "container-image",
                                      "image:", "FROM ")),
    # collective-hang reports: PyTorch's flight-recorder analyzer (fr_trace, torchfrtrace) and NCCL's RAS status
    (LazyParser("collectives", "flight_recorder"),
     ("joining collective", "group info: ", "Missing dump files from ranks", "missed FR dumps from ranks")),
    (LazyParser("collectives", "nccl_ras"),
     ("Group     Comms", "Missing communicator data from", "considered dead (unreachable via the RAS network)",
      "Communicator ranks have different", "Asynchronous error", "Initialization error", "_DEAD: Process")),
    (LazyParser("collectives", "nccl_ras_json"), ('"missing_ranks": [',)),
    # bandwidth matrices: the CUDA sample p2pBandwidthLatencyTest and NVIDIA's nvbandwidth
    (LazyParser("p2p", "p2p"), ("Bandwidth Matrix (GB/s)", "Bandwidth (P2P Writes) Matrix", "Bandwidth (P2P Reads) Matrix",
                                "(column) bandwidth (GB/s)", "(column) total bandwidth (GB/s)")),
    # torch.compile recompiling: TorchDynamo's recompiles log and its recompile-limit warning
    (LazyParser("compiled", "recompiles"), ("Recompiling function ", "torch._dynamo hit config.")),
    # A `troubleshoot run --format json` report first: what the watcher measured wins over snapshots.
    (LazyParser("runreport", "report"), ('"run":',)),
    # GPU monitoring loops (troubleshoot.paste.monitor): their readings become run.* facts together;
    # the CPU-side dumps (monitor.CPU_PARSERS) are looked for only where one of these is found,
    # since no rule reads CPU state without GPU utilisation.
    (LazyParser("gpuloops", "dmon"), ("Idx",)),  # the units line ("# Idx     W ...") dmon prints under its header
    (LazyParser("gpuloops", "query_csv"), ("utilization.gpu", "clocks.sm", "clocks.current.sm")),
    (LazyParser("gpuloops", "tables"), ("Driver Version:",)),  # the table parser's needle: searched once for both
    (LazyParser("gpuloops", "gpustat"), ("°C,", "'C,")),
)
