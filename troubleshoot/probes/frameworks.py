"""Frameworks in the user's Python: torch, tensorflow, jax and the CUDA they were built for.

Everything runs in a child of the user's interpreter (the one running troubleshoot, or
`--python PATH` for a venv or conda env) with a timeout, so a slow or crashing framework
cannot hurt us. Two steps keep `troubleshoot probe` well under a second:

1. a quick child, standard library only, locates each framework without importing it and reads
   its version (and torch's CUDA/HIP build, TensorFlow's CUDA/cuDNN build) from the version
   files the packages ship; it also stamps each install (its version and entry files' times, sizes and inodes);
2. what only an import can tell (cuDNN at run time, the arch list, whether CUDA works, device
   count, NCCL) comes from a cache keyed on the interpreter, those stamps and the state of the
   machine a CUDA init depends on (driver version, boot, device nodes, *_VISIBLE_DEVICES); on a
   miss the full child imports the frameworks (seconds, as `import torch` takes) and fills it.
A reinstalled framework, a new driver or a reboot therefore re-imports once.
"""

from __future__ import annotations

import hashlib
import json
import os

from troubleshoot.probes.base import ProbeContext

TIMEOUT = 25.0
QUICK_TIMEOUT = 10.0
MARKER = "@@troubleshoot-frameworks@@"
FRAMEWORKS = ("torch", "tensorflow", "jax")

# Runs first in every child, before any import that could be looked up on sys.path. `python -c`
# puts the working folder first on sys.path, so a torch.py or json.py in whatever folder the user
# happens to be in would run (and lie about torch). -P/PYTHONSAFEPATH would do it but need Python
# 3.11, and -I or -E would also hide the user's own PYTHONPATH and site-packages, which are where
# the frameworks are. So: drop '' and relative entries (they follow the working folder), then
# leave that folder for the file system root, so nothing later resolves against it either.
ISOLATE = r'''
import sys
sys.path[:] = [p for p in sys.path if p]
import os
sys.path[:] = [p for p in sys.path if os.path.isabs(p)]
try:
    os.chdir(os.path.abspath(os.sep))
except OSError:
    pass
'''

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

# Runs in the user's interpreter without importing any framework (python -I -S would hide the
# user's site-packages, so plain -c): locate, read version files, stamp the install.
QUICK_SCRIPT = r'''
import ast, importlib.util, json, os, sys
out = {"python": sys.executable, "python_version": sys.version.split()[0], "stamps": {}}

def consts(path):
    """Top-level NAME = "literal" assignments of a version file, never executed."""
    found = {}
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
    except Exception:
        return found
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        value = getattr(node, "value", None)
        for t in targets:
            if isinstance(t, ast.Name):
                try:
                    found[t.id] = ast.literal_eval(value) if value is not None else None
                except Exception:
                    pass
    return found

def where(name):
    try:
        spec = importlib.util.find_spec(name)
    except Exception:
        return None
    if spec is None:
        return None
    locs = list(spec.submodule_search_locations or [])
    return locs[0] if locs else (os.path.dirname(spec.origin) if spec.origin else None)

def stamp(name, folder, files):
    # The files, not the folder: the folder's time moves when the first import writes its
    # __pycache__, which would make the second run import again. A reinstall writes new files
    # (another inode, change time), whatever times it sets.
    marks = [folder]
    for p in [os.path.join(folder, f) for f in files]:
        try:
            st = os.stat(p)
            marks.append([p, st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino])
        except OSError:
            marks.append([p, None])
    out["stamps"][name] = marks

d = where("torch")
if d is None:
    out["torch"] = None
else:
    v = consts(os.path.join(d, "version.py"))
    out["torch"] = {"version": v.get("__version__"), "cuda": v.get("cuda"), "hip": v.get("hip")}
    stamp("torch", d, ["version.py", "__init__.py", "_C.so"] + sorted(f for f in os.listdir(d) if f.startswith("_C.")))
d = where("tensorflow")
if d is None:
    out["tensorflow"] = None
else:
    info = {}
    b = consts(os.path.join(d, "python", "platform", "build_info.py")).get("build_info") or {}
    if isinstance(b, dict):
        info["cuda"] = b.get("cuda_version")
    try:
        from importlib.metadata import version
        for dist in ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tf-nightly"):
            try:
                info["version"] = version(dist)
                break
            except Exception:
                pass
    except Exception:
        pass
    out["tensorflow"] = info
    stamp("tensorflow", d, ["__init__.py", os.path.join("python", "platform", "build_info.py")])
d = where("jax")
if d is None:
    out["jax"] = None
else:
    info = {"version": consts(os.path.join(d, "version.py")).get("_version")}
    lib = where("jaxlib")
    if lib:
        info["jaxlib"] = consts(os.path.join(lib, "version.py")).get("_version")
    out["jax"] = info
    stamp("jax", d, ["version.py", "__init__.py"])
    if lib:
        stamp("jaxlib", lib, ["version.py"])
    plugins = where("jax_plugins")
    if plugins:
        stamp("jax_plugins", plugins, sorted(os.listdir(plugins)))
sys.stdout.write("\n" + MARKER + json.dumps(out) + "\n")
'''.replace("MARKER", repr(MARKER))

