"""`troubleshoot run` at its edges: a job named without `--`, the job's command handed to the
profiling plan, the mixed-precision advice that follows the GPUs' compute capability, and live
warnings that name the rule and symptom the final diagnosis names. Real processes through the
real CLI; every wait is on an event (a FIFO the job reads, the job's exit)."""

import json
import os
import re
import shlex
import subprocess
import sys

import pytest

from conftest import REPO, run_cli, run_main

PLACEHOLDER = re.compile(r"\{[A-Za-z_][\w.]*\}")  # text a template failed to fill in


def job_argv(*args: str) -> list[str]:
    """A job that prints the arguments it got, one JSON line."""
    return [sys.executable, "-c", "import json, sys; print(json.dumps(sys.argv[1:]))", *args]


# ------------------------------------------------------------------ the job without `--`

def test_a_job_named_without_dashes_runs_with_its_own_options(tmp_path):
    log = tmp_path / "job.log"
    p = run_cli("run", "--no-probe", "--no-watch", "--log-to", str(log), sys.executable, "-V")
    assert p.returncode == 0, p.stderr.decode()
    assert p.stdout.startswith(b"Python 3.")  # `troubleshoot run python -V` runs `python -V`
    assert log.read_bytes().startswith(b"Python 3.")


def test_every_word_from_the_jobs_first_is_the_jobs_own_options_of_run_included(tmp_path):
    log = tmp_path / "job.log"
    p = run_cli("run", "--no-probe", "--no-watch", "--quiet", "--log-to", str(log),
                *job_argv("-V", "--quiet", "--log-to", "elsewhere.log", "--", "--format", "json"))
    assert p.returncode == 0, p.stderr.decode()
    assert json.loads(p.stdout) == ["-V", "--quiet", "--log-to", "elsewhere.log", "--", "--format", "json"]
    assert log.exists() and not (REPO / "elsewhere.log").exists()  # run's own --log-to is the one before


def test_the_job_after_dashes_still_runs_and_keeps_a_dash_dash_of_its_own(tmp_path):
    log = tmp_path / "job.log"
    p = run_cli("run", "--no-probe", "--no-watch", "--log-to", str(log), "--", *job_argv("--", "-x"))
    assert p.returncode == 0, p.stderr.decode()
    assert json.loads(p.stdout) == ["--", "-x"]


@pytest.mark.parametrize("args, word", [
    (["-V"], "-V"),
    (["--nproc", "8", "python", "train.py"], "--nproc"),
    (["--no-probe", "--bogus=3", "python", "train.py"], "--bogus=3"),
])
def test_an_option_before_the_job_that_run_does_not_know_says_to_put_the_job_after_dashes(tmp_path, args, word):
    p = run_main("run", "--log-to", str(tmp_path / "job.log"), *args)
    err = p.stderr.decode()
    assert p.returncode == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"troubleshoot: error: {word} is not an option of run")
    assert "put the job after `--`: troubleshoot run [run options] -- CMD [ARG ...]" in err
    assert not (tmp_path / "job.log").exists()  # nothing ran


def test_a_mistyped_option_of_run_is_named():
    p = run_main("run", "--no-porbe", "python", "train.py")
    assert p.returncode == 2 and "(did you mean --no-probe?)" in p.stderr.decode()


@pytest.mark.parametrize("args", [[], ["--quiet"], ["--"], ["--no-probe", "--"]])
def test_run_without_a_job_is_a_one_line_error(args):
    p = run_main("run", *args)
    assert p.returncode == 2
    assert p.stderr.decode() == "troubleshoot: error: run needs a command: troubleshoot run -- python train.py ...\n"


# ------------------------------------------------------------------ the job's command, handed over

# What `prof.key_averages().table()` prints when the DataLoader holds most of the profiled time
# (MLforHealth/ClinicalDG#2, as rule torch-profiler-dataloader-dominates quotes it): that rule
# hands the job over to the profiler.
PROFILED = r"""
import sys
print("Name    Self CPU %      Self CPU   CPU total %     CPU total  CPU time avg")
print("enumerate(DataLoader)#_SingleProcessDataLoaderIter._...        88.64%       78.632s        89.18%       79.116s     791.161ms       0.000us         0.00%       0.000us       0.000us           100  ")
"""


