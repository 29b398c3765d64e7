"""holdout27_ema_state_dict: a timm ModelEmaV2-style weight EMA over state_dict() -> one foreach lerp.

Twenty-seventh held-out set (pre-registered 2026-11-29 before it was recorded): a per-tensor update loop
*outside* the optimizer. Every earlier unfused pair looped inside ``Optimizer.step`` (torch.optim's for-loop
implementation); diffusion, self-supervised and timm training keep an exponential moving average of the
weights, and the widespread way to write it (timm's ModelEmaV2) walks both state_dicts in Python:
``ema_v.copy_(decay * ema_v + (1 - decay) * model_v)``, four kernels a tensor (two scalings, an add, a copy).
16 residual blocks [LayerNorm(384), Linear(384, 1536), GELU, Linear(1536, 384)] + head (98 tensors, 18.9M
parameters), batch 1024, bf16 autocast, fused AdamW, the EMA after every optimizer step (decay 0.999).
before: the state_dict loop above.
after:  ``torch._foreach_lerp_(ema_tensors, model_tensors, 1 - decay)`` (timm's ModelEmaV3 with foreach).
after_graph_only: the state_dict loop kept, the whole step (forward, backward, capturable fused AdamW, the EMA)
        in one CUDA graph: the launch fix alone, so the ranking of the two can be checked.
"""

import copy

import torch
import torch.nn as nn

from ._util import Step, autocast, capture_graph, is_cuda, replay_step
from .holdout21_healthy_compiled_mlp import Block     # [LayerNorm, up, GELU, down] + residual

NAME = "holdout27_ema_state_dict"
# The measured fix turns a per-tensor update loop into multi-tensor kernels: the foreach advice of
# unfused_optimizer, here for an update outside Optimizer.step (which that analysis keys on as committed).
EXPECTED_KIND = "unfused_optimizer"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph_only")
FIX = "torch._foreach_lerp_(ema, model, 1 - decay) in place of the per-tensor state_dict EMA loop"
DESCRIPTION = {
    "before": ("16 residual MLP blocks (LayerNorm(384), 384->1536->384, GELU) + head, 98 tensors, batch 1024, "
               "bf16 autocast, fused AdamW; weight EMA over state_dict() per tensor (timm ModelEmaV2 style)"),
    "after": "same step; the EMA as one torch._foreach_lerp_ over the state_dict tensors",
    "after_graph_only": "the before step (per-tensor EMA kept) captured in one CUDA graph, capturable fused AdamW",
}
DECAY = 0.999


def ema_loop(ema, model):
    with torch.no_grad():
        for ema_v, model_v in zip(ema.state_dict().values(), model.state_dict().values()):
            ema_v.copy_(DECAY * ema_v + (1.0 - DECAY) * model_v)


def ema_foreach(ema, model):
    with torch.no_grad():
        ev = [v for v in ema.state_dict().values() if v.is_floating_point()]
        mv = [v for v in model.state_dict().values() if v.is_floating_point()]
        torch._foreach_lerp_(ev, mv, 1.0 - DECAY)


def make(variant, device, pool=2):
    cuda = is_cuda(device)
    d, h, batch, nblocks = (384, 1536, 1024, 16) if cuda else (16, 32, 8, 4)
    torch.manual_seed(0)
    model = nn.Sequential(*[Block(d, h) for _ in range(nblocks)], nn.Linear(d, 1)).to(device)
    ema = copy.deepcopy(model).requires_grad_(False)
    params = list(model.parameters())
    graphed = variant == "after_graph_only" and cuda
    opt = torch.optim.AdamW(params, lr=1e-4, fused=True if cuda else None, capturable=graphed)
    update = ema_foreach if variant == "after" else ema_loop
    xs = [torch.randn(batch, d, device=device) for _ in range(pool)]
    info = {"param_tensors": len(params), "params": sum(p.numel() for p in params), "batch": batch,
            "ema": "foreach_lerp" if variant == "after" else "state_dict loop (4 kernels a tensor)"}
    if graphed:
        sx = xs[0].clone()

        def body():
            opt.zero_grad(set_to_none=False)
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16, cache_enabled=False):
                out = model(sx)
            out.float().pow(2).mean().backward()
            opt.step()
            ema_loop(ema, model)

        g = capture_graph(body, warmup=3)
        return Step(replay_step(g, [(sx, xs)]), info={**info, "cuda_graph": True})
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            out = model(xs[i % pool])
        out.float().pow(2).mean().backward()
        opt.step()
        update(ema, model)

    return Step(step, info=info)
