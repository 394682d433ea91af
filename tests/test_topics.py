"""Numbers in logs (per-GPU series, recent trend), the hedge lint, wrong-owner
messages, topology, MIG, the input pipeline from `run` facts, and the Nsight Systems hand-off.

Log lines are real ones from public threads (the rules' own examples name their sources)."""

import copy
import json

import pytest

from conftest import REPO, run_cli
from troubleshoot import pipeline
from troubleshoot.engine.lint import lint
from troubleshoot.engine.ruleset import load_ruleset
from troubleshoot.scan import scan_text, series_view
from troubleshoot.engine.diagnose import scan_patterns
from troubleshoot_fixers.profiling import ProfileJob

BASE = json.loads((REPO / "tests" / "fixtures" / "snapshots" / "base.json").read_text())


@pytest.fixture(scope="module")
def shipped():
    return load_ruleset(use_config=False)


def top(shipped, text, facts=None):
    ds = pipeline.run(None, ruleset=shipped, log_text=text, facts=facts).diagnoses
    return ds[0] if ds else None


def test_series_are_kept_per_key_and_show_the_climbing_one(shipped):
    rule = shipped.get("gpu-memory-allocated-keeps-growing")
    # two GPUs interleaved: GPU-0 flat, GPU-1 climbing on every sample
    lines = []
    for i in range(8):
        lines += [f"nvidia-smi GPU-0 memory (MB) {2000 + (i % 2)}", f"nvidia-smi GPU-1 memory (MB) {1400 + 10 * i}"]
    scan = scan_text("\n".join(lines) + "\n", scan_patterns([rule]))
    view = series_view(scan.get(rule.id, "log").series)
    assert view["used"]["first"] == 1400 and view["used"]["last"] == 1470
    assert view["used"]["falls"] == 0 and view["used"]["recent_rises"] == 7
    assert view["used"]["trend"] == pytest.approx(70 / 1400)
    assert top(shipped, "\n".join(lines) + "\n").symptom == "gpu-memory-leak"


def test_interleaved_flat_gpus_are_no_leak(shipped):
    lines = [f"nvidia-smi GPU-{g} memory (MB) {v}" for _ in range(8) for g, v in ((0, 2796), (1, 1494))]
    d = top(shipped, "\n".join(lines) + "\n")
    assert d is None or d.symptom != "gpu-memory-leak"


def test_tensorflow_current_memory_climbing(shipped):
    text = "".join(f"epoch 1 - it {i} - loss: 2.4\nGPU:0 memory current: {0.18 + 0.03 * i:.2f}, peak: {2.55 + 0.03 * i:.2f}\n"
                   for i in range(8))
    assert top(shipped, text).symptom == "gpu-memory-leak"


def test_megatron_table_grad_norm_nan(shipped):
    line = (" iteration     3021/  250000 | consumed samples:        24168 | learning rate: 2.999E-04 | "
            "global batch size:     8 | loss scale: 1.0 | grad norm: nan | number of skipped iterations:   0 |\n")
    assert top(shipped, line).symptom == "nan-loss"


def test_hedge_lint_flags_a_pattern_that_fires_on_hint_text(rules_dir):
    d = rules_dir({"r.yaml": """\
        - id: nouveau-from-hint
          symptom: nouveau-conflict
          title: t
          severity: error
          match:
            log: ['nouveau']
          explain: x
          examples:
            match: ['or if a driver such as rivafb, nvidiafb, or nouveau is present']
            no_match: ['all good']
        """})
    problems = [str(p) for p in lint(load_ruleset([str(d)], use_config=False))]
    assert any("nouveau-from-hint" in p and "hint wording" in p and "'such as'" in p for p in problems)


def test_hedge_lint_accepts_errors_that_carry_a_question(shipped):
    # PyTorch's "Did you run some cuda functions before ... that might have already set an error? Error 804: ..."
    assert not [p for p in lint(shipped) if "hint wording" in p.message]


def test_container_cuda_requirement_is_the_driver(shipped):
    text = ("nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.9, please update your driver "
            "to a newer version, or use an earlier cuda container: unknown\n")
    facts = copy.deepcopy(BASE)
    facts["nvml"].update(driver_version="550.54.15", cuda_driver_version="12.4")
    d = top(shipped, text, facts)
    assert d.symptom == "driver-too-old" and d.rule.id == "container-requires-newer-cuda-than-driver"
    assert "12.9" in d.explain and "550.54.15" in d.explain and "12.4" in d.explain


