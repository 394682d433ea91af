"""State dumps pasted into a log, read as facts of the machine the log came from.

A user who pastes `nvidia-smi`, `nvidia-smi -q`, `lsmod`, `lspci -vv`, `ldconfig -p`, `docker info`,
`pip list`/`conda list` or `python -m torch.utils.collect_env` next to an error has given the
same facts a probe would read; one who pastes monitoring loops (`nvidia-smi dmon`, `top`,
`vmstat`, `iostat`...) or a `troubleshoot run --format json` report has given the `run.*`
facts `troubleshoot run`'s watcher measures (troubleshoot.paste.monitor, .runreport). `read()`
turns them into facts in the snapshot's shape, and
`merge()` lays them over the probed facts (or stands alone with --no-probe), recording per fact
the pasted line that showed it, so that a diagnosis names that line as evidence.

Only the head of a log is read for dumps (HEAD_BYTES): pasted logs are short, and a job that
prints its environment does so at the start.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import BinaryIO, Mapping

from troubleshoot.scan.ansi import ANSI as _ANSI, ANSI_BYTES as _ANSI_BYTES

HEAD_BYTES = 4 << 20
# Where merged facts keep, per fact path (lists as `[]`), the pasted line that showed it.
LINES_KEY = "_pasted_lines"


class _Parser:
    """A parser named by its module and function, imported the first time it runs: most logs
    hold no dump, and the parsers' modules (with their regexes) cost ~10 ms to import."""

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
    (_Parser("nvsmi", "query"), ("NVSMI LOG", "\nGPU ")),
    (_Parser("nvsmi", "table"), ("Driver Version:",)),
    (_Parser("nvsmi", "topology"), ("CPU Affinity",)),
    (_Parser("dumps", "lsmod"), ("nvidia", "nouveau")),  # every name in probes.kernel.MODULES holds one of them
    (_Parser("dumps", "lspci"), ("LnkSta", "Kernel driver in use")),
    (_Parser("dumps", "ldconfig"), ("=>",)),
    (_Parser("dumps", "docker_info"), ("Runtimes:",)),
    # a listed package is its name then blanks ("torch   2.1.0+cu121"); "torch/" paths in tracebacks are not
    (_Parser("dumps", "packages"), ("torch ", "torch\t", "tensorflow ", "tensorflow\t", "tensorflow-gpu ", "jax ",
                                    "jaxlib ", "PyTorch version", "Nvidia driver version")),
    (_Parser("dumps", "environment"), tuple(f"{name}=" for name in PASTED_ENV)),
    # A `troubleshoot run --format json` report first: what the watcher measured wins over snapshots.
    (_Parser("runreport", "report"), ('"run":',)),
    # GPU monitoring loops (troubleshoot.paste.monitor): their readings become run.* facts together;
    # the CPU-side dumps (monitor.CPU_PARSERS) are looked for only where one of these is found,
    # since no rule reads CPU state without GPU utilisation.
    (_Parser("monitor", "dmon"), ("Idx",)),  # the units line ("# Idx     W ...") dmon prints under its header
    (_Parser("monitor", "query_csv"), ("utilization.gpu",)),
    (_Parser("monitor", "tables"), ("Driver Version:",)),  # the table parser's needle: searched once for both
)


@dataclass
class Pasted:
    facts: dict = field(default_factory=dict)
    lines: dict = field(default_factory=dict)  # fact path -> (1-based line number, text)

    def __bool__(self) -> bool:
        return bool(self.facts)


def read(text: str) -> Pasted:
    """Facts from every dump found in `text`."""
    if "\x1b" in text:  # once over the text, not once per line: most logs have no colour
        text = _ANSI.sub("", text)
    out = Pasted()
    present = _needles_in(text, _needles(PARSERS))  # one pass over a long text
    wanted = [parse for parse, needles in PARSERS if any(n in present for n in needles)]
    if not wanted:
        return out
    lines = [t.rstrip("\r") for t in text.split("\n")]
    readings = []
    for parse in wanted:
        found = parse(lines)
        if found is None:
            continue
        if found.readings:
            readings.append(found.readings)
        _add(out, found, lines)
    if readings and "run" not in out.facts:
        from troubleshoot.paste import monitor

        r = monitor.Readings()
        for more in readings:
            r.extend(more)
        if r.gpu:
            cpu = _needles_in(text, _needles(monitor.CPU_PARSERS))
            for parse, needles in monitor.CPU_PARSERS:
                if any(n in cpu for n in needles):
                    r.extend(parse(lines))
            run = monitor.summarise(r)
            if run is not None:  # a pasted run report, measured over the whole run, wins over snapshots
                _add(out, run, lines)
    nv = out.facts.get("nvml")
    if nv and nv.get("driver_version") and not nv.get("cuda_driver_version"):
        cuda = cuda_of_driver(nv["driver_version"])
        if cuda:  # what nvidia-smi would show as "CUDA Version" for this driver
            nv["cuda_driver_version"] = cuda
            out.lines.setdefault("nvml.cuda_driver_version", out.lines.get("nvml.driver_version"))
    return out


def read_head(head: bytes) -> Pasted:
    """`read()` of a log's first bytes (HEAD_BYTES at most), decoded only when it may hold a
    dump: most logs hold none, and their heads cost one pass over the bytes instead of a
    decode, a strip of colour and a search of the text (~13 ms per 4 MiB)."""
    if not _needles_in_bytes(head, _needles(PARSERS)):
        return Pasted()
    return read(head.decode("utf-8", "replace"))


def _add(out: Pasted, found, lines: list[str]) -> None:
    for area, facts in found.facts.items():
        _merge_area(out.facts.setdefault(area, {}), facts)
    for path, i in found.lines.items():
        out.lines.setdefault(path, (i + 1, lines[i].strip()))


