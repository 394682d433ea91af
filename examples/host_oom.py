"""A DataLoader worker that needs more memory than its limit allows (here `ulimit -v`, as a
cluster's per-job memory limit would): the worker dies and takes the job down.

    troubleshoot run -- python examples/host_oom.py   # symptom: host-oom
"""

import resource

import torch
from torch.utils.data import DataLoader, Dataset


class BigSamples(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        return torch.ones(256, 1024, 1024)  # 1 GiB per sample


def limit_worker_memory(worker_id):
    # 3 GiB of address space for each worker: loading a 1 GiB sample and collating fails.
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, resource.RLIM_INFINITY))


if __name__ == "__main__":
    loader = DataLoader(BigSamples(), batch_size=4, num_workers=1, worker_init_fn=limit_worker_memory)
    for step, batch in enumerate(loader):
        print(f"step {step} batch {tuple(batch.shape)}", flush=True)
