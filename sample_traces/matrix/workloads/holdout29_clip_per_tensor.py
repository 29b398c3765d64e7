"""holdout29_clip_per_tensor: gradient clipping one tensor at a time -> clip_grad_norm_(foreach=True).

Twenty-ninth held-out set (pre-registered 2026-11-29 before it was recorded): a per-tensor loop *between the
backward and the optimizer step*, where the twenty-seventh and twenty-eighth sets' loops ran after it.
``torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=False)`` takes each gradient's norm in its own kernel, then
scales each gradient in its own kernel (two launches a tensor, no sync); with foreach=True both are multi-tensor
kernels. Model: 24 residual blocks [LayerNorm(512), Linear(512, 512), SiLU] + input and output layers, 100
tensors, batch 256, bf16 autocast, fused Adam.
before: clip_grad_norm_(params, 1.0, foreach=False) before every optimizer step.
after:  clip_grad_norm_(params, 1.0, foreach=True).
after_graph_only: the before step (per-tensor clipping kept) in one CUDA graph, capturable fused Adam: the launch
        fix alone, so the ranking of the two can be checked.
"""

import torch
import torch.nn as nn

from ._util import Step, capture_graph, is_cuda, replay_step

NAME = "holdout29_clip_per_tensor"
EXPECTED_KIND = "unfused_optimizer"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph_only")
FIX = "torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=True) in place of foreach=False"
DESCRIPTION = {
    "before": ("24 residual blocks (LayerNorm(512), Linear(512, 512), SiLU) + in/out layers, 100 tensors, batch 256, "
               "bf16 autocast, fused Adam; clip_grad_norm_(foreach=False) before each optimizer step"),
    "after": "same step; clip_grad_norm_(foreach=True)",
    "after_graph_only": "the before step (per-tensor clipping kept) captured in one CUDA graph, capturable fused Adam",
}


class Res(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm, self.lin = nn.LayerNorm(d), nn.Linear(d, d)

    def forward(self, x):
        return x + torch.nn.functional.silu(self.lin(self.norm(x)))


def make(variant, device, pool=2):
    cuda = is_cuda(device)
    d, depth, batch = (512, 24, 256) if cuda else (16, 3, 4)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(d, d), *[Res(d) for _ in range(depth)], nn.Linear(d, 1)).to(device)
    params = list(model.parameters())
    graphed = variant == "after_graph_only" and cuda
    opt = torch.optim.Adam(params, lr=1e-4, fused=True if cuda else None, capturable=graphed)
    foreach = variant == "after"
    xs = [torch.randn(batch, d, device=device) for _ in range(pool)]
    info = {"param_tensors": len(params), "params": sum(p.numel() for p in params), "batch": batch,
            "clip": "foreach" if foreach else "per tensor (foreach=False)"}

    def body_of(x):
        with torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16, cache_enabled=False):
            out = model(x)
        out.float().pow(2).mean().backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=foreach)
        opt.step()

    if graphed:
        sx = xs[0].clone()

        def body():
            opt.zero_grad(set_to_none=False)
            body_of(sx)

        g = capture_graph(body, warmup=3)
        return Step(replay_step(g, [(sx, xs)]), info={**info, "cuda_graph": True})
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        body_of(xs[i % pool])

    return Step(step, info=info)
