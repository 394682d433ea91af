"""A fake Slurm for `fleet probe` on a machine without one: srun, squeue, scontrol, salloc, sinfo
and scancel on PATH that log their arguments. `squeue` answers `node[1-9]`, `scontrol show
hostnames` the names in $FAKE_SLURM_NAMES (default node1); `srun` runs its command (what follows
`--`) here, as on the node its --nodelist or -w names, with SLURMD_NODENAME set to that node."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

FAKE_TOOL = r'''
import json, os, sys
tool, args = os.path.basename(sys.argv[0]).removesuffix(".py"), sys.argv[1:]
with open(os.environ["FAKE_SLURM_LOG"], "a") as f:
    f.write(json.dumps([tool, *args]) + "\n")
if tool == "squeue":
    print("node[1-9]")
elif tool == "scontrol" and args[:2] == ["show", "hostnames"]:
    print(os.environ.get("FAKE_SLURM_NAMES", "node1"))
elif tool == "srun":
    node, i = "", 0
    while i < len(args):
        a = args[i]
        if a == "--":
            i += 1
            break
        if a in ("-w", "--nodelist", "--jobid"):
            node = args[i + 1] if a != "--jobid" else node
            i += 2
            continue
        if a.startswith("--nodelist="):
            node = a.split("=", 1)[1]
        if not a.startswith("-"):
            break
        i += 1
    os.environ["SLURMD_NODENAME"] = node
    os.execvp(args[i], args[i:])
'''


def fake_slurm(folder: Path) -> tuple[dict[str, str], object]:
    """(the environment that finds the fake tools, calls(tool) -> the argument lists it got)."""
    bin_dir = folder / "fake-slurm"
    bin_dir.mkdir()
    (bin_dir / "tool.py").write_text(FAKE_TOOL)
    for tool in ("srun", "squeue", "scontrol", "salloc", "sinfo", "scancel"):
        (bin_dir / f"{tool}.py").symlink_to(bin_dir / "tool.py")
        script = bin_dir / tool
        script.write_text(f"#!/bin/sh\nexec '{sys.executable}' '{bin_dir / tool}.py' \"$@\"\n")
        script.chmod(0o755)
    log = folder / "slurm-calls.jsonl"
    log.write_text("")

    def calls(tool: str) -> list[list[str]]:
        return [c[1:] for c in map(json.loads, log.read_text().splitlines()) if c[0] == tool]

    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "FAKE_SLURM_LOG": str(log)}
    return env, calls
