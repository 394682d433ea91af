"""Whose machine a diagnosis was judged by, in words: the facts the log printed about its own
machine, this machine's (or a snapshot's), or both. One view for the text report, Markdown, JSON
and the TUI."""

from __future__ import annotations

from typing import Mapping

from troubleshoot.textsafe import terminal_safe

# What a person calls each fact a log prints about its machine, in the order they read best.
_LABELS = (("frameworks.torch.version", "torch"), ("frameworks.torch.cuda", "torch built for CUDA"),
           ("frameworks.mmcv.version", "mmcv"), ("frameworks.mmcv.cuda", "mmcv built with CUDA"),
           ("frameworks.detectron2.version", "detectron2"), ("frameworks.detectron2.cuda", "detectron2 built with CUDA"),
           ("cuda.nvcc_version", "nvcc"), ("nvml.driver_version", "driver"),
           ("nvml.cuda_driver_version", "driver's CUDA"), ("kernel.nvidia_module_version", "kernel module"),
           ("frameworks.torch.nccl", "NCCL"), ("frameworks.tensorflow.version", "tensorflow"),
           ("frameworks.jax.version", "jax"))
MOST = 8


# Facts of the job rather than of its machine's software (a hung collective's ranks, a bandwidth
# benchmark's numbers, a monitoring loop's readings, its recompilations): their own diagnoses say them.
_NOT_MACHINE = ("collectives.", "p2p.", "compile.", "run.")


def machine_facts(log_facts: Mapping[str, object]) -> dict[str, object]:
    return {p: v for p, v in log_facts.items() if not p.startswith(_NOT_MACHINE)}


def log_facts_words(log_facts: Mapping[str, object]) -> str:
    """'torch 2.1.2+cu121, torch built for CUDA 12.1, mmcv built with CUDA 11.3, nvcc 11.3'."""
    log_facts = machine_facts(log_facts)
    labelled = dict(_LABELS)
    ordered = [p for p, _ in _LABELS if p in log_facts] + sorted(p for p in log_facts if p not in labelled)
    parts = [f"{labelled.get(p, p)} {log_facts[p]}" for p in ordered[:MOST]]
    more = len(ordered) - MOST
    return terminal_safe(", ".join(parts) + (f" and {more} more" if more > 0 else ""), keep_newlines=False)


def facts_source(origin: str | None, log_facts: Mapping[str, object]) -> str | None:
    """`facts_source` of the JSON document: "the log", "the log and this machine", "this
    machine", "snapshot FILE", "the log and snapshot FILE", or None (no facts)."""
    if machine_facts(log_facts):
        return f"the log and {origin}" if origin else "the log"
    return origin


def facts_lines(origin: str | None, log_facts: Mapping[str, object], note: str | None) -> list[str]:
    """The lines a report opens with: what the log said of its machine, and why this machine's
    facts were left out when they were."""
    out = []
    if machine_facts(log_facts):
        rest = f"; {origin}'s for the rest" if origin else ""
        out.append(f"From the log: {log_facts_words(log_facts)}{rest}.")
    if note:
        out.append(note[0].upper() + note[1:] + ".")
    return out
