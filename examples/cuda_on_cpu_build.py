"""A training step that moves its model to the GPU: fails for real on a CPU-only PyTorch build.

    troubleshoot run -- python examples/cuda_on_cpu_build.py   # symptom: framework-cuda-unavailable
"""

import torch

model = torch.nn.Linear(16, 4)
print(f"torch {torch.__version__}, cuda available: {torch.cuda.is_available()}", flush=True)
model = model.cuda()  # AssertionError: Torch not compiled with CUDA enabled
