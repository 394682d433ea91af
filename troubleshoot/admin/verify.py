"""Verification with the job's own kind of work, each result parsed:

- a matrix product on every GPU through the installed framework (PyTorch), checked against the
  CPU's result;
- an NCCL all-reduce across the node's GPUs, where there are several;
- `dcgmi diag -r 1` where DCGM is installed (its JSON output).

Each check is a command (argv, no shell) and a parser of what it printed; a check whose tool is
missing is `skipped`, never passed."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from typing import Callable, Sequence

MATMUL = r'''
import json, sys, time
try:
    import torch
except Exception as exc:
    print(json.dumps({"error": f"no PyTorch: {exc}"})); sys.exit(0)
if not torch.cuda.is_available():
    print(json.dumps({"error": "torch.cuda.is_available() is False", "torch": torch.__version__})); sys.exit(0)
n = 4096
a = torch.randn(n, n, generator=torch.Generator().manual_seed(0))
want = (a[:64].double() @ a.double())
for i in range(torch.cuda.device_count()):
    row = {"gpu": i, "name": torch.cuda.get_device_name(i)}
    try:
        d = torch.device("cuda", i)
        x = a.to(d)
        torch.cuda.synchronize(d)
        t = time.perf_counter()
        for _ in range(10):
            y = x @ x
        torch.cuda.synchronize(d)
        s = time.perf_counter() - t
        got = y[:64].double().cpu()
        err = float(((got - want).abs().max() / want.abs().max()).item())
        row.update(ok=bool(torch.isfinite(y).all().item()) and err < 1e-2, max_rel_err=err,
                   tflops=round(10 * 2 * n ** 3 / s / 1e12, 1))
    except Exception as exc:
        row.update(ok=False, error=f"{type(exc).__name__}: {exc}")
    print(json.dumps(row), flush=True)
'''

ALLREDUCE = r'''
import json, os, sys
import torch, torch.distributed as dist, torch.multiprocessing as mp
def work(rank, world, path):
    dist.init_process_group("nccl", init_method=f"file://{path}", rank=rank, world_size=world)
    torch.cuda.set_device(rank)
    t = torch.ones(1 << 20, device="cuda") * (rank + 1)
    dist.all_reduce(t)
    torch.cuda.synchronize()
    want = world * (world + 1) / 2
    print(json.dumps({"rank": rank, "ok": bool((t == want).all().item()), "value": float(t[0].item()),
                      "want": want, "nccl": ".".join(map(str, torch.cuda.nccl.version()))}), flush=True)
    dist.destroy_process_group()
if __name__ == "__main__":
    world = torch.cuda.device_count()
    mp.spawn(work, args=(world, sys.argv[1]), nprocs=world)
'''


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # passed, failed, skipped
    detail: str
    argv: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        return {"name": self.name, "status": self.status, "detail": self.detail, "argv": list(self.argv)}


def planned(python: str, gpus: int, rendezvous: str = "<a new private folder>/rendezvous") -> list[tuple[str, tuple[str, ...]]]:
    """The checks a verification runs on a node with `gpus` GPUs, as (name, argv)."""
    out = [("matmul", (python, "-c", MATMUL))]
    if gpus > 1:
        out.append(("nccl-allreduce", (python, "-c", ALLREDUCE, rendezvous)))
    out.append(("dcgm-diag", ("dcgmi", "diag", "-r", "1", "-j")))
    return out


def parse_matmul(stdout: str) -> tuple[str, str]:
    rows = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    if not rows:
        return "failed", "the matrix product printed nothing"
    if "error" in rows[0] and "gpu" not in rows[0]:
        return "failed", rows[0]["error"]
    bad = [r for r in rows if not r.get("ok")]
    words = "; ".join(f"GPU {r['gpu']} {r.get('name', '')}: " + (f"{r['tflops']} TFLOP/s, error {r['max_rel_err']:.1e}"
                                                                  if r.get("ok") else r.get("error") or
                                                                  f"wrong result (error {r.get('max_rel_err')})")
                      for r in rows)
    return ("failed" if bad else "passed"), words


def parse_allreduce(stdout: str) -> tuple[str, str]:
    rows = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    if not rows:
        return "failed", "the all-reduce printed nothing"
    bad = [r["rank"] for r in rows if not r.get("ok")]
    nccl = rows[0].get("nccl", "?")
    if bad:
        return "failed", f"ranks {bad} got a wrong sum (NCCL {nccl})"
    return "passed", f"{len(rows)} GPUs summed right (NCCL {nccl})"


def parse_dcgm(stdout: str) -> tuple[str, str]:
    """`dcgmi diag`'s results, from its JSON (`-j`: DCGM 3's "DCGM GPU Diagnostic", DCGM 4's
    "DCGM Diagnostic", tests under test_categories) or its text table: any Fail fails the check,
    with the warnings DCGM gave; Skip and "Not Run" are said, never counted as a pass."""
    try:
        results = _dcgm_json(json.loads(stdout))
    except ValueError:
        results = _dcgm_table(stdout)
    if not results:
        return "failed", "dcgmi printed no test results"
    fails = [f"{n}: {w}".rstrip(": ") for n, st, w in results if st == "fail"]
    if fails:
        return "failed", "; ".join(fails)[:400]
    passed = [n for n, st, _ in results if st == "pass"]
    other = [f"{n} ({st})" for n, st, _ in results if st not in ("pass", "fail")]
    if not passed:
        return "failed", "no DCGM test passed: " + ", ".join(other)
    return "passed", f"{len(passed)} tests passed" + (f"; not run: {', '.join(other)}" if other else "")


def _dcgm_json(doc) -> list[tuple[str, str, str]]:
    out = []
    for test in _tests(doc):
        name = str(test.get("name") or "?")
        summary = test.get("test_summary") if isinstance(test.get("test_summary"), dict) else None
        # DCGM 4's test_summary and every per-GPU result: the worst of them is the test's
        rows = ([summary] if summary and summary.get("status") else []) + \
            [r for r in test.get("results") or [] if isinstance(r, dict) and r.get("status")]
        statuses = [str(r.get("status", "")).lower() for r in rows]
        status = "fail" if "fail" in statuses else "warn" if "warn" in statuses else \
            "pass" if statuses and all(x == "pass" for x in statuses) else (statuses[0] if statuses else "")
        words = [w.get("warning") if isinstance(w, dict) else str(w) for r in test.get("results") or []
                 if isinstance(r, dict) for w in (r.get("warnings") or [])]
        if status:
            out.append((name, status, " ".join(str(w) for w in words if w)[:200]))
    return out


def _tests(node):
    if isinstance(node, dict):
        if isinstance(node.get("tests"), list):
            yield from (t for t in node["tests"] if isinstance(t, dict))
            return
        for v in node.values():
            yield from _tests(v)
    elif isinstance(node, list):
        for v in node:
            yield from _tests(v)


_ROW = re.compile(r"^\|\s?(?P<name>[^|]*?)\s*\|(?P<cell>.*)\|$")
_SECTION = re.compile(r"^[|+]-+\s+(\w[\w ]*?)\s+-+")


def _dcgm_table(text: str) -> list[tuple[str, str, str]]:
    """The table dcgmi prints without -j: `| GPU Memory | Fail - All |`, then `| Warning | ... |`
    rows wrapped over the lines below."""
    out: list[list[str]] = []
    section, wrapping = "", False
    for line in text.splitlines():
        line = line.strip()
        head = _SECTION.match(line)
        if head:
            section, wrapping = head.group(1), False
            continue
        m = _ROW.match(line)
        if not m or section in ("", "Metadata"):
            continue
        name, cell = m.group("name"), m.group("cell")
        value = cell.strip()
        chunk = cell[1:46]  # dcgmi slices long text into 45-character pieces, mid-word too: joined as cut
        status = value.split(" - ")[0].strip().lower()
        if name in ("Warning", "Error") and out:
            out[-1][2] += (" " if out[-1][2] else "") + chunk
            wrapping = True
        elif name == "Info":
            wrapping = False
        elif name and status in ("pass", "fail", "warn", "skip", "not run"):
            out.append([name, status, ""])
            wrapping = False
        elif not name and wrapping and out and not re.match(r"GPU\d+: ", value):
            out[-1][2] += chunk
    return [(n, st, " ".join(w.split())[:200]) for n, st, w in out]


PARSERS = {"matmul": parse_matmul, "nccl-allreduce": parse_allreduce, "dcgm-diag": parse_dcgm}


def run(python: str, gpus: int, runner: Callable, timeout: float = 300) -> list[Check]:
    """Every planned check, run through `runner(argv, timeout) -> CmdResult`."""
    import tempfile

    out = []
    with tempfile.TemporaryDirectory(prefix="troubleshoot-verify-") as folder:  # 0700: the rendezvous is ours
        for name, argv in planned(python, gpus, f"{folder}/rendezvous"):
            out.append(_one(name, argv, runner, timeout))
    return out


def _one(name: str, argv: tuple[str, ...], runner: Callable, timeout: float) -> Check:
    if name == "dcgm-diag" and shutil.which("dcgmi") is None:
        return Check(name, "skipped", "DCGM is not installed (dcgmi not found)", argv)
    r = runner(list(argv), timeout)
    if r.error:
        return Check(name, "failed", r.error, argv)
    status, detail = PARSERS[name](r.stdout)
    if r.returncode not in (0, None) and status == "passed" and name != "dcgm-diag":
        status, detail = "failed", f"exit status {r.returncode}: {detail}"
    return Check(name, status, detail, argv)


def verdict(checks: Sequence[Check]) -> str:
    """passed when every check that ran passed and at least one ran; failed otherwise."""
    ran = [c for c in checks if c.status != "skipped"]
    return "passed" if ran and all(c.status == "passed" for c in ran) else "failed"