# Below this many bytes a search per needle costs less than loading the database for all.
ONE_PASS_CHARS = 64 << 10


def _needles(table) -> tuple[str, ...]:
    return tuple(dict.fromkeys(n for _, ns in table for n in ns))


def _needles_in(text: str, needles: tuple[str, ...]) -> set[str]:
    """The `needles` that `text` holds (one starting with "\\n" also at its very start)."""
    # All needles are ASCII, and UTF-8 spells no other character with an ASCII byte: a needle
    # is in the text exactly when its bytes are in the text's UTF-8.
    return _needles_in_raw(text.encode("utf-8", "surrogatepass"), needles)


def _needles_in_bytes(data: bytes, needles: tuple[str, ...]) -> set[str]:
    """At least the `needles` that `read()` finds in the text of `data`. Decoding keeps every
    ASCII byte (so every needle) as it is; stripping colour can make a needle only on a line
    that holds an escape sequence, so those lines alone are searched stripped too (a stripped
    copy of the whole head would add 4 MiB to the peak memory of a coloured log's scan)."""
    present = _needles_in_raw(data, needles)
    if b"\x1b" in data:
        coloured, find, rfind = [], data.find, data.rfind
        pos = find(b"\x1b")
        while pos >= 0:
            stop = find(b"\n", pos)
            stop = len(data) if stop < 0 else stop
            coloured.append(data[rfind(b"\n", 0, pos) + 1 : stop])
            pos = find(b"\x1b", stop)
        # Each stripped line after a newline, as it is in the text (a needle may start with one).
        present |= _needles_in_raw(b"\n" + _ANSI_BYTES.sub(b"", b"\n".join(coloured)), needles)
    return present


def _needles_in_raw(data: bytes, needles: tuple[str, ...]) -> set[str]:
    found = None
    if len(data) >= ONE_PASS_CHARS:  # one pass for all needles (hyperscan), not one per needle
        from troubleshoot.scan import hsdb

        found = hsdb.literals_found(needles, data)
    if found is None:  # a short text, or no hyperscan
        present = {n for n in needles if n.encode() in data}
    else:
        present = {needles[i] for i in found}
    present.update(n for n in needles if n[0] == "\n" and data.startswith(n[1:].encode()))
    return present


def _merge_area(into: dict, new: dict) -> None:
    for key, value in new.items():
        if key == "gpus" and into.get("gpus"):
            into["gpus"] = _merge_gpus(into["gpus"], value)
        elif isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge_area(into[key], value)
        else:
            into.setdefault(key, value)


def _bus(g: dict) -> str:
    return str(g.get("pci_bus_id") or "").lower()[-12:]


def _merge_gpus(old: list, new: list) -> list:
    """GPUs seen by two dumps (the nvidia-smi table, lspci) are one list, matched by PCI address."""
    merged = [dict(g) for g in old]
    for g in new:
        same = next((m for m in merged if _bus(m) and _bus(m) == _bus(g)), None)
        if same is None:
            merged.append(dict(g, index=len(merged)))
        else:
            for k, v in g.items():
                same.setdefault(k, v)
    return merged


# The newest CUDA each driver branch supports (what nvidia-smi prints as "CUDA Version"),
# from the CUDA toolkit release notes' driver table.
DRIVER_CUDA = [("580", "13.0"), ("575", "12.9"), ("570", "12.8"), ("560", "12.6"), ("555", "12.5"), ("550", "12.4"),
               ("545", "12.3"), ("535", "12.2"), ("530", "12.1"), ("525", "12.0"), ("520", "11.8"), ("515", "11.7"),
               ("510", "11.6"), ("495", "11.5"), ("470", "11.4"), ("465", "11.3"), ("460", "11.2"), ("455", "11.1"),
               ("450", "11.0"), ("440", "10.2"), ("418", "10.1"), ("410", "10.0"), ("396", "9.2"), ("384", "9.0")]


def cuda_of_driver(driver: str) -> str | None:
    try:
        major = int(str(driver).split(".")[0])
    except ValueError:
        return None
    return next((cuda for floor, cuda in DRIVER_CUDA if major >= int(floor)), None)


# Areas where facts measured for this very log (the watcher's run facts) are kept over pasted ones.
MEASURED_WINS = ("run",)


def merge(facts: Mapping | None, pasted: Pasted) -> dict | None:
    """`facts` with the pasted facts laid over them (they describe the log's machine)."""
    if not pasted:
        return dict(facts) if facts is not None else None
    out = copy.deepcopy(dict(facts or {}))
    lines = dict(pasted.lines)
    for area, values in pasted.facts.items():
        if area in MEASURED_WINS and isinstance(out.get(area), dict) and out[area].get("available"):
            # `troubleshoot run` watched this job: its averages beat a snapshot the job printed.
            lines = {p: v for p, v in lines.items() if not p.startswith(area + ".")}
            continue
        if not isinstance(out.get(area), dict) or out[area].get("available") is False:
            out[area] = {}
        out[area].update(copy.deepcopy(values))
    out[LINES_KEY] = lines
    return out


class Head:
    """A read-through wrapper that keeps the first HEAD_BYTES of a stream for `read()`."""

    def __init__(self, stream: BinaryIO, limit: int = HEAD_BYTES):
        self.stream = stream
        self.limit = limit
        self.kept = bytearray()

    def read(self, n: int = -1) -> bytes:
        data = self.stream.read(n)
        room = self.limit - len(self.kept)
        if room > 0 and data:
            self.kept += data[:room]
        return data

    def text(self) -> str:
        return bytes(self.kept).decode("utf-8", "replace")
