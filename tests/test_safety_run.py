"""`troubleshoot run` and its log file: every run gets a new file of its own (never an existing
one, never through a symlink), a full disk stops the logging and nothing else, and job output
kept in the state folder is readable by its owner alone. Real processes, real file systems."""

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, run_cli
from procwait import Output

RUN = ["run", "--no-probe", "--no-watch"]
# A job that says which run it is, then waits for its stdin to close: runs started together are
# all running (their logs all open) at once.
WAITING_JOB = """\
import os, sys
print("run", os.environ["WHICH"], flush=True)
sys.stdin.read()
print("run", os.environ["WHICH"], "done", flush=True)
sys.exit(1)
"""
# A job that prints $SAY and exits with $CODE: runs of it differ by their environment alone,
# so they get the same log name.
SAYING_JOB = """\
import os, sys
print(os.environ["SAY"], flush=True)
sys.exit(int(os.environ["CODE"]))
"""
SLURM = {"SLURM_JOB_ID": "4242", "SLURM_PROCID": "0", "SLURMD_NODENAME": "node1"}


def _env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM") and k != "RANK"}
    return {**env, **extra}


def _log_named(stderr: bytes) -> Path:
    """The log the run's last line names."""
    found = re.findall(rb"; log: (.+)\n", stderr)
    assert found, stderr.decode()[-2000:]
    return Path(found[-1].decode())


def _job(tmp_path: Path) -> Path:
    job = tmp_path / "job.py"
    job.write_text(WAITING_JOB)
    return job


def _saying_job(tmp_path: Path) -> list[str]:
    job = tmp_path / "job.py"
    job.write_text(SAYING_JOB)
    return [sys.executable, str(job)]


def _rank_log_name() -> str:
    """What a Slurm step's rank 0 on node1 names its log (SLURM above), before any suffix."""
    return f"4242-{Path(sys.executable).name}-job.node1.rank0.log"