def _preview(stderr: str, rule: str) -> list[str]:
    line = next(ln for ln in stderr.splitlines() if ln.strip().startswith(f"preview: troubleshoot fix --rule {rule}"))
    return shlex.split(line.split("preview: ", 1)[1].split("   (add --apply")[0])


def test_the_fix_preview_of_a_run_profiles_this_jobs_command_in_its_folder(tmp_path):
    job = tmp_path / "train job.py"
    job.write_text(PROFILED)
    argv = [sys.executable, job.name, "--note", "it's two words", "--lr=3e-4"]
    log = tmp_path / "logs" / "train.log"
    p = subprocess.run([sys.executable, "-m", "troubleshoot", "run", "--no-watch", "--log-to", str(log), *argv],
                       capture_output=True, cwd=tmp_path, timeout=120)
    err = p.stderr.decode()
    assert p.returncode == 0, err
    snapshot = log.with_name("train.log.snapshot.json")
    words = _preview(err, "torch-profiler-dataloader-dominates")
    assert words[words.index("--snapshot") + 1] == str(snapshot)
    assert oct(snapshot.stat().st_mode & 0o777) == "0o600"  # the command line may carry a token
    assert json.loads(snapshot.read_text())["job"] == {"command": argv, "cwd": str(tmp_path)}

    fixed = run_cli(*words[1:], "--format", "json", cwd=tmp_path)  # the preview, as the user copies it
    assert fixed.returncode == 0, fixed.stderr.decode()
    plan = next(pl for pl in json.loads(fixed.stdout)["plans"] if pl["fixer"] == "profile")
    text = plan["steps"][0]["text"]
    assert f"cd {shlex.quote(str(tmp_path))}\nnsys profile " in text
    assert f" \\\n    {shlex.join(argv)}\n```" in text  # quoted as a shell reads it back
    assert shlex.split(text.split(" \\\n    ", 1)[1].split("\n", 1)[0]) == argv
    assert "<your training command>" not in text and not PLACEHOLDER.search(text)


def test_the_run_snapshot_records_the_command_of_a_watched_job_that_failed(tmp_path):
    log = tmp_path / "job.log"
    argv = [sys.executable, "-c", "import sys; print('RuntimeError: CUDA error: out of memory'); sys.exit(3)"]
    p = run_cli("run", "--no-probe", "--interval", "0.05", "--log-to", str(log), *argv)
    assert p.returncode == 3, p.stderr.decode()
    snap = json.loads((tmp_path / "job.log.snapshot.json").read_text())
    assert snap["schema"] == 1 and snap["job"] == {"command": argv, "cwd": str(REPO)}
    assert "--snapshot" in _preview(p.stderr.decode(), "")


def test_without_a_recorded_command_the_profiling_plan_says_what_to_put_there():
    p = run_main("fix", "profile", "--no-probe", "--format", "json")
    plan = json.loads(p.stdout)["plans"][0]
    text = plan["steps"][0]["text"]
    assert "    <your training command>\n```" in text and not PLACEHOLDER.search(text)
    assert any("in place of <your training command>" in n and "--param command=" in n for n in plan["notes"])


def test_a_recorded_command_with_a_line_break_is_not_copied_as_if_it_were_the_jobs(tmp_path):
    snap = tmp_path / "s.json"
    snap.write_text(json.dumps({"schema": 1, "job": {"command": ["python", "train.py", "--tag", "a\nb"],
                                                     "cwd": "/tmp"}}))
    p = run_main("fix", "profile", "--snapshot", str(snap), "--format", "json")
    plan = json.loads(p.stdout)["plans"][0]
    assert "<your training command>" in plan["steps"][0]["text"] and "cd /tmp" not in plan["steps"][0]["text"]
    assert any("line break" in n for n in plan["notes"])


# ------------------------------------------------------------------ mixed precision from the facts

BASE = json.loads((REPO / "tests" / "fixtures" / "snapshots" / "base.json").read_text())  # one A100 (8.0)


