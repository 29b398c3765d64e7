"""Unfused optimizer: Adam(foreach=False) over ~130 parameter tensors.

before: torch.optim.Adam(foreach=False) -> a Python loop over every parameter tensor,
        ~7 small elementwise kernels each (~900 launches per optimizer.step), during which
        the GPU mostly waits for launches.
after:  torch.optim.Adam(fused=True) -> a handful of multi-tensor kernels per step.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from .common import Step, is_cuda

NAME = "unfused_optimizer"
EXPECTED_KIND = "unfused_optimizer"
WITH_STACK = False
VARIANTS = ("before", "after")
FIX = "torch.optim.Adam(fused=True) instead of Adam(foreach=False)"
DESCRIPTION = {
    "before": ("32 residual blocks [LayerNorm(768), Linear(768,768), GELU] + head (130 param tensors, 19M params), "
               "batch 8192, bf16 autocast, Adam(foreach=False)"),
    "after": "same model, Adam(fused=True)",
}


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        return x + F.gelu(self.fc(self.ln(x)))


def make(variant, device):
    cuda = is_cuda(device)
    d, batch, nblocks = (768, 8192, 32) if cuda else (32, 16, 32)
    torch.manual_seed(0)
    model = nn.Sequential(*[Block(d) for _ in range(nblocks)], nn.Linear(d, 1)).to(device)
    params = list(model.parameters())
    if variant == "before":
        opt = torch.optim.Adam(params, lr=1e-4, foreach=False)
    else:
        opt = torch.optim.Adam(params, lr=1e-4, fused=True) if cuda else torch.optim.Adam(params, lr=1e-4)
    xs = [torch.randn(batch, d, device=device) for _ in range(2)]
    state = {"i": 0}

    def step():
        i = state["i"] = state["i"] + 1
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16):
            out = model(xs[i % 2])
        loss = out.float().pow(2).mean()
        loss.backward()
        opt.step()

    info = {"param_tensors": len(params), "params": sum(p.numel() for p in params),
            "optimizer": "Adam(foreach=False)" if variant == "before" else "Adam(fused=True)"}
    return Step(step, info=info)
