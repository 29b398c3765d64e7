"""holdout28_ema_gpu_bound: the timm ModelEmaV2-style EMA loop in a GPU-bound step -> foreach lerp.

Twenty-eighth held-out set (pre-registered 2026-11-29 before it was recorded): the twenty-seventh set's EMA loop
ran in CPU-bound steps, where its launches were the cost. Here the step is GPU-bound (6 residual blocks
[LayerNorm(2048), Linear(2048, 8192), GELU, Linear(8192, 2048)] + head, 38 tensors, 201M parameters, batch
4096, bf16 autocast, fused AdamW): the loop's Python runs while the GPU is busy, and what the fix can save is
its GPU time (four passes over 201M fp32 values a tensor's worth at a time, against one lerp pass), so a
small speed-up is the expected measurement and an estimate that counts the launches would overclaim.
before: ``ema_v.copy_(decay * ema_v + (1 - decay) * model_v)`` over both state_dicts after every step.
after:  ``torch._foreach_lerp_(ema_tensors, model_tensors, 1 - decay)``.
after_compile: added after recording (the tool's top finding was fusion_candidates, which the set did not
        measure): the forward and loss under torch.compile (default mode), the EMA loop kept as before.
"""

import copy

import torch
import torch.nn as nn

from ._util import Step, autocast, cpu_mode, is_cuda
from .holdout21_healthy_compiled_mlp import Block     # [LayerNorm, up, GELU, down] + residual
from .holdout27_ema_state_dict import ema_foreach, ema_loop

NAME = "holdout28_ema_gpu_bound"
EXPECTED_KIND = "unfused_optimizer"
ROLE = "pair"
VARIANTS = ("before", "after", "after_compile")
WARMUP_STEPS = 8
FIX = "torch._foreach_lerp_(ema, model, 1 - decay) in place of the per-tensor state_dict EMA loop"
DESCRIPTION = {
    "before": ("6 residual MLP blocks (LayerNorm(2048), 2048->8192->2048, GELU) + head, batch 4096, bf16 autocast, "
               "fused AdamW, GPU-bound; weight EMA over state_dict() per tensor (timm ModelEmaV2 style)"),
    "after": "same step; the EMA as one torch._foreach_lerp_ over the state_dict tensors",
    "after_compile": "the before step (per-tensor EMA kept) with the forward and loss under torch.compile (default)",
}


def make(variant, device, pool=2):
    cuda = is_cuda(device)
    d, h, batch, nblocks = (2048, 8192, 4096, 6) if cuda else (16, 32, 8, 2)
    torch.manual_seed(0)
    model = nn.Sequential(*[Block(d, h) for _ in range(nblocks)], nn.Linear(d, 1)).to(device)
    ema = copy.deepcopy(model).requires_grad_(False)
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=1e-4, fused=True if cuda else None)
    update = ema_foreach if variant == "after" else ema_loop
    xs = [torch.randn(batch, d, device=device) for _ in range(pool)]
    st = {"i": 0}

    def loss_fn(x):
        with autocast(device):
            return model(x).float().pow(2).mean()
    compiled = variant == "after_compile" and not cpu_mode()
    if compiled:
        torch._dynamo.reset()
        loss_fn = torch.compile(loss_fn)

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        loss_fn(xs[i % pool]).backward()
        opt.step()
        update(ema, model)

    def close():
        if compiled:
            torch._dynamo.reset()

    return Step(step, close=close, info={"compiled": compiled, "param_tensors": len(params), "params": sum(p.numel() for p in params), "batch": batch,
                            "ema": "foreach_lerp" if variant == "after" else "state_dict loop (4 kernels a tensor)"})