def _with_gpus(tmp_path, *gpus: tuple[str, str | None]):
    snap = json.loads(json.dumps(BASE))
    model = snap["nvml"]["gpus"][0]
    snap["nvml"]["gpus"] = [{**model, "index": i, "name": name, "compute_capability": cc}
                            for i, (name, cc) in enumerate(gpus)]
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(snap))
    return ["--snapshot", str(path)]


def _advice(*args: str) -> str:
    p = run_main("fix", "gpu-memory-advice", *args, "--format", "json")
    assert p.returncode == 0, p.stderr.decode()
    return json.loads(p.stdout)["plans"][0]["steps"][0]["text"]


def test_bf16_without_a_grad_scaler_where_every_gpu_is_ampere_or_newer(tmp_path):
    text = _advice(*_with_gpus(tmp_path, ("NVIDIA A100-SXM4-80GB", "8.0"), ("NVIDIA H100 80GB HBM3", "9.0")))
    assert 'torch.autocast("cuda", dtype=torch.bfloat16)' in text and "no GradScaler" in text
    assert "torch.float16" not in text and "scaler.scale" not in text
    assert "All 2 GPUs have compute capability 8.0 or more, the lowest 8.0" in text


def test_fp16_with_a_grad_scaler_where_a_gpu_is_older_than_ampere(tmp_path):
    text = _advice(*_with_gpus(tmp_path, ("NVIDIA A100-SXM4-80GB", "8.0"), ("Tesla T4", "7.5")))
    assert 'torch.autocast("cuda", dtype=torch.float16)' in text
    assert 'scaler = torch.amp.GradScaler("cuda")' in text and "scaler.scale(loss).backward()" in text
    assert "torch.bfloat16" not in text
    assert "Tesla T4 has compute capability 7.5, below the 8.0 bf16 needs" in text


@pytest.mark.parametrize("facts, why", [
    (["--no-probe"], "no NVML facts list the GPUs here"),
    ("one-unknown", "a GPU's compute capability is not known here"),
])
def test_both_with_the_reason_where_the_facts_do_not_tell(tmp_path, facts, why):
    if facts == "one-unknown":
        facts = _with_gpus(tmp_path, ("NVIDIA A100-SXM4-80GB", "8.0"), ("NVIDIA A100-SXM4-80GB", None))
    text = _advice(*facts)
    assert "torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16" in text
    assert 'GradScaler("cuda", enabled=(dtype == torch.float16))' in text
    assert why in text and "bf16 needs compute capability 8.0 or more" in text and not PLACEHOLDER.search(text)


def test_the_advice_of_a_cuda_oom_diagnosis_follows_the_snapshots_gpu(tmp_path):
    p = run_main("fix", "--rule", "torch-cuda-oom-fragmentation", "--log",
                 str(REPO / "examples" / "logs" / "cuda-oom.log"), "--format", "json",
                 *_with_gpus(tmp_path, ("Tesla V100-SXM2-16GB", "7.0")))
    advice = next(pl for pl in json.loads(p.stdout)["plans"] if pl["fixer"] == "gpu-memory-advice")
    text = advice["steps"][0]["text"]
    assert "2.00 GiB" in text and "dtype=torch.float16" in text and "torch.bfloat16" not in text


# ------------------------------------------------------------------ live warnings and the final diagnosis

# The real CLI, the real job and the real Watcher sampling it; only the memory each sample reads
# is replayed, one value of the series per sample (the last one again past its end). The job
# blocks reading a FIFO that the watcher opens after its `end_at`th sample: it ends then, however
# fast or loaded the machine is.
REPLAYED = r"""
import json, sys
from troubleshoot import cli
from troubleshoot.run import watch

series, fifo, end_at = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])


class Replayed(watch.Watcher):
    taken = 0

    def sample(self):
        s = super().sample()
        if s is None:
            return None
        rss, gpu = series[min(Replayed.taken, len(series) - 1)]
        s.rss_mib, s.gpu_mem_mib = rss, gpu
        Replayed.taken += 1
        if Replayed.taken == end_at:
            open(fifo, "w").close()  # the job's read returns: it exits
        return s


watch.Watcher = Replayed
sys.exit(cli.main(sys.argv[4:]))
"""


