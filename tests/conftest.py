from __future__ import annotations

import subprocess
import sys as _sys
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_sys.path.insert(0, str(REPO / "tests"))  # the `fakes` helpers
SHARED = REPO.parent / "shared"


def run_cli(*args: str, input: bytes | str | None = None, env: dict | None = None, cwd: Path | None = None,
            timeout: float = 60) -> subprocess.CompletedProcess:
    """Run the real command in a child process, as a user would."""
    if isinstance(input, str):
        input = input.encode()
    return subprocess.run([sys.executable, "-m", "troubleshoot", *args], input=input, capture_output=True,
                          env=env, cwd=cwd or REPO, timeout=timeout)


@pytest.fixture
def rules_dir(tmp_path):
    """Write rule files into a fresh folder: rules_dir({'a.yaml': '...'}) -> Path."""

    def make(files: dict[str, str]) -> Path:
        d = tmp_path / "team-rules"
        d.mkdir(exist_ok=True)
        for name, text in files.items():
            (d / name).write_text(textwrap.dedent(text))
        return d

    return make


@pytest.fixture(autouse=True)
def _isolated_config(tmp_path, monkeypatch):
    """No test reads the developer's own config or TROUBLESHOOT_RULES."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.delenv("TROUBLESHOOT_RULES", raising=False)


@pytest.fixture
def tiny_disk(tmp_path):
    """A real 64 KiB file system, where this machine lets us mount one (root, no sandbox)."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root outside a sandbox)")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)
