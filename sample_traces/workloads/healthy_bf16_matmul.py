"""Healthy: a big bf16 MLP training step that keeps the GPU busy.

Large batch, few big GEMMs (4x Linear(8192,8192) in bf16, batch 4096), fused Adam,
no host syncs: the CPU enqueues a step in a fraction of the GPU time, so the GPU is
busy nearly all the time.  Only one variant is recorded.
"""

import torch
import torch.nn as nn

from .common import Step, is_cuda

NAME = "healthy_bf16_matmul"
EXPECTED_KIND = "healthy"
WITH_STACK = False
VARIANTS = ("before",)
FIX = None
DESCRIPTION = {
    "before": "bf16 MLP 4x Linear(8192,8192)+GELU, batch 4096, bf16 params, fused Adam, no syncs",
}


def make(variant, device):
    cuda = is_cuda(device)
    dim, batch, layers = (8192, 4096, 4) if cuda else (64, 32, 2)
    torch.manual_seed(0)
    mods = []
    for _ in range(layers):
        mods += [nn.Linear(dim, dim), nn.GELU()]
    model = nn.Sequential(*mods).to(device=device, dtype=torch.bfloat16)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, fused=cuda or None)
    xs = [torch.randn(batch, dim, device=device, dtype=torch.bfloat16) for _ in range(2)]
    state = {"i": 0}

    def step():
        i = state["i"] = state["i"] + 1
        opt.zero_grad(set_to_none=True)
        loss = model(xs[i % 2]).float().pow(2).mean()
        loss.backward()
        opt.step()

    return Step(step, info={"dim": dim, "batch": batch, "layers": layers, "dtype": "bf16"})
