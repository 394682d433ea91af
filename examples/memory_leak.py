"""A training loop that keeps every step's output alive (a list of tensors "for logging"):
memory grows step after step. Host memory stands in for GPU memory here, which leaks the same
way when the tensors live on the GPU.

    python examples/memory_leak.py           # symptom: gpu-memory-leak
"""

import time

import torch

model = torch.nn.Linear(2048, 4096)
history = []  # the leak: whole activations kept, with their autograd graph
for step in range(20):
    x = torch.randn(2048, 2048)
    out = model(x)
    loss = out.pow(2).mean()
    loss.backward()
    history.append(out)  # should be loss.item()
    print(f"step {step} loss {loss.item():.4f}", flush=True)
    time.sleep(0.6)
