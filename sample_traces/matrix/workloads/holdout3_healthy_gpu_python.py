"""holdout3_healthy_gpu_python: a GPU-bound step with ~2 ms of Python bookkeeping per step (no launches).

Third held-out set, healthy role: the GPU runs ~10 ms of bf16 matmuls per step while the CPU, far ahead,
spends ~2 ms in Python (a metrics dict, string formatting) without launching. The GPU never waits on it:
the trace must be called healthy (the no-launch host rule must not invent host_bound).
"""

import torch

from ._util import Step, autocast, is_cuda

NAME = "holdout3_healthy_gpu_python"
EXPECTED_KIND = "healthy"
ROLE = "healthy"
VARIANTS = ("before",)
FIX = "-"
DESCRIPTION = {"before": "8 chained 8192x8192 bf16 matmuls per step (GPU-bound), plus ~2 ms of Python per step"}


def make(variant, device):
    cuda = is_cuda(device)
    n = 8192 if cuda else 64
    torch.manual_seed(0)
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16 if cuda else torch.float32)
    w = torch.randn(n, n, device=device, dtype=a.dtype) / n ** 0.5
    st = {"i": 0, "log": []}

    def bookkeeping(i):
        # ~2 ms of pure Python: formatting and a small dict, no tensor touched.
        row = {f"k{j}": (i * j) % 97 for j in range(4000)}
        st["log"].append(" ".join(f"{k}={v}" for k, v in list(row.items())[:2000]))
        if len(st["log"]) > 10:
            st["log"].clear()

    def step():
        i = st["i"] = st["i"] + 1
        x = a
        for _ in range(8):
            x = x @ w
        bookkeeping(i)
    return Step(step, info={"n": n})