def test_installer_hint_listing_nouveau_is_not_a_nouveau_diagnosis(shipped):
    text = ("ERROR: Unable to load the kernel module 'nvidia.ko'.  This happens most frequently when this kernel\n"
            "sources, with a version of gcc that differs from the one used to build the target kernel, or if a driver "
            "such as rivafb, nvidiafb, or nouveau is present and prevents the NVIDIA kernel module from obtaining "
            "ownership of the NVIDIA graphics device(s)\n")
    assert top(shipped, text).symptom == "driver-not-loaded"
    lsmod = "Module                  Size  Used by\nnouveau              1601536  1\n"
    assert top(shipped, lsmod + text).symptom == "nouveau-conflict"


def test_pasted_topology_over_sys_names_the_line(shipped):
    text = ("$ nvidia-smi topo -m\n\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n"
            "GPU0\t X \tSYS\t0-127\t\tN/A\nGPU1\tSYS\t X \t0-127\t\tN/A\n")
    d = top(shipped, text)
    assert d.rule.id == "gpu-pairs-through-cpu"
    assert any(e.source == "log" and e.text.startswith("GPU0") for e in d.evidence)


def test_nvlinked_topology_is_fine(shipped):
    text = "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV4\t0-15\nGPU1\tNV4\t X \t0-15\n"
    assert top(shipped, text) is None


def test_mig_no_device(shipped):
    facts = copy.deepcopy(BASE)
    facts["nvml"]["gpus"][0]["mig_mode"] = True
    facts["env"] = {"CUDA_VISIBLE_DEVICES": "0"}
    d = top(shipped, "RuntimeError: CUDA error: no CUDA-capable device is detected\n", facts)
    assert d.rule.id == "mig-enabled-no-device-for-cuda" and "whole GPUs" in d.explain
    facts["nvml"]["gpus"][0]["mig_mode"] = False
    assert top(shipped, "RuntimeError: CUDA error: no CUDA-capable device is detected\n", facts).rule.id != \
        "mig-enabled-no-device-for-cuda"


# Only the watcher's facts: a job that succeeded is not probed (cli_run), so the rules must not need `io`.
@pytest.mark.parametrize("run,rule", [
    ({"gpu_util_avg": 41, "iowait_avg": 2, "cpu_cores_avg": 15.2, "cpu_count": 16}, "run-gpu-underused-cpu-bound-loader"),
    ({"gpu_util_avg": 38, "iowait_avg": 1, "cpu_cores_avg": 1.02, "cpu_count": 32}, "run-gpu-underused-single-core-loader"),
    ({"gpu_util_avg": 55, "iowait_avg": 18, "cpu_cores_avg": 3.0, "cpu_count": 32, "io_stall": False, "read_mb_s": 90},
     "run-gpu-underused-waiting-for-disk"),
])
def test_input_pipeline_from_run_facts(shipped, run, rule):
    facts = {"run": {"available": True, **run}}
    fired = [d.rule.id for d in pipeline.run(None, ruleset=shipped, facts=facts).diagnoses]
    assert fired and fired[0] == rule


def test_busy_gpu_is_no_input_pipeline_finding(shipped):
    facts = {"run": {"available": True, "gpu_util_avg": 96, "iowait_avg": 1, "cpu_cores_avg": 15, "cpu_count": 16}}
    assert not [d for d in pipeline.run(None, ruleset=shipped, facts=facts).diagnoses if d.symptom == "io-stall"]


def test_profile_fixer_prints_the_nsys_command_for_the_job():
    fixer = ProfileJob()
    plan = fixer.plan(fixer.validate({"command": "torchrun --nproc_per_node 8 train.py --cfg 'a b.yaml'",
                                      "name": "run 1/../x"}), None)
    text = plan.actions[0].text
    out = text.split(" -o ", 1)[1].split()[0]
    assert "/" not in out and " " not in out  # the report name is sanitised, never a path
    assert "torchrun --nproc_per_node 8 train.py --cfg 'a b.yaml'" in text
    assert "nsys stats --report" in text and "DLProf is retired" in text


def test_profile_fix_from_the_cli():
    p = run_cli("fix", "profile", "--param", "command=python train.py", "--no-probe")
    assert p.returncode == 0, p.stderr.decode()
    assert "nsys profile -t cuda,nvtx,osrt,cudnn,cublas" in p.stdout.decode()