def replay(tmp_path, series: list[tuple[float, float | None]], end_at: int) -> tuple[str, dict]:
    """`troubleshoot run --format json` of a job that lasts `end_at` samples of the series:
    (what it said on stderr, its report)."""
    fifo, report = tmp_path / "end", tmp_path / "report.json"
    os.mkfifo(fifo)
    job = [sys.executable, "-c", f"open({str(fifo)!r}).read()"]
    p = subprocess.run([sys.executable, "-c", REPLAYED, json.dumps(series), str(fifo), str(end_at),
                        "run", "--no-probe", "--interval", "0.05", "--format", "json", "--report", str(report),
                        "--log-to", str(tmp_path / "job.log"), "--", *job],
                       capture_output=True, cwd=REPO, timeout=120)
    err = p.stderr.decode()
    assert p.returncode == 0, err
    return err, json.loads(report.read_text())


def live_lines(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if "still running, full diagnosis at the end" in ln]


def test_host_memory_that_climbs_is_said_live_and_at_the_end_as_host_memory_not_a_gpu_leak(tmp_path):
    err, doc = replay(tmp_path, [(120 + 40 * i, None) for i in range(30)], end_at=18)
    said = live_lines(err)
    assert len(said) == 1 and "(symptom host-oom, rule run-host-memory-climbing;" in said[0], err
    assert "host memory climbed" in said[0]
    assert [(d["rule"], d["symptom"]) for d in doc["diagnoses"]] == [("run-host-memory-climbing", "host-oom")]
    assert "gpu-memory-leak" not in err and "not so over the whole run" not in err
    assert doc["run"]["rss_growing"] is True and doc["run"]["memory_growing_kind"] == "host"


def test_gpu_memory_that_climbs_is_a_gpu_leak_live_and_at_the_end(tmp_path):
    err, doc = replay(tmp_path, [(300, 1000 + 100 * i) for i in range(30)], end_at=18)
    said = live_lines(err)
    assert len(said) == 1 and "(symptom gpu-memory-leak, rule run-memory-climbing;" in said[0], err
    assert "GPU memory climbed" in said[0]
    assert [(d["rule"], d["symptom"]) for d in doc["diagnoses"]] == [("run-memory-climbing", "gpu-memory-leak")]


# The job's memory as the real Watcher read it once a second from `python examples/io_stall.py`
# on a 2-core VM shared with other jobs (torch 2.13.0+cpu): torch's import and the first steps,
# then flat. Each start-up sample is taken twice here, as a machine twice as loaded reads it: the
# start-up then outlasts the watcher's warm-up, as when a live warning once called it a GPU leak.
IO_STALL_RSS = [143.3, 185.4, 219.9, 264.6, 279.1, 290.2, 290.2, 292.0, 293.5, 293.5, 293.5, 293.5, 293.5]
LOADED_START = [v for v in IO_STALL_RSS[:6] for _ in (0, 1)] + IO_STALL_RSS[6:]


def test_a_start_up_that_levels_off_is_no_leak_live_or_at_the_end(tmp_path):
    err, doc = replay(tmp_path, [(v, None) for v in LOADED_START], end_at=len(LOADED_START) + 3)
    assert live_lines(err) == [] and doc["diagnoses"] == [], err
    assert doc["run"]["rss_growing"] is False


def test_a_live_warning_the_whole_run_does_not_bear_out_is_taken_back(tmp_path):
    # Climbing through the tenth sample (the second live look), level from the twelfth on.
    series = [(100.0, None)] * 3 + [(100.0 + 40 * i, None) for i in range(9)] + [(420.0, None)] * 20
    err, doc = replay(tmp_path, series, end_at=28)
    said = live_lines(err)
    assert len(said) == 1 and "rule run-host-memory-climbing;" in said[0], err
    taken_back = [ln for ln in err.splitlines() if "said while the job ran, not so over the whole run:" in ln]
    assert len(taken_back) == 1 and "(symptom host-oom, rule run-host-memory-climbing)" in taken_back[0], err
    assert doc["diagnoses"] == [] and doc["run"]["rss_growing"] is False
