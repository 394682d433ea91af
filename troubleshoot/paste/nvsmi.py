"""`nvidia-smi` as users paste it: the summary table, and `nvidia-smi -q`, as NVML facts."""

from __future__ import annotations

import re

from troubleshoot.paste.dumps import Found

# "| NVIDIA-SMI 535.104.05             Driver Version: 535.104.05   CUDA Version: 12.2     |"
_HEADER = re.compile(r"NVIDIA-SMI (?P<smi>\d[\d.]*)\s+Driver Version: (?P<driver>\d[\d.]*)\s+"
                     r"CUDA(?: Driver)? Version: (?P<cuda>\d+\.\d+|N/A)")
# "|   0  NVIDIA A100-SXM4-80GB          On  | 00000000:07:00.0 Off |                    0 |"
_ROW1 = re.compile(r"^\|\s+(?P<index>\d+)\s+(?P<name>\S.*?)\s+(?:On|Off)\s+\|\s+(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:"
                   r"[0-9A-Fa-f]{2}\.\d)\s+(?:On|Off)\s+\|")
# "| N/A   33C    P0              62W / 400W |      4MiB / 81920MiB |      0%      Default |"
_ROW2 = re.compile(r"^\|\s+(?:\d+%|N/A|ERR!)\s+(?P<temp>\d+)C\s+(?:P\d+|N/A|ERR!)\s+(?:\S+\s+)?(?P<power>\d+)W\s*/\s*"
                   r"(?P<cap>\d+)W\s+\|\s+(?P<used>\d+)MiB\s*/\s*(?P<total>\d+)MiB\s+\|\s+(?P<util>\d+)%\s+(?P<mode>[\w.]+)")
_ROW3_MIG = re.compile(r"^\|\s+\|\s+\|\s+(?P<mig>Enabled|Disabled|N/A)\s+\|\s*$")
_Q_GPU = re.compile(r"^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d\s*$")
_Q_FIELD = re.compile(r"^\s+\S[^:]*?(?:\s:|:\s|$)")
_Q_START = re.compile(r"^=+\s*NVSMI LOG\s*=+\s*$")
_Q_LINE = re.compile(r"^(?:\s+\S|\s*$|Timestamp|Driver Version|CUDA Version|Attached GPUs|GPU [0-9A-Fa-f]{4,8}:|=)")


def table(lines: list[str]) -> Found | None:
    head = next(((i, m) for i, t in enumerate(lines) if (m := _HEADER.search(t))), None)
    if head is None:
        return None
    i0, m = head
    found = Found()
    found.put("nvml", "driver_version", m.group("driver"), i0)
    if m.group("cuda") != "N/A":
        found.put("nvml", "cuda_driver_version", m.group("cuda"), i0)
    gpus: list[dict] = []
    for i in range(i0 + 1, min(len(lines), i0 + 400)):
        text = lines[i].strip()
        r1 = _ROW1.match(text)
        if r1:
            gpus.append({"index": int(r1.group("index")), "name": r1.group("name"), "pci_bus_id": r1.group("bus")})
            found.lines.setdefault("nvml.gpus", i)
            continue
        r2 = _ROW2.match(text)
        if r2 and gpus and "temperature_c" not in gpus[-1]:
            gpus[-1].update(temperature_c=int(r2.group("temp")), power_w=float(r2.group("power")),
                            power_limit_w=float(r2.group("cap")), memory_used_mib=int(r2.group("used")),
                            memory_total_mib=int(r2.group("total")), utilization_gpu=int(r2.group("util")),
                            compute_mode=r2.group("mode").replace(". ", "_"))
            for key in ("temperature_c", "memory_used_mib", "memory_total_mib", "utilization_gpu", "power_w"):
                found.lines.setdefault(f"nvml.gpus[].{key}", i)
            continue
        r3 = _ROW3_MIG.match(text)
        if r3 and gpus and "mig_mode" not in gpus[-1] and r3.group("mig") != "N/A":
            gpus[-1]["mig_mode"] = r3.group("mig") == "Enabled"
            found.lines.setdefault("nvml.gpus[].mig_mode", i)
    found.facts["nvml"]["gpus"] = gpus
    found.lines.setdefault("nvml.gpus", i0)
    return found