def test_pasted_q_excerpt_at_slowdown_temperature(shipped):
    text = ("GPU 00000000:DB:00.0\n    Temperature\n        GPU Current Temp                  : 88 C\n"
            "        GPU Shutdown Temp                 : 92 C\n        GPU Slowdown Temp                 : 89 C\n")
    d = top(shipped, text)
    assert d.rule.id == "gpu-at-slowdown-temperature"
    assert any(e.source == "log" and "GPU Current Temp" in e.text for e in d.evidence)
    assert top(shipped, text.replace(": 88 C", ": 45 C")) is None


def test_probe_reads_temperature_thresholds_from_replayed_nvml():
    from troubleshoot.probes import nvml
    from troubleshoot.probes.base import ProbeContext
    from troubleshoot.paste.nvsmi_q import ReplayNVML

    dump = REPO / "tests" / "fixtures" / "machines" / "consumer-card" / "nvidia-smi-q.txt"
    g = nvml.probe(ProbeContext(nvml=ReplayNVML(dump)))["gpus"][0]
    assert g["temperature_slowdown_c"] == 95 and g["temperature_c"] == 30


DMON = """$ nvidia-smi dmon -s pucm
# gpu   pwr  gtemp  mtemp    sm   mem   enc   dec  mclk  pclk
# Idx     W      C      C     %     %     %     %   MHz   MHz
    0   410     68     71    97    88     0     0  2619  1980
    0    95     61     64    12     9     0     0  2619  1980
    0    88     60     63     8     6     0     0  2619  1980
    0   405     67     70    96    89     0     0  2619  1980
    0    90     61     64     5     4     0     0  2619  1980
    0   402     67     70    95    87     0     0  2619  1980
"""


def test_dmon_alternating_utilisation(shipped):
    assert top(shipped, DMON).rule.id == "dmon-gpu-alternates-idle-busy"
    with_data = DMON + "eta: 8:05:12  iter: 1259  total_loss: 1.012  time: 0.9322  data_time: 0.7334  lr: 0.010000\n"
    d = top(shipped, with_data)
    assert d.symptom == "io-stall"
    steady = "\n".join(DMON.splitlines()[:3] + ["    0   410     68     71    97    88     0     0  2619  1980"] * 6) + "\n"
    assert top(shipped, steady) is None


@pytest.mark.parametrize("cc,fires", [("7.0", True), ("8.0", False)])
def test_bf16_on_pre_ampere(shipped, cc, fires):
    facts = copy.deepcopy(BASE)
    facts["nvml"]["gpus"][0]["compute_capability"] = cc
    ds = pipeline.run(None, ruleset=shipped, log_text="    --bf16 True \\\n", facts=facts).diagnoses
    assert ("bf16-requested-on-pre-ampere-gpu" in [d.rule.id for d in ds]) is fires


# Advice that lists possible causes, printed under real errors by PyTorch, the NVIDIA installer and
# nvidia-smi: alone, none of it is evidence of a cause.
HINTS = [
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1.",
    "If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
    "fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
    "sources, with a version of gcc that differs from the one used to build the target kernel, or if a driver such as rivafb, "
    "nvidiafb, or nouveau is present and prevents the NVIDIA kernel module from obtaining ownership of the NVIDIA graphics "
    "device(s), or no NVIDIA GPU installed in this system is supported by this NVIDIA Linux graphics driver release.",
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
    "Make sure that the latest NVIDIA driver is installed and running.",
    "It is possible that dataloader's workers are out of shared memory. Please try to raise your shared memory limit.",
]


@pytest.mark.parametrize("hint", HINTS)
def test_hint_text_alone_is_no_diagnosis(shipped, hint):
    assert pipeline.run(None, ruleset=shipped, log_text=hint + "\n").diagnoses == []


def test_nvidia_smi_csv_loop_memory_climbing(shipped):
    rows = "index, memory.used [MiB]\n" + "".join(f"0, {1458 + 40 * i} MiB\n1, 10609 MiB\n" for i in range(8))
    assert top(shipped, rows).symptom == "gpu-memory-leak"
    flat = "index, memory.used [MiB]\n" + "0, 1458 MiB\n1, 10609 MiB\n" * 8
    d = top(shipped, flat)
    assert d is None or d.symptom != "gpu-memory-leak"
