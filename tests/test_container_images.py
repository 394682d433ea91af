"""The container image a pasted command, script or manifest runs, read as `container.*` facts,
and the image weighed against the host's driver before the job runs (rules/images.yaml)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from conftest import REPO, run_cli
from troubleshoot import paste
from troubleshoot.paste.images import normalise, resolve

BASE = REPO / "tests" / "fixtures" / "snapshots" / "base.json"
TABLE = REPO / "troubleshoot" / "data" / "container-images.yaml"
NEEDS_DRIVER = "container-image-needs-newer-driver"
MINOR_COMPAT = "container-image-minor-version-compat"


def container(text: str) -> dict | None:
    """The container facts a paste gives, with the 1-based line and text that showed the image."""
    got = paste.read(text)
    facts = got.facts.get("container")
    return None if facts is None else dict(facts, line=got.lines["container.image"])


# ------------------------------------------------------------------------ the forms that name an image

@pytest.mark.parametrize("text,image,cuda,source", [
    # docker run, its options skipped (values of -v, -e, --shm-size, --name; --ipc=host; -it)
    ("$ docker run --gpus all --rm -it -v /data:/data -e WANDB_MODE=offline --shm-size 16g --ipc=host --name job "
     "pytorch/pytorch:2.0.1-cuda12.1-cudnn8-runtime python train.py",
     "pytorch/pytorch:2.0.1-cuda12.1-cudnn8-runtime", "12.1", "tag"),
    ("sudo nvidia-docker run --rm nvidia/cuda:11.0.3-base-ubuntu20.04 nvidia-smi",
     "nvidia/cuda:11.0.3-base-ubuntu20.04", "11.0", "tag"),
    # Podman with CDI
    ("podman run --rm --device nvidia.com/gpu=all --security-opt=label=disable nvcr.io/nvidia/tritonserver:23.05-py3 "
     "tritonserver --model-repository=/models", "nvcr.io/nvidia/tritonserver:23.05-py3", "12.1", "ngc"),
    # a Dockerfile, and `docker build` printing its FROM (classic and BuildKit)
    ("FROM nvcr.io/nvidia/pytorch:21.10-py3\nRUN pip install -r requirements.txt",
     "nvcr.io/nvidia/pytorch:21.10-py3", "11.4", "ngc"),
    ("Step 1/8 : FROM nvidia/cuda:11.8.0-cudnn8-devel-ubuntu22.04\n ---> 3b8a4f5c2d1e",
     "nvidia/cuda:11.8.0-cudnn8-devel-ubuntu22.04", "11.8", "tag"),
    ("#5 [1/4] FROM docker.io/pytorch/pytorch:2.1.0-cuda12.1-cudnn8-devel@sha256:"
     "1f0f4ac4ba0f62ba1a5f7b95e5e4a4bb8d6d25a6bba4cbd7f3c6c5f2b2d1e0a9",
     "docker.io/pytorch/pytorch:2.1.0-cuda12.1-cudnn8-devel@sha256:"
     "1f0f4ac4ba0f62ba1a5f7b95e5e4a4bb8d6d25a6bba4cbd7f3c6c5f2b2d1e0a9", "12.1", "tag"),
    # Slurm with pyxis, in a batch script and on the command line
    ("#SBATCH --container-image=nvcr.io#nvidia/tensorflow:23.01-tf2-py3\nsrun python train.py",
     "nvcr.io#nvidia/tensorflow:23.01-tf2-py3", "12.0", "ngc"),
    # enroot and Singularity/Apptainer with docker://
    ("enroot import -o /scratch/tf.sqsh docker://nvcr.io#nvidia/tensorflow:22.10-tf2-py3",
     "nvcr.io#nvidia/tensorflow:22.10-tf2-py3", "11.8", "ngc"),
    ("singularity pull docker://nvidia/cuda:12.4.1-base-ubuntu22.04",
     "nvidia/cuda:12.4.1-base-ubuntu22.04", "12.4", "tag"),
    ("apptainer exec --nv docker://ghcr.io/acme/trainer:v3-cu118 python train.py",
     "ghcr.io/acme/trainer:v3-cu118", "11.8", "tag"),
    # Compose and Kubernetes manifests
    ("services:\n  trainer:\n    image: tensorflow/tensorflow:2.15.0-gpu\n    deploy:\n",
     "tensorflow/tensorflow:2.15.0-gpu", "12.2", "tensorflow"),
    ("    containers:\n    - name: train\n      image: \"tensorflow/tensorflow:1.15.5-gpu-py3\"  # pinned\n",
     "tensorflow/tensorflow:1.15.5-gpu-py3", "10.0", "tensorflow"),
    ("kubectl run smoke --rm -it --image=nvcr.io/nvidia/tritonserver:22.12-py3 --restart=Never -- nvidia-smi",
     "nvcr.io/nvidia/tritonserver:22.12-py3", "11.8", "ngc"),
])
def test_each_form_names_the_image_and_its_cuda(text, image, cuda, source):
    got = container(text)
    assert got["image"] == image
    assert (got["image_cuda"], got["image_cuda_source"]) == (cuda, source)
    assert image in got["line"][1]


def test_a_command_on_several_lines_names_the_line_with_the_image():
    text = ("job starting\n"
            "docker run --gpus all \\\n"
            "    -v $PWD:/workspace \\\n"
            "    pytorch/pytorch:2.4.1-cuda12.4-cudnn9-runtime \\\n"
            "    python /workspace/train.py\n")
    got = container(text)
    assert got["image"] == "pytorch/pytorch:2.4.1-cuda12.4-cudnn9-runtime"
    assert got["line"] == (4, "pytorch/pytorch:2.4.1-cuda12.4-cudnn9-runtime \\")


def test_the_minimum_driver_is_the_cuda_release_s_or_the_ngc_release_s_if_newer():
    tag = container("docker run --gpus all pytorch/pytorch:2.0.1-cuda12.1-cudnn8-runtime python train.py")
    assert (tag["image_min_driver"], tag["image_min_driver_compat"]) == ("525.60.13", "525.60.13")
    ngc = container("docker run --gpus all nvcr.io/nvidia/tritonserver:23.12-py3")
    assert (ngc["image_cuda"], ngc["image_min_driver"], ngc["image_min_driver_compat"]) == ("12.3", "545", "525.60.13")
    # NVIDIA's notes for Triton 25.08 state 575 for CUDA 13.0, older than CUDA 13.0 itself needs
    assert container("docker run nvcr.io/nvidia/tritonserver:25.08-py3")["image_min_driver"] == "580"
    old = container("docker pull nvcr.io/nvidia/pytorch:19.11-py3")
    assert (old["image_cuda"], old["image_min_driver"], old["image_min_driver_compat"]) == ("10.2", "440.33", "440.33")


def test_forward_compatible_branches_come_with_the_image():
    ngc = container("docker run nvcr.io/nvidia/tritonserver:23.08-py3")
    assert [b["floor"] for b in ngc["image_forward_compat"]] == ["450.51", "470.57", "510.47", "525.85", "535.86"]
    assert ngc["image_forward_compat"][1] == {"branch": "470", "floor": "470.57", "below": "471"}
    # an image that is no NGC one: the branches NVIDIA lists for the same CUDA release
    tag = container("docker run pytorch/pytorch:2.0.1-cuda12.1-cudnn8-runtime")
    assert {"branch": "470", "floor": "470.57", "below": "471"} in tag["image_forward_compat"]
    # a release whose notes carried an older release's list has none
    assert "image_forward_compat" not in container("docker run nvcr.io/nvidia/tritonserver:25.03-py3")


@pytest.mark.parametrize("line,image", [
    ("podman run --device nvidia.com/gpu=all nvcr.io/nvidia/pytorch:24.05-py3",  # a release not in the table
     "nvcr.io/nvidia/pytorch:24.05-py3"),
    ("srun --container-image=nvcr.io#nvidia/pytorch:24.01-py3 python train.py", "nvcr.io#nvidia/pytorch:24.01-py3"),
    ("docker run --gpus all pytorch/pytorch:latest python train.py", "pytorch/pytorch:latest"),
    ("docker run --gpus all nvcr.io/nvidia/pytorch:21.10-py3-igpu python train.py",  # a variant not read
     "nvcr.io/nvidia/pytorch:21.10-py3-igpu"),
    ("docker run --gpus all tensorflow/tensorflow:latest-gpu", "tensorflow/tensorflow:latest-gpu"),
    ("docker run --gpus all ghcr.io/acme/llm:cu12", "ghcr.io/acme/llm:cu12"),  # a major release only
])
def test_an_unknown_tag_gives_the_image_without_a_cuda(line, image):
    got = container(f"launching\n{line}\n")
    assert {k: v for k, v in got.items() if k != "line"} == {"available": True, "image": image}


def test_the_last_image_run_wins():
    text = ("FROM nvcr.io/nvidia/pytorch:21.09-py3\n"
            "docker pull nvidia/cuda:12.4.1-base-ubuntu22.04\n"
            "docker run --gpus all pytorch/pytorch:1.13.1-cuda11.6-cudnn8-runtime python a.py\n"
            "docker run --gpus all pytorch/pytorch:2.0.1-cuda11.7-cudnn8-runtime python b.py\n"
            "docker pull nvidia/cuda:12.2.0-base-ubuntu22.04\n")
    assert container(text)["image"] == "pytorch/pytorch:2.0.1-cuda11.7-cudnn8-runtime"
    # two commands on one line
    assert container("docker pull nvidia/cuda:12.2.0-base-ubuntu22.04 && docker run --gpus all "
                     "nvidia/cuda:11.8.0-base-ubuntu22.04 nvidia-smi\n")["image"] == "nvidia/cuda:11.8.0-base-ubuntu22.04"
    # with nothing run, the last image named
    assert container("FROM nvidia/cuda:11.8.0-base-ubuntu22.04\ndocker pull nvidia/cuda:12.2.0-base-ubuntu22.04\n")[
        "image"] == "nvidia/cuda:12.2.0-base-ubuntu22.04"


@pytest.mark.parametrize("text", [
    # an image tag in prose
    "We tried pytorch/pytorch:2.0.1-cuda12.1-cudnn8-runtime and nvcr.io/nvidia/pytorch:23.10-py3, same error.",
    "The image: pytorch/pytorch:2.0.1-cuda12.1-cudnn8-runtime was pulled yesterday",
    # FROM and import in a Python traceback, SQL in an error
    ("Traceback (most recent call last):\n"
     '  File "/app/db.py", line 12, in <module>\n'
     "    from torch.utils.data import DataLoader\n"
     '    cur.execute("SELECT tag FROM images WHERE name = \'pytorch/pytorch:2.0.1\'")\n'
     "sqlite3.OperationalError: no such table: images\n"),
    "psycopg2.errors.UndefinedTable: relation \"x\" does not exist\nLINE 1: SELECT * FROM nvcr.io/nvidia/pytorch:23.10-py3 AS x\n",
    # an image a variable names, a stage name, a flag that only looks like one
    "docker run --gpus all $IMAGE python train.py",
    "FROM ${BASE_IMAGE}\nFROM builder AS runtime",
    "python train.py --image-size 224 --container-image-cache /tmp",
    "Input image: torch.Size([3, 224, 224])",
    "docker run --help",
])
def test_a_near_miss_names_no_image(text):
    assert container(text) is None


@pytest.mark.parametrize("written,ref", [
    ("docker://nvcr.io#nvidia/pytorch:24.03-py3", "nvcr.io/nvidia/pytorch:24.03-py3"),
    ("docker://$oauthtoken@nvcr.io#nvidia/pytorch:24.03-py3", "nvcr.io/nvidia/pytorch:24.03-py3"),  # enroot's user
    ("alice@nvcr.io#nvidia/pytorch:24.03-py3", "nvcr.io/nvidia/pytorch:24.03-py3"),
    ("docker:nvcr.io/nvidia/pytorch:24.03-py3", "nvcr.io/nvidia/pytorch:24.03-py3"),  # Shifter
    ("localhost:5000/train:cu121", "localhost:5000/train:cu121"),
    ("ubuntu", None),
    ("/scratch/pytorch.sqsh", None),
])
def test_references_are_normalised_as_the_tools_write_them(written, ref):
    assert normalise(written) == ref


def test_registries_are_told_apart():
    assert resolve("registry.example.com/nvidia/cuda:12.1.0-base") is None  # not NVIDIA's image
    assert resolve("nvcr.io/nvidia/cuda:12.1.0-devel-ubuntu22.04").major_minor == "12.1"
    assert resolve("index.docker.io/tensorflow/tensorflow:2.16.2-gpu").cuda == "12.3"


# ------------------------------------------------------------------------ the table

def test_the_table_holds_what_its_header_counts_and_reads_as_versions():
    import yaml

    from troubleshoot.values import parse_version

    data = yaml.safe_load(TABLE.read_text())
    header = TABLE.read_text().split("\nngc:")[0]
    counts = {k: len(v) for k, v in data["ngc"].items()}
    m = re.search(r"Rows: ngc (\d+) \(([^)]*)\), tensorflow (\d+)", " ".join(header.replace("#", " ").split()))
    assert int(m[1]) == sum(counts.values()) and int(m[3]) == len(data["tensorflow"])
    assert dict((name, int(n)) for n, name in (part.split(" ")[::-1] for part in m[2].split(", "))) == counts
    for rows in data["ngc"].values():
        for release, row in rows.items():
            assert re.fullmatch(r"\d\d\.\d\d(\.\d+)?", release) and set(row) <= {"cuda", "driver", "compat", "notes"}
            assert all(parse_version(v) for v in [row["cuda"], row.get("driver", "1"), *row.get("compat", [])])
            branches = [c.split(".")[0] for c in row.get("compat", [])]
            assert len(branches) == len(set(branches)), release
    assert all(re.fullmatch(r"\d+\.\d+", k) and re.fullmatch(r"\d+\.\d+", v) for k, v in data["tensorflow"].items())


# ------------------------------------------------------------------------ the rules, through the real CLI

def snapshot(tmp_path, driver: str, cuda: str, gpu: str | None = None):
    snap = json.loads(BASE.read_text())
    snap["nvml"].update(driver_version=driver, cuda_driver_version=cuda, nvml_version=f"{cuda.split('.')[0]}.{driver}")
    snap["kernel"]["nvidia_module_version"] = driver  # the same driver, as on a real host
    if gpu:
        snap["nvml"]["gpus"][0]["name"] = gpu
    path = tmp_path / f"snap-{driver}.json"
    path.write_text(json.dumps(snap))
    return path


def diagnose(tmp_path, log_text: str, snap) -> dict:
    log = tmp_path / "job.log"
    log.write_text(log_text)
    p = run_cli("diagnose", "--log", str(log), "--snapshot", str(snap), "--format", "json")
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    return json.loads(p.stdout)


RUN_121 = ("+ docker run --gpus all --rm -v /home/ana/proj:/work pytorch/pytorch:2.0.1-cuda12.1-cudnn8-runtime "
           "python /work/train.py\n")


def test_an_image_for_a_newer_driver_is_the_top_diagnosis(tmp_path):
    out = diagnose(tmp_path, RUN_121, snapshot(tmp_path, "470.82.01", "11.4"))
    top = out["diagnoses"][0]
    assert top["rule"] == NEEDS_DRIVER and top["severity"] == "error" and top["symptom"] == "driver-too-old"
    assert "pytorch/pytorch:2.0.1-cuda12.1-cudnn8-runtime" in top["title"]
    assert "525.60.13" in top["title"] and "470.82.01" in top["title"]
    assert "CUDA 12.1" in top["explain"] and "11.4, or older" in top["explain"]  # the tag the driver runs
    assert any(e["source"] == "log" and "docker run" in e["text"] for e in top["evidence"])
    assert out["log_facts"]["container.image_min_driver"] == "525.60.13"
    # the base snapshot's GPU is an A100 and R470 serves CUDA 12.1 through forward compatibility
    assert "cuda-compat" in top["explain"] and top["confidence"] == 0.95
    assert "{" not in top["title"] + top["explain"].replace("{{.Config.Env}}", "")


def test_a_driver_that_runs_the_image_gives_no_such_diagnosis(tmp_path):
    out = diagnose(tmp_path, RUN_121, snapshot(tmp_path, "535.104.05", "12.2"))
    assert not [d for d in out["diagnoses"] if d["rule"] in (NEEDS_DRIVER, MINOR_COMPAT)], out["diagnoses"]


def test_no_forward_compatibility_note_on_a_geforce(tmp_path):
    out = diagnose(tmp_path, RUN_121, snapshot(tmp_path, "470.82.01", "11.4", gpu="NVIDIA GeForce RTX 3090"))
    top = out["diagnoses"][0]
    assert top["rule"] == NEEDS_DRIVER and "cuda-compat" not in top["explain"]


def test_an_ngc_image_is_judged_by_its_release_notes(tmp_path):
    log = "srun --container-image=nvcr.io#nvidia/tritonserver:23.05-py3 tritonserver --model-repository=/models\n"
    geforce = diagnose(tmp_path, log, snapshot(tmp_path, "470.82.01", "11.4", gpu="NVIDIA GeForce RTX 3090"))
    d = next(d for d in geforce["diagnoses"] if d["rule"] == NEEDS_DRIVER)
    assert "NVIDIA driver 530 or newer" in d["title"] and d["confidence"] == 0.95
    # on an A100 with R470 the container turns forward compatibility on itself: less sure
    a100 = diagnose(tmp_path, log, snapshot(tmp_path, "470.82.01", "11.4"))
    d = next(d for d in a100["diagnoses"] if d["rule"] == NEEDS_DRIVER)
    assert d["confidence"] == 0.65 and "start-up banner" in d["explain"]


def test_within_one_major_the_image_runs_by_minor_version_compatibility(tmp_path):
    # Triton 23.12 is built on CUDA 12.3; its notes ask for 545, and R535 runs 12.x from 525.60.13 on
    out = diagnose(tmp_path, "docker run --gpus all nvcr.io/nvidia/tritonserver:23.12-py3 tritonserver\n",
                   snapshot(tmp_path, "535.104.05", "12.2"))
    rules = [d["rule"] for d in out["diagnoses"]]
    assert NEEDS_DRIVER not in rules
    d = next(d for d in out["diagnoses"] if d["rule"] == MINOR_COMPAT)
    assert d["severity"] == "info" and "unsupported" in d["explain"] and "545" in d["explain"]


def test_an_unknown_release_gives_the_image_and_no_verdict(tmp_path):
    out = diagnose(tmp_path, "podman run --device nvidia.com/gpu=all nvcr.io/nvidia/pytorch:24.05-py3\n",
                   snapshot(tmp_path, "470.82.01", "11.4"))
    assert out["log_facts"] == {"container.image": "nvcr.io/nvidia/pytorch:24.05-py3"}
    assert not [d for d in out["diagnoses"] if d["rule"] in (NEEDS_DRIVER, MINOR_COMPAT)]


# ------------------------------------------------------------------------ what a start loads

LOADED = ("import sys\nfrom troubleshoot import cli\nsys.argv = ['troubleshoot'] + sys.argv[1:]\n"
          "try:\n    cli.main()\nexcept SystemExit:\n    pass\n"
          "sys.stderr.write('\\nIMAGES=' + str('troubleshoot.paste.images' in sys.modules))\n")


@pytest.mark.parametrize("text,loaded", [
    ("step 1 loss 2.31\nstep 2 loss 2.20\nRuntimeError: CUDA error: out of memory\n", False),
    ("We used pytorch/pytorch:2.0.1-cuda12.1-cudnn8-runtime\nRuntimeError: CUDA error: out of memory\n", False),
    (RUN_121 + "RuntimeError: CUDA error: out of memory\n", True),
])
def test_the_parser_is_imported_only_for_a_log_with_its_needles(tmp_path, text, loaded):
    log = tmp_path / "job.log"
    log.write_text(text)
    p = subprocess.run([sys.executable, "-c", LOADED, "diagnose", "--no-probe", "--format", "json", "--log", str(log)],
                       capture_output=True, cwd=REPO, timeout=120, check=False)
    assert p.stderr.decode().rpartition("IMAGES=")[2].strip() == str(loaded), p.stderr.decode()[-2000:]

