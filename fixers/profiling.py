"""Handing a slow job over to a profiler: the Nsight Systems command for the user's own job and the
report commands to read the result. Profiling runs the job, so this is advice, never applied."""

from __future__ import annotations

import re
import shlex

from troubleshoot_fixers.facts import fact, is_plain, printable
from troubleshoot.fixes.api import Fixer, Param
from troubleshoot.fixes.plan import Advice, Plan

# What Nsight Systems traces: CUDA API and kernels, NVTX ranges (PyTorch's autograd ranges and
# your own), OS runtime calls (the data loader's reads and waits), cuDNN and cuBLAS calls.
TRACE = "cuda,nvtx,osrt,cudnn,cublas"
REPORTS = "cuda_gpu_kern_sum,cuda_api_sum,nvtx_sum,osrt_sum"


def _name(value: str | None) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", value or "").strip("-.")
    return name[:60] or "troubleshoot-profile"


# Where the job's command is not known (a plain `diagnose`, a pasted log): a name that reads as
# what to put there and cannot be mistaken for text the tool failed to fill in.
UNKNOWN_COMMAND = "<your training command>"


def _job_command(params, snapshot) -> tuple[str | None, str | None, str | None]:
    """(the job's command line quoted for a shell, the folder to start it in, why it is left
    out). From the `command` parameter as the user wrote it, else from the `job` area that
    `troubleshoot run` records (run.record): its argv, quoted with shlex.join as text to copy;
    never run by us."""
    if params.get("command"):
        return printable(params["command"]), None, None
    argv, cwd = fact(snapshot, "job", "command"), fact(snapshot, "job", "cwd")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        return None, None, None
    if not all(is_plain(a) for a in argv):
        # A control character or line break in an argument cannot be copied from a code block
        # as it was: better the placeholder than a command that differs from the job's.
        return None, None, "the job's recorded command holds a control character or a line break"
    return shlex.join(argv), (cwd if isinstance(cwd, str) and cwd and is_plain(cwd) else None), None


class ProfileJob(Fixer):
    id = "profile"
    title = "Profile the job with Nsight Systems"
    params = (
        Param("command", help="the job's command line, as you start it (default: the one `troubleshoot run` "
                              "recorded in the run's snapshot)"),
        Param("name", help="report name (letters, digits, . _ -)"),
        Param("duration", type=int, help="seconds to record (default: until the job ends)"),
    )
    needs_snapshot = True

    def plan(self, params, snapshot):
        command, cwd, why_not = _job_command(params, snapshot)
        cmd = command or UNKNOWN_COMMAND
        cd = f"cd {shlex.quote(cwd)}\n" if cwd else ""
        name = _name(params.get("name"))
        duration = f" --duration={params['duration']}" if params.get("duration") else ""
        text = f"""\
Record a timeline of the job (Nsight Systems; `nsys` ships with the CUDA toolkit and in NGC images):
```bash
{cd}nsys profile -t {TRACE} -o {name} --force-overwrite=true{duration} \\
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
        notes = ["Profiling runs the job again; nothing is changed on this machine."]
        if command is None:
            notes.append(f"Put the command that starts the job in place of {UNKNOWN_COMMAND}"
                         + (f" ({why_not})." if why_not else
                            ", or give it as `--param command='python train.py ...'`; a job started with "
                            "`troubleshoot run` has it recorded, and the fix preview that run prints names it."))
        return Plan(self.id, self.title, params, (Advice(text),), notes=tuple(notes))


FIXERS = [ProfileJob()]
