"""The undefined-CUDA-symbol family in any library, and the nvidia-smi message variants.

Log lines are real ones from public threads (source on each); the snapshot is base.json with a
second libcudart on the loader path.
"""

import copy
import json

import pytest

from conftest import REPO, run_cli
from troubleshoot import pipeline
from troubleshoot.engine.ruleset import load_ruleset
from troubleshoot.probes.cuda import versions
from troubleshoot_fixers.extensions import RebuildExtension, owner

BASE = json.loads((REPO / "tests" / "fixtures" / "snapshots" / "base.json").read_text())

# (library the fix must name, log) — the article's case and its siblings across libraries
EXTENSION_CASES = [
    ("mmcv",  # the article's headline example, as open-mmlab/mmcv users paste it
     "ImportError: /home/u/anaconda3/envs/open-mmlab/lib/python3.8/site-packages/mmcv/_ext.cpython-38-x86_64-linux-gnu.so: "
     "undefined symbol: cudaGetErrorString"),
    ("mmcv",  # open-mmlab/mmcv#2660
     "ImportError: /data/kb/anaconda3/envs/lihua/lib/python3.8/site-packages/mmcv/_ext.cpython-38-x86_64-linux-gnu.so: "
     "undefined symbol: _ZN3c105ErrorC2ENS_14SourceLocationESs"),
    ("apex",
     "ImportError: /opt/conda/lib/python3.10/site-packages/amp_C.cpython-310-x86_64-linux-gnu.so: "
     "undefined symbol: __cudaRegisterFatBinaryEnd"),
    ("detectron2",
     "ImportError: /usr/local/lib/python3.8/dist-packages/detectron2/_C.cpython-38-x86_64-linux-gnu.so: "
     "undefined symbol: _ZN2at4cuda20getCurrentCUDAStreamEa"),
    ("flash-attn",  # Dao-AILab/flash-attention threads
     "ImportError: /usr/local/lib/python3.10/dist-packages/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so: "
     "undefined symbol: _ZN3c104cuda9SetDeviceEi"),
    ("flash-attn",
     "ImportError: /usr/local/lib/python3.10/dist-packages/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so: "
     "undefined symbol: cudaStreamGetCaptureInfo_v2"),
    (None,  # longcw/MOTDT#41: a custom extension in a source checkout
     "ImportError: /home/MOTDT-master/models/psroi_pooling/_ext/psroi_pooling/_psroi_pooling.so: "
     "undefined symbol: __cudaRegisterFatBinaryEnd"),
    (None,  # kexinyi/ns-vqa#17
     "ImportError: /home/pudu/PhD/NeSy/ns-vqa/scene_parse/mask_rcnn/lib/model/roi_pooling/_ext/roi_pooling/"
     "_roi_pooling.so: undefined symbol: cudaLaunchKernel"),
    (None,  # facebookresearch/goliath#23
     "/home/guoyang/GMS/gaussian-mesh-splatting/extensions/sgutils/sgutilslib.cpython-38-x86_64-linux-gnu.so: "
     "undefined symbol: _ZN3c104cuda9SetDeviceEi"),
]


@pytest.fixture(scope="module")
def shipped():
    return load_ruleset(use_config=False)


@pytest.mark.parametrize("package,line", EXTENSION_CASES)
def test_extension_variants_rebuild_the_named_library(package, line, shipped):
    ds = pipeline.run(None, ruleset=shipped, log_text=line + "\n").diagnoses
    assert ds and ds[0].symptom == "cuda-symbol-mismatch", [d.rule.id for d in ds]
    fix = ds[0].fixes[0]
    assert fix.fixer == "rebuild-extension"
    library = line.split(": undefined symbol")[0].split("ImportError: ")[-1]
    assert fix.params["library"] == library
    plan = RebuildExtension().plan(RebuildExtension().validate(fix.params), None)
    text = plan.actions[0].text
    assert "nm -D --undefined-only" in text and "ldd " in text and "torch.version.cuda" in text
    if package:
        assert package in plan.title
    else:
        assert "pip install --no-build-isolation -e ." in text


def test_torch_own_library_is_not_an_extension_rebuild(shipped):
    line = ("ImportError: /usr/local/lib/python2.7/dist-packages/torch/lib/libATen.so.1: "
            "undefined symbol: THNN_CudaDoubleSpatialClassNLLCriterion_updateGradInput")
    ds = pipeline.run(None, ruleset=shipped, log_text=line).diagnoses
    assert ds[0].rule.id == "torch-core-library-symbol-mismatch"


def test_versioned_cudart_symbol_is_the_loader_path(shipped):
    # Layne-Huang/PMDM#5
    line = ("ImportError: /home/anaconda3/envs/mol/lib/python3.9/site-packages/torch/lib/libtorch_cuda.so: "
            "undefined symbol: cudaLaunchKernelExC, version libcudart.so.11.0")
    ds = pipeline.run(None, ruleset=shipped, log_text=line).diagnoses
    assert ds[0].rule.id == "cudart-older-than-library-needs"
    assert "libcudart.so.11.0" in ds[0].explain