def query(lines: list[str]) -> Found | None:
    """`nvidia-smi -q`: parsed, then read through the NVML probe itself (ReplayNVML)."""
    start = next((i for i, t in enumerate(lines) if _Q_START.match(t.strip())), None)
    if start is None:  # a pasted excerpt: from the first "GPU 00000000:3B:00.0" line with fields below it
        start = next((i for i, t in enumerate(lines[:-1]) if _Q_GPU.match(t) and _Q_FIELD.match(lines[i + 1])), None)
    if start is None:
        return None
    end = start + 1
    while end < len(lines) and _Q_LINE.match(lines[end]):
        end += 1
    block = lines[start:end]
    # Imported here: pynvml and the probe layer cost ~20 ms, and most logs hold no `nvidia-smi -q`.
    from troubleshoot.paste.nvsmi_q import ReplayNVML, parse as parse_q
    from troubleshoot.probes import nvml as nvml_probe
    from troubleshoot.probes.base import ProbeContext

    dump = parse_q("\n".join(block))
    if not dump["gpus"] and not dump["driver"]:
        return None
    facts = nvml_probe.probe(ProbeContext(nvml=ReplayNVML(dump), env={}))
    facts.pop("errors", None)
    for g in facts.get("gpus", []):
        g.pop("errors", None)
    found = Found(facts={"nvml": facts})
    section = ""
    for i, t in enumerate(block, start):
        key = t.strip().split(":", 1)[0].strip()
        if key == "Driver Version":
            found.lines.setdefault("nvml.driver_version", i)
        elif key == "CUDA Version":
            found.lines.setdefault("nvml.cuda_driver_version", i)
        elif re.match(r"GPU [0-9A-Fa-f]{4,8}:", t):
            found.lines.setdefault("nvml.gpus", i)
        elif key in THROTTLE_KEYS and t.rstrip().endswith("Active"):
            found.lines.setdefault("nvml.gpus[].throttle_reasons", i)
        elif key == "GPU Current Temp":
            found.lines.setdefault("nvml.gpus[].temperature_c", i)
        elif key == "GPU Slowdown Temp":
            found.lines.setdefault("nvml.gpus[].temperature_slowdown_c", i)
        elif key == "Current" and section in ("MIG Mode", "PCIe Generation", "Link Width"):
            path = {"MIG Mode": "mig_mode", "PCIe Generation": "pcie_gen_current", "Link Width": "pcie_width_current"}
            found.lines.setdefault(f"nvml.gpus[].{path[section]}", i)
        if t.strip() and not t.strip().partition(":")[2].strip():
            section = key  # a heading line ("MIG Mode", "Clocks Event Reasons")
    return found


THROTTLE_KEYS = ("HW Slowdown", "HW Thermal Slowdown", "SW Thermal Slowdown", "SW Power Cap", "HW Power Brake Slowdown")


# `nvidia-smi topo -m`: a header of GPU columns, one row per GPU, a legend.
_TOPO_HEAD = re.compile(r"^\s*(?:GPU\d+\s+)+(?:(?:NIC|mlx\w*)\d*\s+)*CPU Affinity")
_TOPO_ROW = re.compile(r"^\s*GPU(?P<gpu>\d+)\s+(?P<cells>.*)$")
LINKS = ("X", "NV", "PIX", "PXB", "PHB", "NODE", "SYS", "SOC")


def topology(lines: list[str]) -> Found | None:
    head = next((i for i, t in enumerate(lines) if _TOPO_HEAD.match(t)), None)
    if head is None:
        return None
    columns = [c for c in lines[head].split() if re.fullmatch(r"GPU\d+", c)]
    pairs, first = [], {}
    for i in range(head + 1, min(len(lines), head + 1 + 2 * len(columns) + 8)):
        m = _TOPO_ROW.match(lines[i])
        if not m:
            continue
        a = int(m.group("gpu"))
        for col, cell in zip(columns, m.group("cells").split()):
            b = int(col[3:])
            link = re.sub(r"\d+$", "", cell)
            if b <= a or link not in LINKS:
                continue
            pairs.append({"gpu_a": a, "gpu_b": b, "link": "SYS" if link == "SOC" else link, "text": cell})
            first.setdefault(pairs[-1]["link"], i)
    if not pairs:
        return None
    found = Found(facts={"nvml": {"available": True, "topology": pairs}})
    slow = [first[k] for k in ("SYS", "NODE", "PHB") if k in first]
    found.lines["nvml.topology"] = min(slow) if slow else head
    found.lines["nvml.topology[].link"] = found.lines["nvml.topology"]
    return found
