"""A training loop that keeps every step's output alive "for logging": memory grows step after
step. It runs on the CPU, so host memory climbs; on a GPU the same code leaks GPU memory.

    troubleshoot run -- python examples/memory_leak.py   # symptom: host-oom (host memory climbing)
"""

import time

import torch

model = torch.nn.Linear(1024, 1024)
history = []  # the leak
for step in range(20):
    x = torch.randn(256, 1024)
    out = model(x)
    loss = out.pow(2).mean()
    loss.backward()
    history.append(out.repeat(32, 1))  # 32 MB kept per step; should be loss.item()
    print(f"step {step} loss {loss.item():.4f}", flush=True)
    time.sleep(0.6)
