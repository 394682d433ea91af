"""Facts from the dumps pasted into a text: the parsers whose needles the text holds run over its
lines, and what each found is laid together, with the line that showed each fact."""

from __future__ import annotations

from troubleshoot.cudadrivers import cuda_of_driver
from troubleshoot.paste.needles import needles_in, needles_in_bytes, needles_of
from troubleshoot.paste.parsers import PARSERS
from troubleshoot.records import field, record
from troubleshoot.scan.ansi import ANSI as _ANSI

HEAD_BYTES = 4 << 20
NEEDLES = needles_of(PARSERS)  # every parser's needles, each once: searched for in one pass


@record
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
    present = needles_in(text, NEEDLES)  # one pass over a long text
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
        _add_monitoring(out, readings, text, lines)
    _add_cuda_of_driver(out)
    return out


def read_head(head: bytes) -> Pasted:
    """`read()` of a log's first bytes (HEAD_BYTES at most), decoded only when it may hold a
    dump: most logs hold none, and their heads cost one pass over the bytes instead of a
    decode, a strip of colour and a search of the text (~13 ms per 4 MiB)."""
    if not needles_in_bytes(head, NEEDLES):
        return Pasted()
    return read(head.decode("utf-8", "replace"))


def _add_monitoring(out: Pasted, readings: list, text: str, lines: list[str]) -> None:
    """The GPU monitoring loops' readings, with the CPU-side dumps beside them, as run.* facts."""
    from troubleshoot.paste import monitor

    r = monitor.Readings()
    for more in readings:
        r.extend(more)
    if not (r.gpu or r.clocks or r.reasons):
        return
    cpu = needles_in(text, needles_of(monitor.CPU_PARSERS))
    for parse, needles in monitor.CPU_PARSERS:
        if any(n in cpu for n in needles):
            r.extend(parse(lines))
    run = monitor.summarise(r)
    if run is not None:  # a pasted run report, measured over the whole run, wins over snapshots
        _add(out, run, lines)


def _add_cuda_of_driver(out: Pasted) -> None:
    """What nvidia-smi would show as "CUDA Version" for a pasted driver version without it."""
    nv = out.facts.get("nvml")
    if nv and nv.get("driver_version") and not nv.get("cuda_driver_version"):
        cuda = cuda_of_driver(nv["driver_version"])
        if cuda:
            nv["cuda_driver_version"] = cuda
            out.lines.setdefault("nvml.cuda_driver_version", out.lines.get("nvml.driver_version"))


def _add(out: Pasted, found, lines: list[str]) -> None:
    for area, facts in found.facts.items():
        _merge_area(out.facts.setdefault(area, {}), facts)
    for path, i in found.lines.items():
        out.lines.setdefault(path, (i + 1, lines[i].strip()))


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