# What a CUDA init in the child depends on besides the install: the machine's side of it.
_MACHINE_FILES = ("/proc/driver/nvidia/version", "/proc/sys/kernel/random/boot_id")
_MACHINE_ENV = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
                "LD_LIBRARY_PATH", "CUDA_HOME", "XLA_FLAGS", "JAX_PLATFORMS", "TF_CPP_MIN_LOG_LEVEL")


def _child(ctx: ProbeContext, script: str, timeout: float) -> tuple[dict | None, str | None]:
    """The JSON a script printed after MARKER, or (None, why not)."""
    r = ctx.run([ctx.python, "-c", ISOLATE + script], timeout=timeout)
    if r.error:
        return None, r.error
    line = next((ln for ln in reversed(r.stdout.splitlines()) if ln.startswith(MARKER)), None)
    if line is None:
        tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or [f"exit {r.returncode}"]
        return None, f"{ctx.python} crashed while probing frameworks: {tail[0][:300]}"
    try:
        return json.loads(line[len(MARKER):]), None
    except ValueError as exc:
        return None, f"unreadable framework probe output: {exc}"


def _cache_key(ctx: ProbeContext, quick: dict) -> str:
    h = hashlib.sha256()
    h.update(json.dumps([os.path.realpath(ctx.python), quick.get("python"), quick.get("python_version"),
                         quick.get("stamps"), {k: quick.get(k) for k in FRAMEWORKS}], sort_keys=True).encode())
    for path in _MACHINE_FILES:
        h.update((ctx.read(path) or "-").encode())
    try:
        h.update(" ".join(sorted(n for n in os.listdir(ctx.path("/dev")) if n.startswith(("nvidia", "kfd")))).encode())
    except OSError:
        pass
    h.update(json.dumps({k: ctx.env.get(k) for k in _MACHINE_ENV}, sort_keys=True).encode())
    return h.hexdigest()[:32]


def probe(ctx: ProbeContext) -> dict:
    from troubleshoot import usercache

    # One entry per interpreter and machine state (the key says both); the least used go first.
    cache = usercache.Cache("frameworks", format=1, keep=16)
    quick, _ = _child(ctx, QUICK_SCRIPT, QUICK_TIMEOUT)
    key = None
    if quick is not None and not any(quick.get(k) for k in FRAMEWORKS):
        # Nothing installed: the quick look is the whole answer.
        return {"available": True, "python": quick.get("python"), "python_version": quick.get("python_version"),
                "torch": None, "tensorflow": None, "jax": None, "cached": False}
    if quick is not None:
        key = _cache_key(ctx, quick)
        blob = cache.get(key, stamp=None)
        if blob is not None:
            try:
                facts = json.loads(blob)
            except ValueError:
                facts = None
            if isinstance(facts, dict) and all(k in facts for k in FRAMEWORKS):
                facts.update(available=True, cached=True)
                return facts
    facts, error = _child(ctx, SCRIPT, TIMEOUT)
    if facts is None:
        return {"available": False, "error": error, "python": ctx.python, "torch": None, "tensorflow": None,
                "jax": None}
    facts["available"] = True
    facts["cached"] = False
    if key is not None and _consistent(quick, facts):
        cache.put(key, None, json.dumps(facts, sort_keys=True).encode())
    return facts


def _consistent(quick: dict, full: dict) -> bool:
    """Cache only what the import confirmed: the same frameworks, the same versions, and no
    import that failed (a half-installed package is worth looking at again next time)."""
    for name in FRAMEWORKS:
        q, f = quick.get(name), full.get(name)
        if (q is None) != (f is None):
            return False
        if f is None:
            continue
        if f.get("import_error") or (q.get("version") and q.get("version") != f.get("version")):
            return False
    return True
