"""Three input pipelines that starve a (absent) GPU, as real processes: the jobs that
tests/tools/record_run_examples.py runs under `troubleshoot run` to record the run.* facts of
each `run-gpu-underused-*` rule (rules/performance.yaml).

    python input_pipeline_jobs.py workers SECONDS   # 2 loader worker processes compress real bytes
    python input_pipeline_jobs.py main SECONDS      # the same work in the main process only
    python input_pipeline_jobs.py disk SECONDS FILE # O_DIRECT reads of FILE in 4 KiB blocks

A "batch" is real CPU work on real bytes (the Python standard library's own source files):
zlib at level 9 and back, then SHA-256, the cost of decoding and checking a compressed sample.
Each job stops after SECONDS of wall time (a deadline, not a sleep).
"""

from __future__ import annotations

import hashlib
import mmap
import multiprocessing as mp
import os
import sys
import time
import zlib
from pathlib import Path

BATCH_BYTES = 256 * 1024
BLOCK = 4096  # O_DIRECT needs aligned, block-sized reads


def real_bytes(limit: int = 4 << 20) -> bytes:
    out, n = [], 0
    for p in sorted(Path(os.__file__).parent.glob("*.py")):
        data = p.read_bytes()
        out.append(data)
        n += len(data)
        if n >= limit:
            break
    return b"".join(out)


def batch(data: bytes, i: int) -> bytes:
    start = (i * 7919 * BLOCK) % max(1, len(data) - BATCH_BYTES)
    chunk = data[start:start + BATCH_BYTES]
    packed = zlib.compress(chunk, 9)
    assert zlib.decompress(packed) == chunk
    return hashlib.sha256(packed).digest()


def _worker(rank: int, workers: int, deadline: float, queue) -> None:
    data, i = real_bytes(), rank
    while time.monotonic() < deadline:
        queue.put(batch(data, i))
        i += workers
    queue.put(None)


def workers(seconds: float, n: int = 2) -> int:
    deadline = time.monotonic() + seconds
    queue = mp.get_context("fork").Queue(maxsize=8)
    procs = [mp.get_context("fork").Process(target=_worker, args=(r, n, deadline, queue)) for r in range(n)]
    for p in procs:
        p.start()
    done = batches = 0
    while done < n:  # the "training loop": takes batches as the workers make them
        if queue.get() is None:
            done += 1
        else:
            batches += 1
    for p in procs:
        p.join()
    print(f"{batches} batches from {n} workers in {seconds:g}s", flush=True)
    return 0


def main_process(seconds: float) -> int:
    deadline, data, i = time.monotonic() + seconds, real_bytes(), 0
    while time.monotonic() < deadline:
        batch(data, i)
        i += 1
    print(f"{i} batches in the main process in {seconds:g}s", flush=True)
    return 0


def disk(seconds: float, path: str) -> int:
    deadline = time.monotonic() + seconds
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    buf = mmap.mmap(-1, BLOCK)  # page-aligned, as O_DIRECT wants
    size, pos, total = os.fstat(fd).st_size, 0, 0
    try:
        while time.monotonic() < deadline:
            n = os.preadv(fd, [buf], pos)
            total += n
            pos = pos + n if n == BLOCK and pos + 2 * BLOCK <= size else 0
    finally:
        os.close(fd)
    print(f"read {total / 1e6:.0f} MB with O_DIRECT in {seconds:g}s", flush=True)
    return 0


if __name__ == "__main__":
    mode, secs = sys.argv[1], float(sys.argv[2])
    if mode == "workers":
        sys.exit(workers(secs))
    if mode == "main":
        sys.exit(main_process(secs))
    if mode == "disk":
        sys.exit(disk(secs, sys.argv[3]))
    sys.exit(f"unknown mode {mode!r}: workers, main or disk")
