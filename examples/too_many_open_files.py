"""DataLoader workers hand tensors to the main process through file descriptors; under a tiny
open-files limit the main process runs out of them.

    troubleshoot run -- python examples/too_many_open_files.py   # symptom: too-many-open-files
"""

import resource
import signal
import threading

import torch
from torch.utils.data import DataLoader, Dataset

# What a login on a misconfigured node gives you (the default 1024 is not much more).
resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
torch.multiprocessing.set_sharing_strategy("file_descriptor")


class ManySmallTensors(Dataset):
    def __len__(self):
        return 4096

    def __getitem__(self, i):
        return [torch.full((4,), float(i)) for _ in range(16)]  # 16 shared tensors per sample


class Stuck(Exception):
    pass


def _stuck(signum, frame):
    raise Stuck("still waiting after 30 s: a DataLoader worker stopped handing over descriptors (its errors are above)")


if __name__ == "__main__":
    # timeout: rarely a worker's descriptor-sharing thread fails in a loop instead of the main
    # process raising; the main process then waits for a batch that never comes. It raises instead.
    # Rarer still (1 run in 25 on a 2-core machine), the main process waits for the descriptor
    # itself, in a socket read with no timeout, while the worker prints the error in a loop: after
    # 30 s (the job ends in a few otherwise) a signal sent to the main thread, which alone is in that
    # read, ends the wait.
    signal.signal(signal.SIGUSR1, _stuck)
    watchdog = threading.Timer(30, signal.pthread_kill, (threading.main_thread().ident, signal.SIGUSR1))
    watchdog.daemon = True  # the job's normal end does not wait for it
    watchdog.start()
    loader = DataLoader(ManySmallTensors(), batch_size=None, num_workers=2, prefetch_factor=8, timeout=60)
    kept = []
    for step, sample in enumerate(loader):
        kept.append(sample)  # holding on to batches keeps their descriptors open
        if step % 50 == 0:
            print(f"step {step}", flush=True)
