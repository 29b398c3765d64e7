"""holdout21_healthy_compiled_mlp: a GPU-bound bf16 MLP trained under torch.compile (default mode): healthy.

Twenty-first held-out set, a trap for fusion_candidates and launch_overhead: inductor has already fused
the pointwise work into Triton kernels and the GEMMs are large, so the GPU is busy and the advice to
compile (or to fuse) would be advice the program already follows. 6 residual blocks of
[LayerNorm(2048), Linear(2048, 8192), GELU, Linear(8192, 2048)], batch 4096, bf16 autocast,
torch.compile(model) with the loss inside, fused AdamW.
"""

import torch
import torch.nn as nn

from ._util import Step, autocast, cpu_mode, is_cuda

NAME = "holdout21_healthy_compiled_mlp"
EXPECTED_KIND = "healthy"
ROLE = "healthy"
VARIANTS = ("before",)
FIX = None
DESCRIPTION = {"before": ("6 residual MLP blocks (LayerNorm, 2048->8192->2048, GELU), batch 4096, bf16 autocast, "
                          "torch.compile default, fused AdamW")}
WARMUP_STEPS = 8


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.norm, self.up, self.down = nn.LayerNorm(d), nn.Linear(d, h), nn.Linear(h, d)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


def make(variant, device):
    cuda = is_cuda(device)
    d, h, batch, nblocks = (2048, 8192, 4096, 6) if cuda else (32, 64, 8, 2)
    torch.manual_seed(0)
    model = nn.Sequential(*[Block(d, h) for _ in range(nblocks)]).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    compiled = not cpu_mode()

    def loss_fn(x):
        with autocast(device):
            return model(x).float().pow(2).mean()
    if compiled:
        torch._dynamo.reset()
        loss_fn = torch.compile(loss_fn)
    xs = [torch.randn(batch, d, device=device) for _ in range(2)]
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        loss_fn(xs[i % 2]).backward()
        opt.step()

    def close():
        if compiled:
            torch._dynamo.reset()
    return Step(step, close=close, info={"batch": batch, "width": d, "hidden": h, "blocks": nblocks,
                                         "compiled": compiled, "amp": "bf16"})
