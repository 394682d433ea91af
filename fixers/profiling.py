"""Handing a slow job over to a profiler: the Nsight Systems command for the user's own job and the
report commands to read the result. Profiling runs the job, so this is advice, never applied."""

from __future__ import annotations

import re
import shlex

from troubleshoot_fixers.facts import fact
from troubleshoot.fixes.api import Fixer, Param
from troubleshoot.fixes.plan import Advice, Plan

# What Nsight Systems traces: CUDA API and kernels, NVTX ranges (PyTorch's autograd ranges and
# your own), OS runtime calls (the data loader's reads and waits), cuDNN and cuBLAS calls.
TRACE = "cuda,nvtx,osrt,cudnn,cublas"
REPORTS = "cuda_gpu_kern_sum,cuda_api_sum,nvtx_sum,osrt_sum"


def _name(value: str | None) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", value or "").strip("-.")
    return name[:60] or "troubleshoot-profile"


class ProfileJob(Fixer):
    id = "profile"
    title = "Profile the job with Nsight Systems"
    params = (
        Param("command", help="the job's command line, as you start it (default: from `troubleshoot run`)"),
        Param("name", help="report name (letters, digits, . _ -)"),
        Param("duration", type=int, help="seconds to record (default: until the job ends)"),
    )
    needs_snapshot = True

    def plan(self, params, snapshot):
        command = params.get("command") or fact(snapshot, "run", "command")
        if isinstance(command, list):
            command = shlex.join(str(c) for c in command)
        cmd = "".join(ch for ch in str(command) if ch.isprintable()) if command else "<your training command>"
        name = _name(params.get("name"))
        duration = f" --duration={params['duration']}" if params.get("duration") else ""
        text = f"""\
Record a timeline of the job (Nsight Systems; `nsys` ships with the CUDA toolkit and in NGC images):
```bash
nsys profile -t {TRACE} -o {name} --force-overwrite=true{duration} \\
    {cmd}
```
Keep the run short: a few hundred steps are enough (`--duration=60`, or `--capture-range=cudaProfilerApi`
and call `torch.cuda.profiler.start()`/`stop()` around the steps you want).

Read it:
```bash
nsys stats --report {REPORTS} {name}.nsys-rep   # top kernels, CUDA API, NVTX ranges, OS calls
nsys-ui {name}.nsys-rep                          # the timeline: gaps between kernels are the GPU waiting
```
What to look for: long gaps on the GPU row while `osrt` shows `read`/`poll`/`futex` in the data loader
(input-bound), `cudaMemcpy`/`cudaStreamSynchronize` stalls (host-device transfers, `.item()` in the loop),
NCCL kernels taking most of the step (communication-bound). Mark your own phases with
`torch.cuda.nvtx.range_push("data")` / `range_pop()` to see them by name.

DLProf is retired (its last release was 2021 and it is no longer in NGC containers): use Nsight Systems
for the timeline, Nsight Compute (`ncu`) for single kernels, and `torch.profiler` for a per-operator view."""
        return Plan(self.id, self.title, params, (Advice(text),),
                    notes=("Profiling runs the job again; nothing is changed on this machine.",))


FIXERS = [ProfileJob()]
