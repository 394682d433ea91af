"""How long `q` takes to end the TUI, measured in a real terminal (tmux).

The time runs from `tmux send-keys q` to a timestamp the shell writes after the TUI exits (the
terminal restored). Scenarios:

  scan     a 1 GB log being scanned (RE2 engine, so the scan lasts seconds), q once the status
           line says "scanning"
  probe    probes running (torch's child interpreter included), q once it says "probing"
  probe05  probes running, q 0.5 s after the TUI was started (it may not have drawn yet)
  start05  the same with --no-probe: what the start itself costs
  idle     nothing running

usage: python benchmarks/tui_quit.py [SCENARIO ...] [--runs N] [--no-compile]   (needs tmux)
The 1 GB log is generated once under $TMPDIR (not in the repository). The package is byte-compiled
first, as `pip install` does (its __pycache__ is git-ignored): without it every start compiles each
of its modules it imports, which a user's start never does (PYTHONDONTWRITEBYTECODE=1 keeps a dev
tree without bytecode).
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SESSION = "troubleshoot-quit-bench"
# A tmux server of its own: a session of the same name on the default server (another run of this
# benchmark, a test) would be killed or would kill this one.
TMUX = ["tmux", "-L", f"troubleshoot-quit-bench-{os.getpid()}"]
ARGS = {"scan": "--log {log} --no-probe", "probe": "", "probe05": "", "start05": "--no-probe", "idle": "--no-probe"}
WAIT_FOR = {"scan": "scanning", "probe": "probing", "idle": "paste one"}


def pane() -> str:
    return subprocess.run([*TMUX, "capture-pane", "-p", "-t", SESSION], capture_output=True, text=True).stdout


def once(scenario: str, log: Path, stamp: Path) -> tuple[float, str]:
    stamp.unlink(missing_ok=True)
    env = "TROUBLESHOOT_SCAN_ENGINE=re2 " if scenario == "scan" else ""
    tui = f"{sys.executable} -m troubleshoot tui {ARGS[scenario].format(log=log)}"
    cmd = f"cd {REPO} && {env}{tui}; date +%s.%N > {stamp}; sleep 60"
    subprocess.run([*TMUX, "kill-session", "-t", SESSION], capture_output=True)
    start = time.time()
    subprocess.run([*TMUX, "new-session", "-d", "-s", SESSION, "-x", "80", "-y", "24", cmd], check=True)
    if scenario in WAIT_FOR:
        while WAIT_FOR[scenario] not in pane():
            if time.time() - start > 120:
                raise SystemExit(f"{scenario}: never saw {WAIT_FOR[scenario]!r}:\n{pane()}")
            time.sleep(0.02)
    else:
        time.sleep(max(0.0, start + 0.5 - time.time()))
    seen = pane().splitlines()
    pressed = time.time()
    subprocess.run([*TMUX, "send-keys", "-t", SESSION, "q"], check=True)
    while not stamp.exists() or not stamp.read_text().strip():
        if time.time() - pressed > 60:
            raise SystemExit(f"{scenario}: the TUI did not exit")
        time.sleep(0.005)
    exited = float(stamp.read_text())
    subprocess.run([*TMUX, "kill-session", "-t", SESSION], capture_output=True)
    return exited - pressed, (seen[0].strip() if seen and seen[0].strip() else "(not drawn yet)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scenarios", nargs="*", default=["scan", "probe", "probe05", "start05", "idle"])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--no-compile", action="store_true", help="measure without the package's bytecode")
    args = ap.parse_args()
    if not args.no_compile:
        import troubleshoot

        compileall.compile_dir(Path(troubleshoot.__file__).parent, quiet=1)
    tmp = Path(os.environ.get("TMPDIR", tempfile.gettempdir()))
    log = tmp / "troubleshoot-quit-bench-1g.log"
    if "scan" in args.scenarios and not log.exists():
        sys.path.insert(0, str(REPO / "benchmarks"))
        import scan_bench

        scan_bench.generate(log, 1024)
    # A session that outlives the runs keeps the server up: its start is not timed with the TUI's.
    subprocess.run([*TMUX, "new-session", "-d", "-s", "keep", "sleep 3600"], check=True)
    socket = subprocess.run([*TMUX, "display-message", "-p", "#{socket_path}"], capture_output=True,
                            text=True).stdout.strip()
    try:
        run_all(args, log)
    finally:
        subprocess.run([*TMUX, "kill-server"], capture_output=True)
        if socket:
            Path(socket).unlink(missing_ok=True)  # the server leaves it behind
    return 0


def run_all(args, log: Path) -> None:
    with tempfile.TemporaryDirectory() as d:
        stamp = Path(d) / "exit"
        for scenario in args.scenarios:
            times = []
            for _ in range(args.runs):
                seconds, status = once(scenario, log, stamp)
                times.append(seconds)
                print(f"  {scenario}: {seconds:.3f} s   [{status[:60]}]", flush=True)
            print(f"{scenario}: median {statistics.median(times):.3f} s, max {max(times):.3f} s "
                  f"over {args.runs} runs (load {os.getloadavg()[0]:.1f})", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
