"""A fake Slurm for `fleet probe` on a machine without one: `squeue`, `scontrol show hostnames`
and `srun` on PATH. The job's nodes are the names given; `srun` runs its command (what follows
`--`) here, as on the node its --nodelist names, with SLURMD_NODENAME set to that node."""

from __future__ import annotations

import os
import sys
from pathlib import Path

TOOL = r'''
import os, sys
tool, args, nodes = sys.argv[1], sys.argv[2:], os.environ["FAKE_SLURM_NODES"].split()
if tool == "squeue":
    print(",".join(nodes))
elif tool == "scontrol" and args[:2] == ["show", "hostnames"]:
    print("\n".join(nodes))
elif tool == "srun":
    command = args[args.index("--") + 1:]
    node = next(a.split("=", 1)[1] for a in args if a.startswith("--nodelist="))
    os.environ["SLURMD_NODENAME"] = node
    os.execvp(command[0], command)
else:
    sys.exit(f"fake Slurm: {tool} {args} is not faked")
'''


def fake_slurm(folder: Path, nodes: list[str]) -> dict[str, str]:
    """The environment under which `fleet probe --job J` finds the fake tools and these nodes."""
    bin_dir = folder / "fake-slurm"
    bin_dir.mkdir()
    (bin_dir / "tool.py").write_text(TOOL)
    for tool in ("srun", "squeue", "scontrol"):
        script = bin_dir / tool
        script.write_text(f"#!/bin/sh\nexec '{sys.executable}' '{bin_dir / 'tool.py'}' {tool} \"$@\"\n")
        script.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "FAKE_SLURM_NODES": " ".join(nodes)}
