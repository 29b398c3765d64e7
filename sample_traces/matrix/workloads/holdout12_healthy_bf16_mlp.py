"""holdout12_healthy_bf16_mlp: a GPU-bound bf16 MLP training step: healthy.

Twelfth held-out set: a large, GPU-bound step (a 4-layer MLP 8192 wide, batch 8192, bf16 autocast,
fused AdamW, no syncs, no host work) recorded under both profiler settings; the tool must call it
healthy (judged, as every healthy row, by the measured un-profiled idle).
"""

import torch
import torch.nn.functional as F

from ._util import Step, autocast, is_cuda, mlp

NAME = "holdout12_healthy_bf16_mlp"
EXPECTED_KIND = "healthy"
ROLE = "healthy"
VARIANTS = ("before",)
FIX = None
DESCRIPTION = {"before": "MLP 4096->8192 (4 hidden)->4096, batch 8192, bf16 autocast, fused AdamW, MSE loss"}


def make(variant, device, pool=2):
    cuda = is_cuda(device)
    batch, din, dim = (8192, 4096, 8192) if cuda else (8, 16, 32)
    torch.manual_seed(0)
    model = mlp(din, dim, 4, din).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    xs = [torch.randn(batch, din, device=device) for _ in range(pool)]
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            out = model(xs[i % pool])
        F.mse_loss(out.float(), xs[i % pool]).backward()
        opt.step()
    return Step(step, info={"batch": batch})
