"""holdout_adamw_loop: AdamW(foreach=False) -> fused AdamW, or the whole step in one CUDA graph.

Held out (written after the capturable model was fixed on unfused_optimizer): another model and
optimizer. To be captured, AdamW(foreach=False) must be capturable=True (its step count moves to the GPU).

before: 5 residual blocks [LayerNorm(640), Linear(640,640), GELU] + head (22 parameter tensors),
        batch 1024, bf16 autocast, AdamW(foreach=False).
after:  AdamW(fused=True), eager.
after_graph_only: AdamW(foreach=False, capturable=True), the whole step in one CUDA graph.
"""

import torch
import torch.nn as nn

from workloads.unfused_optimizer import Block

from ._util import Step, autocast, capture_graph, is_cuda, replay_step

NAME = "holdout_adamw_loop"
EXPECTED_KIND = "unfused_optimizer"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph_only")
FIX = "AdamW(fused=True)"
DESCRIPTION = {
    "before": "5 blocks of 640 + head (22 tensors), batch 1024, bf16, AdamW(foreach=False)",
    "after": "same, AdamW(fused=True)",
    "after_graph_only": "same, AdamW(foreach=False, capturable=True), whole step in one CUDA graph",
}


def build(device):
    cuda = is_cuda(device)
    d, batch, nblocks = (640, 1024, 5) if cuda else (32, 16, 2)
    torch.manual_seed(0)
    model = nn.Sequential(*[Block(d) for _ in range(nblocks)], nn.Linear(d, 1)).to(device)
    xs = [torch.randn(batch, d, device=device) for _ in range(2)]
    return model, xs


def eager_step(model, xs, opt, device, info):
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            out = model(xs[i % 2])
        out.float().pow(2).mean().backward()
        opt.step()
    return Step(step, info=info)


def graph_step(model, xs, opt, info):
    sx = xs[0].clone()

    def body():
        opt.zero_grad(set_to_none=False)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16, cache_enabled=False):
            out = model(sx)
        out.float().pow(2).mean().backward()
        opt.step()
    return Step(replay_step(capture_graph(body, warmup=3), [(sx, xs)]), info=dict(info, cuda_graph=True))


def make(variant, device):
    cuda = is_cuda(device)
    model, xs = build(device)
    params = list(model.parameters())
    info = {"param_tensors": len(params), "variant": variant}
    if variant == "after_graph_only" and cuda:
        return graph_step(model, xs, torch.optim.AdamW(params, lr=1e-4, foreach=False, capturable=True), info)
    if variant == "after":
        return eager_step(model, xs, torch.optim.AdamW(params, lr=1e-4, fused=True if cuda else None), device, info)
    return eager_step(model, xs, torch.optim.AdamW(params, lr=1e-4, foreach=False), device, info)
