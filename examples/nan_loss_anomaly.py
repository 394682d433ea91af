"""Gradient descent with a learning rate far too large: the loss overflows to inf, then NaN,
and autograd's anomaly detection stops the run at the backward op that produced the NaN.

    troubleshoot run -- python examples/nan_loss_anomaly.py   # symptom: nan-loss
"""

import torch

torch.manual_seed(0)
torch.autograd.set_detect_anomaly(True)
x = torch.randn(256, 8)
y = x @ torch.randn(8, 1)
w = torch.zeros(8, 1, requires_grad=True)
lr = 50.0  # diverges within a few steps
for step in range(200):
    loss = ((x @ w - y) ** 2).mean() * torch.exp(w.abs().sum())
    print(f"step {step} loss {loss.item():.4g}", flush=True)
    loss.backward()
    with torch.no_grad():
        w -= lr * w.grad
        w.grad.zero_()
