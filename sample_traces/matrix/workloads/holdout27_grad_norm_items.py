"""holdout27_grad_norm_items: per-parameter gradient norms logged with .item() every step -> one copy.

Twenty-seventh held-out set (pre-registered 2026-11-29 before it was recorded): the "log every layer's gradient
norm" loop (``{n: p.grad.norm().item() for n, p in model.named_parameters()}`` before the optimizer step, as in
many wandb / tensorboard callbacks): 74 reads a step, each a sync behind one small reduction, in a GPU-heavy step
(12 residual blocks [LayerNorm(1024), Linear(1024, 4096), GELU, Linear(4096, 1024)] + head, batch 2048, bf16
autocast, fused AdamW). Every earlier sync pair had one to four reads a step.
before: one .item() per parameter tensor per step.
after:  ``torch._foreach_norm`` over the gradients, stacked, one ``.cpu()`` a step (the usual fix; one sync kept).
after_nosync: the stacked norms written into a GPU buffer, one ``.cpu()`` of it every 50 steps.
after_graph: added after recording (the tool's top finding was launch_overhead, after the syncs, which the set
        did not measure): the after_nosync step, its norms written at a GPU-side position, captured in one CUDA
        graph (capturable fused AdamW); the .cpu() of the buffer every 50 steps stays outside the graph.
"""

import torch
import torch.nn as nn

from ._util import Step, autocast, capture_graph, is_cuda, replay_step
from .holdout21_healthy_compiled_mlp import Block     # [LayerNorm, up, GELU, down] + residual

NAME = "holdout27_grad_norm_items"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after", "after_nosync", "after_graph")
FIX = "torch._foreach_norm over the gradients, one stacked .cpu() per step (or per 50 steps)"
DESCRIPTION = {
    "before": ("12 residual MLP blocks (LayerNorm(1024), 1024->4096->1024, GELU) + head, batch 2048, bf16 autocast, "
               "fused AdamW; every parameter's gradient norm read with .item() each step (74 reads)"),
    "after": "same step; torch._foreach_norm over the gradients, stacked, one .cpu() per step",
    "after_nosync": "same step; the stacked norms kept in a GPU buffer, one .cpu() every 50 steps",
    "after_graph": "the after_nosync step captured in one CUDA graph (capturable fused AdamW); the buffer read outside it",
}
EVERY = 50


def make(variant, device, pool=2):
    cuda = is_cuda(device)
    d, h, batch, nblocks = (1024, 4096, 2048, 12) if cuda else (16, 32, 8, 2)
    torch.manual_seed(0)
    model = nn.Sequential(*[Block(d, h) for _ in range(nblocks)], nn.Linear(d, 1)).to(device)
    named = list(model.named_parameters())
    graphed = variant == "after_graph" and cuda
    opt = torch.optim.AdamW([p for _, p in named], lr=1e-4, fused=True if cuda else None, capturable=graphed)
    xs = [torch.randn(batch, d, device=device) for _ in range(pool)]
    buf = torch.zeros(EVERY, len(named), device=device)
    st = {"i": 0, "log": []}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            out = model(xs[i % pool])
        out.float().pow(2).mean().backward()
        if variant == "before":
            st["log"].append({n: p.grad.norm().item() for n, p in named})
        else:
            norms = torch.stack(torch._foreach_norm([p.grad for _, p in named]))
            if variant == "after":
                st["log"].append(dict(zip((n for n, _ in named), norms.cpu().tolist())))
            else:
                buf[i % EVERY] = norms
                if i % EVERY == 0:
                    st["log"].append(buf.cpu())
        opt.step()
        if len(st["log"]) > 200:
            st["log"].clear()

    info = {"param_tensors": len(named), "batch": batch,
            "reads_per_step": {"before": len(named), "after": 1}.get(variant, 1 / EVERY)}
    if not graphed:
        return Step(step, info=info)
    sx = xs[0].clone()
    pos = torch.zeros((), dtype=torch.long, device=device)

    def graph_body():
        opt.zero_grad(set_to_none=False)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16, cache_enabled=False):
            out = model(sx)
        out.float().pow(2).mean().backward()
        norms = torch.stack(torch._foreach_norm([p.grad for _, p in named]))
        buf.index_copy_(0, pos.view(1), norms.view(1, -1))
        pos.add_(1).remainder_(EVERY)
        opt.step()

    g = capture_graph(graph_body, warmup=3)

    def read(i):
        if i % EVERY == 0:
            st["log"].append(buf.cpu())
        if len(st["log"]) > 200:
            st["log"].clear()
    return Step(replay_step(g, [(sx, xs)], after=read), info={**info, "cuda_graph": True})