def two_cudarts():
    s = copy.deepcopy(BASE)
    s["cuda"]["ld_library_path"] = ["/usr/local/cuda-11.0/lib64", "/usr/local/cuda/lib64"]
    s["cuda"]["libraries"] = [
        {"name": "libcudart", "version": "11.0.221", "path": "/usr/local/cuda-11.0/lib64/libcudart.so.11.0",
         "source": "LD_LIBRARY_PATH"},
        {"name": "libcudart", "version": "12.4.127", "path": "/usr/local/cuda/lib64/libcudart.so.12",
         "source": "ldconfig"},
        {"name": "libcudart", "version": "12", "path": "/usr/local/cuda/lib64/libcudart.so", "source": "ldconfig"},
    ]
    s["cuda"]["conflicts"] = [{"name": "libcudart", "majors": ["11", "12"]}]
    s["cuda"].pop("versions", None)  # a snapshot saved before the derived fact existed
    return s


def test_snapshot_with_two_cudarts_names_both(tmp_path):
    snap = tmp_path / "snap.json"
    snap.write_text(json.dumps(two_cudarts()))
    log = tmp_path / "train.log"
    log.write_text(EXTENSION_CASES[0][1] + "\n")
    p = run_cli("diagnose", "--format", "json", "--snapshot", str(snap), "--log", str(log))
    assert p.returncode == 0, p.stderr
    ds = json.loads(p.stdout)["diagnoses"]
    assert ds[0]["rule"] == "cudart-two-runtimes-on-loader-path"
    assert "11.0.221" in ds[0]["explain"] and "12.4.127" in ds[0]["explain"]
    rest = {d["rule"]: d for d in ds[1:]}
    assert "11.0.221, 12.4.127" in rest["extension-cuda-symbol-undefined"]["explain"]


def test_snapshot_with_one_cudart_keeps_the_rebuild_first(tmp_path):
    snap = tmp_path / "snap.json"
    s = copy.deepcopy(BASE)
    s["cuda"]["nvcc_version"] = "11.8"  # a toolkit other than torch's CUDA 12.4
    snap.write_text(json.dumps(s))
    log = tmp_path / "train.log"
    log.write_text(EXTENSION_CASES[0][1] + "\n")
    ds = json.loads(run_cli("diagnose", "--format", "json", "--snapshot", str(snap), "--log", str(log)).stdout)["diagnoses"]
    assert ds[0]["rule"] == "extension-cuda-symbol-undefined"
    assert "2.4.1+cu124" in ds[0]["explain"] and "nvcc is CUDA 11.8" in ds[0]["explain"]


def test_versions_fold_sonames_into_releases():
    libs = [{"name": "libcudart", "version": v} for v in ("12", "12.4.127", "11.0", "11.0.221", "12.4.127")]
    libs.append({"name": "libcublas", "version": None})
    assert versions(libs) == {"libcudart": ["11.0.221", "12.4.127"]}


@pytest.mark.parametrize("path,expected", [
    ("/x/lib/python3.8/site-packages/mmcv/_ext.cpython-38-x86_64-linux-gnu.so", "mmcv"),
    ("/x/lib/python3.7/site-packages/shift_cuda_linear_cpp-0.0.0-py3.7-linux-x86_64.egg/shift_cuda.so", "shift_cuda_linear_cpp"),
    ("/home/me/apex/amp_C.cpython-310-x86_64-linux-gnu.so", None),
])
def test_owner_of_a_library(path, expected):
    assert owner(path)[0] == expected


def test_library_path_is_quoted_in_the_advice():
    fixer = RebuildExtension()
    plan = fixer.plan(fixer.validate({"library": "/tmp/a b/$(rm -rf x)/_C.so", "symbol": "cudaMalloc"}), None)
    assert "'/tmp/a b/$(rm -rf x)/_C.so'" in plan.actions[0].text


NVSMI = [
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
     "NVIDIA driver is installed and running.", "driver-not-loaded"),
    ("NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.", "driver-not-loaded"),
    ("-bash: nvidia-smi: command not found", "driver-not-loaded"),
    ("/bin/sh: 1: nvidia-smi: not found", "driver-not-loaded"),
    ("zsh: command not found: nvidia-smi", "driver-not-loaded"),
    ("'nvidia-smi' is not recognized as an internal or external command,", "driver-not-loaded"),
    ("root@134efd710933:/# nvidia-smi\nbash: nvidia-smi: command not found", "docker-gpu-missing"),
]


@pytest.mark.parametrize("line,symptom", NVSMI)
def test_nvidia_smi_variants(line, symptom, shipped):
    ds = pipeline.run(None, ruleset=shipped, log_text=line).diagnoses
    assert ds and ds[0].symptom == symptom, [d.rule.id for d in ds]
