"""Rebuilding a compiled extension (mmcv, apex, detectron2, flash-attn, a custom `_C.so`)
against the torch and CUDA that are installed now.

The library path comes from a log: it is only ever shown, shell-quoted, inside the advice; it
never reaches a shell from here.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from troubleshoot_fixers.facts import fact, printable, version_fact
from troubleshoot.values import parse_version
from troubleshoot.fixes.api import Fixer, Param
from troubleshoot.fixes.plan import Advice, Plan


@dataclass(frozen=True)
class Package:
    name: str            # what pip calls it
    modules: tuple       # import / file names that belong to it
    rebuild: str         # the rebuild command its maintainers document


# Packages whose extension users most often have to rebuild, with their documented build steps.
PACKAGES = (
    Package("mmcv", ("mmcv", "mmcv_full"),
            "pip uninstall -y mmcv mmcv-full\n"
            "pip install -U openmim && mim install mmcv      # a prebuilt wheel for this torch/CUDA when one exists\n"
            "# or from source: MMCV_WITH_OPS=1 FORCE_CUDA=1 pip install --no-build-isolation --no-cache-dir mmcv"),
    Package("apex", ("apex", "amp_C", "apex_C", "fused_layer_norm_cuda", "fused_adam_cuda", "syncbn"),
            "pip uninstall -y apex\n"
            "git clone https://github.com/NVIDIA/apex && cd apex\n"
            "pip install -v --disable-pip-version-check --no-cache-dir --no-build-isolation \\\n"
            "    --config-settings \"--build-option=--cpp_ext\" --config-settings \"--build-option=--cuda_ext\" ./"),
    Package("detectron2", ("detectron2",),
            "pip uninstall -y detectron2\n"
            "python -m pip install --no-build-isolation --no-cache-dir 'git+https://github.com/facebookresearch/detectron2.git'\n"
            "# from a checkout: rm -rf build/ **/*.so && python -m pip install --no-build-isolation -e ."),
    Package("flash-attn", ("flash_attn", "flash_attn_2_cuda", "flash_attn_cuda", "flash_attn_3"),
            "pip uninstall -y flash-attn\n"
            "pip install --no-build-isolation --no-cache-dir --force-reinstall flash-attn"),
    Package("xformers", ("xformers",),
            "pip install --force-reinstall --no-deps xformers --index-url https://download.pytorch.org/whl/cu$(python -c \"import torch; print(torch.version.cuda.replace('.', ''))\")"),
    Package("mamba-ssm", ("mamba_ssm", "selective_scan_cuda"),
            "pip install --no-build-isolation --no-cache-dir --force-reinstall mamba-ssm"),
    Package("causal-conv1d", ("causal_conv1d", "causal_conv1d_cuda"),
            "pip install --no-build-isolation --no-cache-dir --force-reinstall causal-conv1d"),
    Package("torch-scatter", ("torch_scatter",),
            "pip install --force-reinstall torch-scatter -f https://data.pyg.org/whl/torch-$(python -c \"import torch; print(torch.__version__)\").html"),
    Package("torch-sparse", ("torch_sparse",),
            "pip install --force-reinstall torch-sparse -f https://data.pyg.org/whl/torch-$(python -c \"import torch; print(torch.__version__)\").html"),
    Package("bitsandbytes", ("bitsandbytes",), "pip install --force-reinstall --no-cache-dir bitsandbytes"),
)
_SITE = re.compile(r"/(?:site|dist)-packages/([^/]+)")


def owner(library: str) -> tuple[str | None, Package | None]:
    """(the installed package directory or module, the known package) a .so path belongs to;
    (None, None) for a library outside site-packages (a source checkout)."""
    m = _SITE.search(library)
    if not m:
        stem = library.rsplit("/", 1)[-1].split(".")[0]
        return None, next((p for p in PACKAGES if stem in p.modules), None)
    top = m.group(1)
    name = re.split(r"[-.]", top, maxsplit=1)[0]  # "shift_cuda-0.0.0-py3.7.egg" -> "shift_cuda"
    return name, next((p for p in PACKAGES if name in p.modules), None)


def _safe(text: str) -> str:
    return "".join(ch for ch in text if ch.isprintable())


class RebuildExtension(Fixer):
    id = "rebuild-extension"
    title = "Rebuild a compiled extension against the installed torch and CUDA"
    params = (
        Param("library", help="the .so named in the error"),
        Param("symbol", help="the undefined symbol"),
    )
    needs_snapshot = True

    def plan(self, params, snapshot):
        library = _safe(params.get("library") or "")
        lib = shlex.quote(library) if library else "<the .so from the error>"
        name, pkg = owner(library) if library else (None, None)
        # Facts go into commands the user pastes: versions only, anything else is left out.
        torch_v = printable(fact(snapshot, "frameworks", "torch", "version") or "")[:40]
        torch_cuda = version_fact(snapshot, "frameworks", "torch", "cuda")
        nvcc = version_fact(snapshot, "cuda", "nvcc_version")

        lines = ["**Check** what the library was built for and what it finds now:", "```bash",
                 'python -c "import torch; print(torch.__version__, torch.version.cuda)"',
                 "nvcc --version | tail -2; echo \"CUDA_HOME=$CUDA_HOME\"",
                 f"ldd {lib} | grep -E 'cuda|torch|c10'",
                 f"nm -D --undefined-only {lib} | grep -i cuda", "```"]
        if torch_v:
            lines.append(f"Installed: torch {torch_v} for CUDA {torch_cuda or '(CPU build)'}"
                         + (f"; nvcc {nvcc}." if nvcc else "; no nvcc found (needed to build from source)."))
        if torch_cuda and nvcc and parse_version(str(nvcc)) and parse_version(str(torch_cuda)) \
                and str(nvcc).split(".")[0] != str(torch_cuda).split(".")[0]:
            lines.append(f"nvcc ({nvcc}) and torch's CUDA ({torch_cuda}) differ in major version: install the "
                         f"CUDA {torch_cuda} toolkit and `export CUDA_HOME=/usr/local/cuda-{torch_cuda}` first.")
        lines += ["", "**Rebuild** it against this torch (build isolation off, so the build sees it):", "```bash"]
        if pkg:
            lines.append(pkg.rebuild)
        elif name:
            lines.append(f"pip install --no-build-isolation --no-cache-dir --force-reinstall {shlex.quote(name)}"
                         "   # the package that installed it, if its pip name differs")
        else:
            lines.append("cd <the source checkout that built it>     # the folder with setup.py above the .so")
            lines.append("rm -rf build/ *.egg-info && python setup.py clean --all")
            lines.append("pip install --no-build-isolation -e .      # or: python setup.py build_ext --inplace")
        module = name or (pkg.modules[0] if pkg else "your_extension")
        lines += ["```", f"Then `python -c \"import torch; import {module}\"` (import torch first)."]
        title = f"Rebuild {pkg.name if pkg else name or 'the extension'} against the installed torch and CUDA"
        return Plan(self.id, title, params, (Advice("\n".join(lines)),))


FIXERS = [RebuildExtension()]
