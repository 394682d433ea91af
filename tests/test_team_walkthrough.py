"""docs/plugins.md's "Team rules and a plugin, step by step", word for word: its files written
into a fresh folder, its shell commands run there by bash with the installed `troubleshoot`
console script (whose sys.path holds its bin folder, not the user's folder, as for a user)."""

import os
import re
import shlex
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

SECTION = "## Team rules and a plugin, step by step"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def console_script() -> Path:
    script = Path(sys.executable).parent / "troubleshoot"
    if not script.is_file():
        pytest.skip("the troubleshoot console script is not installed next to this interpreter (pip install -e .)")
    return script


def walkthrough():
    text = (REPO / "docs" / "plugins.md").read_text()
    assert SECTION in text, "docs/plugins.md lost its walkthrough"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    files, script = {}, None
    for lang, body in FENCE.findall(section):
        first = body.splitlines()[0]
        if lang in ("yaml", "python") and first.startswith("# "):
            files[first[2:].strip()] = body
        elif lang == "sh":
            script = body
    assert set(files) == {"team-rules/symptoms.yaml", "team-rules/dataset.yaml", "plugin.py"} and script
    return files, script


def env_for(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # nothing on the path but the venv
    env["PATH"] = f"{console_script().parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def run_sh(script: str, cwd: Path, env) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=180)


@pytest.mark.slow  # every command of the walkthrough, each a process of its own
def test_docs_walkthrough_works_word_for_word(tmp_path):
    files, script = walkthrough()
    for name, body in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(body)
    env = env_for(tmp_path)
    p = run_sh(script, tmp_path, env)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    out = p.stdout
    assert re.search(r"^team-dataset-missing\s+team-rules/symptoms\.yaml:\d+", out, re.M)  # where it comes from
    assert "0 errors, 0 warnings" in p.stderr
    assert re.search(r"^\d+ examples in \d+ rules?: \d+ passed, 0 failed$", out, re.M)
    assert re.search(r"^acme-remount\s", out, re.M)
    assert "[ERROR] The dataset folder is not mounted" in out and "symptom team-dataset-missing" in out
    assert "run [root]: mount /mnt/imagenet" in out and "Dry run: nothing was changed" in out
    # The preview hint copy-pastes: run it as printed.
    hint = re.search(r"^\s+preview: (troubleshoot fix .*?)\s{3}\(add --apply", out, re.M).group(1)
    assert shlex.split(hint)[-4:] == ["--rules", "team-rules", "-p", "./plugin.py"]
    again = run_sh(hint, tmp_path, env)
    assert again.returncode == 0 and "run [root]: mount /mnt/imagenet" in again.stdout, again.stderr


def test_plugin_module_in_the_current_folder_before_or_after_the_subcommand(tmp_path):
    files, _ = walkthrough()
    (tmp_path / "acme_plugin.py").write_text(files["plugin.py"])
    env = env_for(tmp_path)
    for argv in (["-p", "acme_plugin", "fixers", "list"], ["fixers", "list", "-p", "acme_plugin"],
                 ["fixers", "-p", "./acme_plugin.py"], ["--plugin", str(tmp_path / "acme_plugin.py"), "fixers"]):
        p = subprocess.run([str(console_script()), *argv], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=60)
        assert p.returncode == 0 and re.search(r"^acme-remount\s", p.stdout, re.M), (argv, p.stderr)
    p = subprocess.run([str(console_script()), "fixers", "-p", "./missing.py"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "./missing.py" in p.stderr and "Traceback" not in p.stderr


def test_rules_new_output_passes_lint_and_test(tmp_path):
    (tmp_path / "team-rules").mkdir()
    env = env_for(tmp_path)
    lines = ["ERROR DATASET /mnt/imagenet NOT MOUNTED",
             "[2024-05-01 12:00:00,123] OSError: [Errno 28] No space left on device: '/scratch/ckpt/step_1200.pt'",
             "node3:123:140 [0] NCCL WARN Bootstrap : no socket interface found",
             "E0312 12:00:00.123 4242 cuda_dnn.cc:439] Loaded runtime CuDNN library: 8.9.2 but source was "
             "compiled with: 9.1.0"]
    script = "\n".join(f"troubleshoot rules new --rules team-rules --symptom io-stall {shlex.quote(ln)}"
                       for ln in lines)
    script += "\ntroubleshoot rules lint --rules team-rules\ntroubleshoot rules test --rules team-rules\n"
    p = run_sh(script, tmp_path, env)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    written = sorted((tmp_path / "team-rules").glob("*.yaml"))
    assert len(written) == len(lines)
    assert "0 errors, 0 warnings" in p.stderr
    assert re.search(r"^\d+ examples in \d+ rules?: \d+ passed, 0 failed$", p.stdout, re.M)
    # The lines in one log: each fires its own team rule in a real diagnosis.
    log = tmp_path / "all.log"
    log.write_text("\n".join(lines) + "\n")
    d = subprocess.run([str(console_script()), "diagnose", "--no-probe", "--all", "--format", "json", "--log", str(log),
                        "--rules", "team-rules"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    found = {x["rule"]: x["evidence"][0]["line"] for x in json.loads(d.stdout)["diagnoses"] if x["rule"].startswith("team-")}
    assert sorted(found.values()) == [1, 2, 3, 4], found
