"""A dataset read through a throttled pipe (a slow network filesystem, a cold object store):
the training loop spends almost all of each step waiting for data.

    troubleshoot run -- python examples/io_stall.py   # symptom: io-stall
Prints progress the way the PyTorch ImageNet example does: step time and data time.
"""

import os
import threading
import time

import torch

SAMPLE = 384 * 1024  # bytes per sample
RATE = 256 * 1024    # bytes per second the "storage" delivers


def slow_storage(fd_write):
    """Feed the pipe at a fixed rate, like a saturated disk or network link."""
    chunk = os.urandom(16 * 1024)
    with os.fdopen(fd_write, "wb", buffering=0) as out:
        try:
            while True:
                out.write(chunk)
                time.sleep(len(chunk) / RATE)
        except BrokenPipeError:
            pass


def main():
    r, w = os.pipe()
    threading.Thread(target=slow_storage, args=(w,), daemon=True).start()
    source = os.fdopen(r, "rb", buffering=0)
    model = torch.nn.Linear(1024, 10)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    avg_time = avg_data = 0.0
    end = time.time()
    for step in range(6):
        data = b""
        while len(data) < SAMPLE:  # the DataLoader waiting on storage
            data += source.read(SAMPLE - len(data))
        x = torch.frombuffer(bytearray(data), dtype=torch.uint8).float().div(255).reshape(-1, 1024)[:64]
        data_time = time.time() - end
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        step_time = time.time() - end
        avg_time += (step_time - avg_time) / (step + 1)
        avg_data += (data_time - avg_data) / (step + 1)
        print(f"Epoch: [0][{step}/6]\tTime {step_time:.3f} ({avg_time:.3f})\tData {data_time:.3f} ({avg_data:.3f})"
              f"\tLoss {loss.item():.4f}", flush=True)
        end = time.time()


if __name__ == "__main__":
    main()
