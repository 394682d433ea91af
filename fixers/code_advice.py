"""Fixers for what only the user can change in code or launch commands, plus environment."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from troubleshoot_fixers.facts import fact, is_plain
from troubleshoot.fixes.api import Fixer, FixerError, Param
from troubleshoot.fixes.plan import Advice, Plan, SetEnv

ENV_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
SIZE = r"\d+(?:\.\d+)?\s*[KMGT]?i?B?|\d+[kmgt]?"




class AdviceFixer(Fixer):
    id = "advice"
    title = "Advice: a change only you can make"
    params = (Param("text", required=True, help="Markdown text of the advice"),)

    def plan(self, params, snapshot):
        return Plan(self.id, self.title, params, (Advice(params["text"]),))


class SetEnvFixer(Fixer):
    id = "set-env"
    title = "Set an environment variable for the job"
    params = (
        Param("name", required=True, pattern=ENV_NAME, help="variable name"),
        Param("value", required=True, help="value (quoted safely when written)"),
        Param("profile", help="shell profile to make it permanent in, e.g. ~/.bashrc"),
    )

    def plan(self, params, snapshot):
        if params["profile"] and not is_plain(params["value"]):
            raise FixerError(f"fixer {self.id!r}: a value with a line break or a control character cannot be written "
                             f"as one profile line")
        return Plan(self.id, f"Set {params['name']}", params,
                    (SetEnv(params["name"], params["value"], why="for the job's environment", profile=params["profile"]),),
                    notes=("Takes effect for processes started after it is set (a new shell, the next job).",))


BF16_MIN_CC = (8, 0)  # bf16 tensor cores start with Ampere (sm_80); older GPUs emulate it slowly or refuse it


def _capabilities(snapshot) -> list[tuple[str, tuple[int, int] | None]]:
    """(name, compute capability or None where unknown) of every GPU the facts list."""
    out = []
    for g in fact(snapshot, "nvml", "gpus", default=[]) or []:
        if not isinstance(g, dict):
            continue
        name = g.get("name") if isinstance(g.get("name"), str) and is_plain(g.get("name")) else "a GPU"
        cc = g.get("compute_capability")
        major, dot, minor = cc.partition(".") if isinstance(cc, str) else ("", "", "")
        out.append((name, (int(major), int(minor)) if dot and major.isdigit() and minor.isdigit() else None))
    return out


@dataclass(frozen=True)
class Precision:
    dtype: str | None  # "bfloat16", "float16", or None: the facts do not say which
    reason: str


def mixed_precision(snapshot) -> Precision:
    """Which half precision these GPUs train in: bf16 where every GPU has compute capability 8.0
    or more, fp16 with loss scaling where one has less, both where the facts do not tell; and
    why, in a sentence."""
    gpus = _capabilities(snapshot)
    older = [(n, cc) for n, cc in gpus if cc is not None and cc < BF16_MIN_CC]
    if older:
        name, cc = older[0]
        return Precision("float16", f"{name} has compute capability {cc[0]}.{cc[1]}, below the 8.0 bf16 needs; "
                                    f"fp16's narrower range needs loss scaling (the GradScaler).")
    if gpus and all(cc is not None for _, cc in gpus):
        lowest = min(cc for _, cc in gpus)
        which = f"{gpus[0][0]} has compute capability" if len(gpus) == 1 else \
            f"All {len(gpus)} GPUs have compute capability 8.0 or more, the lowest"
        return Precision("bfloat16", f"{which} {lowest[0]}.{lowest[1]}, and bf16 keeps fp32's range: no loss "
                                     f"scaling needed.")
    why = "no NVML facts list the GPUs here" if not gpus else "a GPU's compute capability is not known here"
    return Precision(None, f"Which one depends on the GPU, and {why}: bf16 needs compute capability 8.0 or more "
                           f"(A100, H100, RTX 30xx and later), older GPUs (V100, T4, RTX 20xx) take fp16 with "
                           f"loss scaling; `torch.cuda.is_bf16_supported()` tells on the machine itself.")


def _accumulation(precision: Precision) -> str:
    """Step 1's loop, in the precision these GPUs train in, indented for the advice's list."""
    if precision.dtype == "bfloat16":
        head, dtype, note = "", "torch.bfloat16", "   # 2. mixed precision, no GradScaler"
    elif precision.dtype == "float16":
        head, dtype, note = 'scaler = torch.amp.GradScaler("cuda")   # fp16 needs loss scaling\n', "torch.float16", \
            "   # 2. mixed precision"
    else:
        head = ("dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16\n"
                'scaler = torch.amp.GradScaler("cuda", enabled=(dtype == torch.float16))\n')
        dtype, note = "dtype", "   # 2. mixed precision"
    if head:
        backward, step = "scaler.scale(loss).backward()", "scaler.step(optimizer); scaler.update(); "
    else:
        backward, step = "loss.backward()", "optimizer.step(); "
    loop = f"""\
{head}accum = 2                      # was batch_size=B; now B // 2
for i, (x, y) in enumerate(loader):
    with torch.autocast("cuda", dtype={dtype}):{note}
        loss = model(x.cuda()).loss / accum
    {backward}
    if (i + 1) % accum == 0:
        {step}optimizer.zero_grad(set_to_none=True)"""
    return textwrap.indent(loop, " " * 15)  # under the advice's own indentation, which dedent takes off


def _mixed_precision_step(precision: Precision) -> str:
    """Step 2, for these GPUs."""
    if precision.dtype == "bfloat16":
        how = "`torch.autocast(\"cuda\", dtype=torch.bfloat16)`, no GradScaler"
    elif precision.dtype == "float16":
        how = "`torch.autocast(\"cuda\", dtype=torch.float16)` with `torch.amp.GradScaler(\"cuda\")`"
    else:
        how = ("`torch.autocast(\"cuda\", dtype=torch.bfloat16)` without a GradScaler on compute capability 8.0+, "
               "`dtype=torch.float16` with `torch.amp.GradScaler(\"cuda\")` below it")
    return f"2. **Mixed precision** roughly halves activations: {how}. {precision.reason}"


class GpuMemoryAdvice(Fixer):
    id = "gpu-memory-advice"
    title = "Fit the step into GPU memory"
    params = (
        Param("requested", help="allocation that failed, as in the log (2.00 GiB)"),
        Param("free", help="free GPU memory at the failure"),
        Param("total", help="GPU capacity"),
    )
    needs_snapshot = True  # the GPUs' compute capability picks bf16 or fp16

    def plan(self, params, snapshot):
        facts = ", ".join(f"{k} {params[k]}" for k in ("requested", "free", "total") if params.get(k))
        head = f"The failing step asked for more than the GPU had ({facts})." if facts else \
            "The step needs more GPU memory than the GPU has."
        precision = mixed_precision(snapshot)
        text = textwrap.dedent(f"""\
            {head} In order of effort:

            1. **Halve the batch size, keep the effective batch** with gradient accumulation:
               ```python
{_accumulation(precision)}
               ```
            {_mixed_precision_step(precision)}
            3. **Activation checkpointing**: `torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)`
               per transformer block, or `model.gradient_checkpointing_enable()` in Hugging Face.
            4. **Free what you keep**: log `loss.item()`, run evaluation under `torch.no_grad()`,
               `del` large intermediates; check `torch.cuda.memory_summary()`.
            5. Larger models: ZeRO/FSDP sharding or CPU offload (DeepSpeed, `accelerate`).""")
        return Plan(self.id, self.title, params, (Advice(text),))


class DockerGpuFlags(Fixer):
    id = "docker-gpu-flags"
    title = "Start the container with the GPUs and enough shared memory"
    params = (Param("shm_size", default="16g", pattern=SIZE, help="shared memory for the container, e.g. 16g"),)

    def plan(self, params, snapshot):
        shm = params["shm_size"]
        text = textwrap.dedent(f"""\
            `docker run`:
            ```sh
            docker run --gpus all --shm-size={shm} --ipc=host --ulimit memlock=-1 --ulimit stack=67108864 IMAGE ...
            ```
            Compose (`docker compose`):
            ```yaml
            services:
              train:
                image: IMAGE
                shm_size: "{shm}"
                ipc: host
                deploy:
                  resources:
                    reservations:
                      devices:
                        - driver: nvidia
                          count: all
                          capabilities: [gpu]
            ```
            Kubernetes: request `nvidia.com/gpu` and mount an `emptyDir: {{medium: Memory}}` at /dev/shm.""")
        return Plan(self.id, self.title, params, (Advice(text),))


class DataLoaderAdvice(Fixer):
    id = "dataloader-advice"
    title = "Feed the GPU faster from the DataLoader"
    needs_snapshot = True

    def plan(self, params, snapshot):
        cpus = fact(snapshot, "io", "cpu_count")
        cpus = cpus if isinstance(cpus, int) and not isinstance(cpus, bool) and cpus > 0 else None
        listed = fact(snapshot, "nvml", "gpus", default=[])
        gpus = len(listed) if isinstance(listed, list) and listed else 1
        workers = max(2, min(16, (cpus or 8) // gpus - 1))
        where = f" ({cpus} CPUs, {gpus} GPU{'s' if gpus > 1 else ''} here)" if cpus else ""
        text = textwrap.dedent(f"""\
            ```python
            loader = DataLoader(
                dataset, batch_size=B, shuffle=True,
                num_workers={workers},            # about CPUs per GPU minus one{where}
                pin_memory=True,           # faster host-to-GPU copies (use .cuda(non_blocking=True))
                persistent_workers=True,   # no worker restart every epoch
                prefetch_factor=4,         # batches each worker keeps ready
            )
            ```
            If the disk is the bottleneck (iowait high, workers idle in D state): stage the data on a
            local SSD or in RAM (`ramdisk` fixer), or pack many small files into shards
            (WebDataset, LMDB, TFRecord) so reads are sequential.""")
        return Plan(self.id, self.title, params, (Advice(text),))


class SharingStrategy(Fixer):
    id = "sharing-strategy"
    title = "Share DataLoader tensors through files instead of file descriptors"
    params = (Param("strategy", default="file_system", choices=("file_system", "file_descriptor")),)

    def plan(self, params, snapshot):
        text = textwrap.dedent(f"""\
            At the top of the training script, before creating DataLoaders:
            ```python
            import torch.multiprocessing
            torch.multiprocessing.set_sharing_strategy("{params['strategy']}")
            ```
            `file_system` keeps one file in /dev/shm per shared tensor instead of one open file
            descriptor, so the open-files limit is no longer hit; clean /dev/shm/torch_* if a job crashed.""")
        return Plan(self.id, self.title, params, (Advice(text),))


class CudaLaunchBlocking(Fixer):
    id = "cuda-launch-blocking"
    title = "Re-run with synchronous CUDA launches to find the failing kernel"

    def plan(self, params, snapshot):
        return Plan(self.id, self.title, params, (
            SetEnv("CUDA_LAUNCH_BLOCKING", "1", why="every kernel launch waits, so the traceback points at the real op"),
            Advice("Re-run the job once with this set (it is slow: debugging only). The Python frame in the new "
                   "traceback is the operation that failed. PyTorch built from source with `TORCH_USE_CUDA_DSA=1` "
                   "also reports which device-side assertion fired."),
        ), notes=("Unset it again for normal runs: `unset CUDA_LAUNCH_BLOCKING`.",))


class NcclDebug(Fixer):
    id = "nccl-debug"
    title = "Re-run with NCCL and torch.distributed debug output"

    def plan(self, params, snapshot):
        return Plan(self.id, self.title, params, (
            SetEnv("NCCL_DEBUG", "INFO", why="NCCL prints transports, interfaces and the failing call"),
            SetEnv("NCCL_DEBUG_SUBSYS", "INIT,NET,ENV", why="focus on init, network and environment"),
            SetEnv("TORCH_DISTRIBUTED_DEBUG", "DETAIL", why="torch checks collectives match across ranks"),
            SetEnv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1", why="a failed collective aborts instead of hanging"),
            Advice("Re-run and read the first `NCCL WARN` line of every rank. To fail faster while debugging, lower "
                   "the collective timeout: `dist.init_process_group('nccl', timeout=datetime.timedelta(minutes=5))`. "
                   "`python -m torch.utils.collect_env` and `nvidia-smi topo -m` belong in a bug report."),
        ))


FIXERS = [AdviceFixer(), SetEnvFixer(), GpuMemoryAdvice(), DockerGpuFlags(), DataLoaderAdvice(), SharingStrategy(),
          CudaLaunchBlocking(), NcclDebug()]
