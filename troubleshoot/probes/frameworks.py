"""Frameworks in the user's Python: torch, tensorflow, jax and the CUDA they were built for.

Imports happen in a child interpreter (the one running troubleshoot, or `--python PATH` for a
venv or conda env) with a timeout, so a slow or crashing `import torch` cannot hurt us.
"""

from __future__ import annotations

import json

from troubleshoot.probes.base import ProbeContext

TIMEOUT = 25.0
MARKER = "@@troubleshoot-frameworks@@"

# Runs in the user's interpreter: standard library only, every step guarded.
SCRIPT = r'''
import importlib.util, json, sys, traceback
out = {"python": sys.executable, "python_version": sys.version.split()[0]}

def guard(name, fn):
    if importlib.util.find_spec(name) is None:
        out[name] = None
        return
    info = {}
    try:
        fn(info)
    except BaseException as exc:
        info["import_error"] = (type(exc).__name__ + ": " + str(exc))[:500]
    out[name] = info

def torch_facts(info):
    import torch
    info["version"] = torch.__version__
    info["cuda"] = torch.version.cuda
    info["hip"] = getattr(torch.version, "hip", None)
    try:
        info["cudnn"] = torch.backends.cudnn.version()
    except Exception as exc:
        info["cudnn"] = None
    info["arch_list"] = torch.cuda.get_arch_list() if torch.version.cuda else []
    info["cuda_available"] = torch.cuda.is_available()
    info["device_count"] = torch.cuda.device_count()
    try:
        info["nccl"] = ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else None
    except Exception:
        info["nccl"] = None

def tf_facts(info):
    import tensorflow as tf
    info["version"] = tf.__version__
    build = tf.sysconfig.get_build_info()
    info["cuda"] = build.get("cuda_version")
    info["cudnn"] = build.get("cudnn_version")
    info["built_with_cuda"] = tf.test.is_built_with_cuda()
    gpus = tf.config.list_physical_devices("GPU")
    info["cuda_available"] = bool(gpus)
    info["device_count"] = len(gpus)

def jax_facts(info):
    import jax, jaxlib
    info["version"] = jax.__version__
    info["jaxlib"] = getattr(jaxlib, "__version__", None)
    try:
        info["backend"] = jax.default_backend()
        devs = jax.devices()
        info["device_count"] = len([d for d in devs if d.platform == "gpu"])
        info["cuda_available"] = info["device_count"] > 0
    except Exception as exc:
        info["backend_error"] = str(exc)[:300]
    cuda = None
    try:
        from importlib.metadata import distributions
        for d in distributions():
            name = (d.metadata.get("Name") or "").lower()
            if name.startswith("jax-cuda") and "plugin" in name:
                cuda = name.split("jax-cuda", 1)[1].split("-")[0]
    except Exception:
        pass
    info["cuda"] = cuda

guard("torch", torch_facts)
guard("tensorflow", tf_facts)
guard("jax", jax_facts)
sys.stdout.write("\n" + MARKER + json.dumps(out) + "\n")
'''.replace("MARKER", repr(MARKER))


def probe(ctx: ProbeContext) -> dict:
    r = ctx.run([ctx.python, "-c", SCRIPT], timeout=TIMEOUT)
    if r.error:
        return {"available": False, "error": r.error, "python": ctx.python, "torch": None, "tensorflow": None, "jax": None}
    line = next((ln for ln in reversed(r.stdout.splitlines()) if ln.startswith(MARKER)), None)
    if line is None:
        tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or [f"exit {r.returncode}"]
        return {"available": False, "error": f"{ctx.python} crashed while probing frameworks: {tail[0][:300]}",
                "python": ctx.python, "torch": None, "tensorflow": None, "jax": None}
    try:
        facts = json.loads(line[len(MARKER):])
    except ValueError as exc:
        return {"available": False, "error": f"unreadable framework probe output: {exc}", "python": ctx.python}
    facts["available"] = True
    return facts