def _run_together(tmp_path: Path, n: int, extra_args: list[str], env: dict) -> list[tuple[int, bytes, bytes]]:
    """Start `n` runs of one job, wait until every job is running, then let them all finish."""
    job = _job(tmp_path)
    procs = [subprocess.Popen([sys.executable, "-m", "troubleshoot", *RUN, *extra_args, "--", sys.executable, str(job)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO,
                              env={**env, "WHICH": str(i)}) for i in range(n)]
    try:
        for i, p in enumerate(procs):
            Output(p.stdout).wait_for(f"run {i}".encode(), timeout=60)
        results = []
        for p in procs:
            out, err = p.communicate(input=b"", timeout=120)
            results.append((p.returncode, out, err))
        return results
    finally:
        for p in procs:
            p.kill()
            p.wait()


def _assert_each_run_has_its_own_log(results: list[tuple[int, bytes, bytes]]) -> list[Path]:
    logs = [_log_named(err) for _, _, err in results]
    assert len(set(logs)) == len(logs), logs
    for i, (code, _, err) in enumerate(results):
        assert code == 1 and b"Traceback" not in err, err.decode()[-2000:]
        assert logs[i].read_bytes() == f"run {i}\nrun {i} done\n".encode()
    return logs


# ---------------------------------------------------------------- one log per run


def test_runs_of_one_job_at_once_each_get_their_own_log(tmp_path):
    results = _run_together(tmp_path, 4, [], _env())
    logs = _assert_each_run_has_its_own_log(results)
    assert len({p.parent for p in logs}) == 1  # side by side in the state folder


def test_ranks_of_one_step_started_twice_at_once_keep_apart(tmp_path):
    shared = tmp_path / "shared"
    results = _run_together(tmp_path, 4, ["--log-to", f"{shared}/"], _env(**SLURM))
    logs = _assert_each_run_has_its_own_log(results)
    # fleet diagnose still reads each file's node and rank from its name
    assert all(p.name.endswith(".node1.rank0.log") for p in logs), logs
    assert (shared / _rank_log_name()) in logs


def test_a_retried_slurm_step_keeps_the_first_attempts_log(tmp_path):
    shared = tmp_path / "shared"
    job = _saying_job(tmp_path)
    first = run_cli(*RUN, "--log-to", f"{shared}/", "--", *job, env=_env(**SLURM, SAY="first attempt", CODE="5"))
    second = run_cli(*RUN, "--log-to", f"{shared}/", "--", *job, env=_env(**SLURM, SAY="second attempt", CODE="6"))
    assert (first.returncode, second.returncode) == (5, 6)
    a, b = _log_named(first.stderr), _log_named(second.stderr)
    assert a != b and a.parent == b.parent == shared
    assert a.read_bytes() == b"first attempt\n" and b.read_bytes() == b"second attempt\n"
    assert a.name == _rank_log_name() and b.name.endswith(".node1.rank0.log")


# ---------------------------------------------------------------- never an existing file


@pytest.mark.parametrize("planted", ["symlink-to-a-file", "dangling-symlink", "regular-file"])
def test_a_name_taken_in_a_shared_folder_is_never_written_through(tmp_path, planted):
    """Another user put something under the name a rank's log will get: it is left as it was."""
    shared, victim_dir = tmp_path / "shared", tmp_path / "victim"
    shared.mkdir()
    victim_dir.mkdir()
    victim = victim_dir / "precious.txt"
    trap = shared / _rank_log_name()
    if planted == "regular-file":
        trap.write_bytes(b"someone else's log\n")
    else:
        if planted == "symlink-to-a-file":
            victim.write_bytes(b"precious\n")
        trap.symlink_to(victim)
    p = run_cli(*RUN, "--log-to", f"{shared}/", "--", *_saying_job(tmp_path),
                env=_env(**SLURM, SAY="job output", CODE="3"))
    assert p.returncode == 3 and b"Traceback" not in p.stderr, p.stderr.decode()[-2000:]
    log = _log_named(p.stderr)
    assert log.parent == shared and log != trap and log.name.endswith(".node1.rank0.log")
    assert log.read_bytes() == b"job output\n"
    if planted == "regular-file":
        assert trap.read_bytes() == b"someone else's log\n"
    else:
        assert trap.is_symlink()
        assert (victim.read_bytes() == b"precious\n") if planted == "symlink-to-a-file" else not victim.exists()


def test_a_report_name_taken_beside_the_log_is_not_written_through(tmp_path):
    shared, victim = tmp_path / "shared", tmp_path / "precious.txt"
    shared.mkdir()
    victim.write_bytes(b"precious\n")
    (shared / (_rank_log_name() + ".json")).symlink_to(victim)
    p = run_cli(*RUN, "--log-to", f"{shared}/", "--format", "json", "--", *_saying_job(tmp_path),
                env=_env(**SLURM, SAY="job output", CODE="3"))
    assert p.returncode == 3 and b"Traceback" not in p.stderr, p.stderr.decode()[-2000:]
    assert _log_named(p.stderr) == shared / _rank_log_name()
    assert victim.read_bytes() == b"precious\n"
    assert f"cannot write the report {shared / _rank_log_name()}.json".encode() in p.stderr


def test_a_report_is_readable_by_its_owner_alone(tmp_path):
    report = tmp_path / "r.json"
    p = run_cli(*RUN, "--log-to", str(tmp_path / "job.log"), "--format", "json", "--report", str(report), "--",
                "sh", "-c", "exit 1")
    assert p.returncode == 1, p.stderr.decode()[-2000:]
    assert json.loads(report.read_text())["exit_code"] == 1 and _mode(report) == 0o600


@pytest.mark.parametrize("existing", ["file", "symlink"])
def test_an_existing_log_file_named_on_the_command_line_is_kept(tmp_path, existing):
    """`--log-to train.log` a second time: the first run's log stays, the new one gets the next
    free name, and the run's last line says which."""
    named = tmp_path / "train.log"
    kept = tmp_path / "elsewhere.txt"
    kept.write_bytes(b"first run\n")
    if existing == "file":
        named.write_bytes(b"first run\n")
        kept = named
    else:
        named.symlink_to(kept)
    p = run_cli(*RUN, "--log-to", str(named), "--", "sh", "-c", "echo second run; exit 2")
    assert p.returncode == 2 and b"Traceback" not in p.stderr, p.stderr.decode()[-2000:]
    log = _log_named(p.stderr)
    assert log == tmp_path / "train-2.log"
    assert log.read_bytes() == b"second run\n" and kept.read_bytes() == b"first run\n"


def test_a_device_named_on_the_command_line_is_still_written(tmp_path):
    p = run_cli(*RUN, "--log-to", os.devnull, "--", "sh", "-c", "echo out; exit 4")
    assert p.returncode == 4 and p.stdout == b"out\n", p.stderr.decode()[-2000:]
    assert _log_named(p.stderr) == Path(os.devnull)


def test_a_fifo_named_on_the_command_line_feeds_its_reader_and_is_not_read_back(tmp_path):
    """A log shipper reading a named pipe gets the job's output; the run ends with the job."""
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    try:
        p = run_cli(*RUN, "--log-to", str(fifo), "--", "sh", "-c", "echo shipped; exit 7", timeout=60)
        assert p.returncode == 7 and b"Traceback" not in p.stderr, p.stderr.decode()[-2000:]
        assert reader.communicate(timeout=60)[0] == b"shipped\n"
        assert _log_named(p.stderr) == fifo
    finally:
        reader.kill()
        reader.wait()


def test_a_fifo_another_user_put_under_the_named_log_gets_nothing(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root, to give the FIFO another owner")
    fifo = tmp_path / "job.log"
    os.mkfifo(fifo)
    os.chown(fifo, 4321, 4321)
    p = run_cli(*RUN, "--log-to", str(fifo), "--", "sh", "-c", "echo private; exit 5", timeout=60)
    assert p.returncode == 5 and b"Traceback" not in p.stderr, p.stderr.decode()[-2000:]
    log = _log_named(p.stderr)
    assert log == tmp_path / "job-2.log" and log.read_bytes() == b"private\n"
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


# ---------------------------------------------------------------- a full disk

# An error the rules know first, then far more output than the file system holds.
FILLS_THE_DISK = r"""
import sys
out = sys.stdout.buffer
out.write(b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total capacity)\n")
out.flush()
for i in range(20000):
    out.write(b"step %06d loss 0.123456789 lr 0.0001 throughput 1234.5 samples/s\n" % i)
out.flush()
sys.stderr.write("job's last words\n")
sys.exit(3)
"""


def _assert_full_log_handled(p: subprocess.CompletedProcess, direct: subprocess.CompletedProcess, log: Path) -> None:
    err = p.stderr.decode()
    assert p.returncode == direct.returncode == 3, err[-2000:]
    assert "Traceback" not in err, err[-3000:]
    assert p.stdout == direct.stdout  # every byte still passed through
    assert b"job's last words\n" in p.stderr
    said = [ln for ln in err.splitlines() if "cannot write the log" in ln]
    assert len(said) == 1 and str(log) in said[0], err[-2000:]
    assert "job ended (exit 3)" in err


def test_a_full_disk_stops_the_log_not_the_job(tmp_path, tiny_disk):
    job = tmp_path / "job.py"
    job.write_text(FILLS_THE_DISK)
    direct = subprocess.run([sys.executable, str(job)], capture_output=True)
    log, report = tiny_disk / "job.log", tmp_path / "report.json"
    p = run_cli(*RUN, "--log-to", str(log), "--format", "json", "--report", str(report), "--",
                sys.executable, str(job))
    _assert_full_log_handled(p, direct, log)
    said = next(ln for ln in p.stderr.decode().splitlines() if "cannot write the log" in ln)
    assert "No space left on device" in said
    logged = log.read_bytes()
    assert logged and direct.stdout.startswith(logged)  # what was logged is the job's output, in order
    doc = json.loads(report.read_text())
    assert doc["exit_code"] == 3
    assert "cuda-oom" in [d["symptom"] for d in doc["diagnoses"]]  # diagnosed from what was logged


def test_a_log_device_that_is_full_keeps_the_job_and_its_exit_code(tmp_path):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    job = tmp_path / "job.py"
    job.write_text(FILLS_THE_DISK)
    direct = subprocess.run([sys.executable, str(job)], capture_output=True)
    p = run_cli(*RUN, "--log-to", "/dev/full", "--", sys.executable, str(job))
    _assert_full_log_handled(p, direct, Path("/dev/full"))


# ---------------------------------------------------------------- who may read the logs


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_logs_in_the_state_folder_are_for_their_owner_alone(tmp_path):
    p = run_cli(*RUN, "--", "sh", "-c", "echo secret token; exit 1")
    assert p.returncode == 1, p.stderr.decode()[-2000:]
    log = _log_named(p.stderr)
    assert log.read_bytes() == b"secret token\n"
    assert _mode(log) == 0o600
    assert _mode(log.parent) == 0o700 and _mode(log.parent.parent) == 0o700  # runs/ and troubleshoot/


def test_state_folders_left_open_by_an_older_version_are_closed(tmp_path):
    state = Path(os.environ["XDG_STATE_HOME"]) / "troubleshoot"
    runs = state / "runs"
    runs.mkdir(parents=True)
    for d in (state, runs):
        d.chmod(0o755)
    p = run_cli(*RUN, "--", "sh", "-c", "exit 0")
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    assert _log_named(p.stderr).parent == runs
    assert _mode(state) == 0o700 and _mode(runs) == 0o700


def test_a_log_folder_made_for_the_ranks_is_private_too(tmp_path):
    shared = tmp_path / "new" / "logs"
    p = run_cli(*RUN, "--log-to", f"{shared}/", "--", "sh", "-c", "echo out; exit 0", env=_env(**SLURM))
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    log = _log_named(p.stderr)
    assert log.parent == shared and _mode(log) == 0o600 and _mode(shared) == 0o700
