"""holdout22_sgd_foreach_off: SGD with momentum and foreach=False over many parameter tensors -> fused SGD.

Twenty-second held-out set (written after the FP32 convolutions and the code-shape review of 2026-11-28): the
unfused optimizer on SGD rather than Adam (every earlier pair used Adam or AdamW), a deeper model with more and
smaller tensors. 16 residual blocks [LayerNorm(384), Linear(384, 1536), GELU, Linear(1536, 384)] + head
(98 parameter tensors, 18.9M parameters; the recorded manifests' descriptions say 97), batch 1024, bf16 autocast,
SGD(lr, momentum=0.9, weight_decay=1e-4).
before: SGD(..., foreach=False): one small kernel (or three) per tensor for weight decay, momentum and update.
after:  SGD(..., fused=True).
after_graph_only: the unfused SGD kept, the whole step captured in one CUDA graph (the launch fix alone, so the
        ranking of the two can be checked).
"""

import torch
import torch.nn as nn

from ._util import Step, autocast, graphed_train_step, is_cuda
from .holdout21_healthy_compiled_mlp import Block     # [LayerNorm, up, GELU, down] + residual

NAME = "holdout22_sgd_foreach_off"
EXPECTED_KIND = "unfused_optimizer"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph_only")
FIX = "torch.optim.SGD(fused=True) instead of SGD(foreach=False)"
DESCRIPTION = {
    "before": ("16 residual MLP blocks (LayerNorm(384), 384->1536->384, GELU) + head, 98 param tensors, batch 1024, "
               "bf16 autocast, SGD(momentum=0.9, weight_decay=1e-4, foreach=False)"),
    "after": "same model, SGD(momentum=0.9, weight_decay=1e-4, fused=True)",
    "after_graph_only": "same model and SGD(foreach=False), the whole step in one CUDA graph",
}


def make(variant, device):
    cuda = is_cuda(device)
    d, h, batch, nblocks = (384, 1536, 1024, 16) if cuda else (16, 32, 8, 4)
    torch.manual_seed(0)
    model = nn.Sequential(*[Block(d, h) for _ in range(nblocks)], nn.Linear(d, 1)).to(device)
    params = list(model.parameters())
    kw = {"lr": 1e-3, "momentum": 0.9, "weight_decay": 1e-4}
    if variant == "after_graph_only" and cuda:
        return graphed(model, params, kw, d, batch, device)
    if variant != "after":
        opt = torch.optim.SGD(params, foreach=False, **kw)
    else:
        opt = torch.optim.SGD(params, fused=True if cuda else None, **kw)
    xs = [torch.randn(batch, d, device=device) for _ in range(2)]
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            out = model(xs[i % 2])
        out.float().pow(2).mean().backward()
        opt.step()

    return Step(step, info={"param_tensors": len(params), "params": sum(p.numel() for p in params),
                            "optimizer": "SGD(foreach=False)" if variant != "after" else "SGD(fused=True)",
                            "batch": batch, "width": d, "blocks": nblocks})


def graphed(model, params, kw, d, batch, device, pool=2):
    opt = torch.optim.SGD(params, foreach=False, **kw)
    step = graphed_train_step(model, opt, d, batch, device, pool)
    return Step(step, info={"param_tensors": len(params), "optimizer": "SGD(foreach=False)", "batch": batch,
                            "width": d, "cuda_graph": True})
