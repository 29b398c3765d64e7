"""holdout23_empty_cache_step: torch.cuda.empty_cache() after every training step.

Twenty-third held-out set (pre-registered 2026-11-29 before it was recorded): a pattern users bring "to free
memory" that no earlier pair had. empty_cache hands the caching allocator's free blocks back to the driver
(cudaFree, which waits for the device), so each step ends in a device-wide wait and the next step's
activations come from fresh cudaMalloc calls. 6 residual MLP blocks [LayerNorm(1024), Linear(1024, 4096),
GELU, Linear(4096, 1024)], batch 2048, bf16 autocast, fused AdamW.
before: step, then torch.cuda.empty_cache().
after:  the same step without empty_cache.
after_graph (added once the set was read, 2026-11-29 07:15Z, before anything in the tool changed: the tool ranked
        launch_overhead first on every trace, which nobody had measured): no empty_cache, the step in one CUDA
        graph (capturable fused AdamW): the tool's plan, the sync and then the launches. (Graphed with
        empty_cache still after each replay, as first written, the replays hit an illegal memory access on
        both processes, h200_clean20F/G.)
"""

import torch
import torch.nn as nn

from ._util import Step, autocast, graphed_train_step, is_cuda
from .holdout21_healthy_compiled_mlp import Block     # [LayerNorm, up, GELU, down] + residual

NAME = "holdout23_empty_cache_step"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph")
FIX = "drop the per-step torch.cuda.empty_cache() (the caching allocator reuses its blocks)"
DESCRIPTION = {
    "before": ("6 residual MLP blocks (LayerNorm(1024), 1024->4096->1024, GELU), batch 2048, bf16 autocast, fused "
               "AdamW; torch.cuda.empty_cache() after each step"),
    "after": "same step, no empty_cache",
    "after_graph": "no empty_cache, the step in one CUDA graph (capturable fused AdamW)",
}


def make(variant, device):
    cuda = is_cuda(device)
    d, h, batch, nblocks = (1024, 4096, 2048, 6) if cuda else (16, 32, 8, 2)
    torch.manual_seed(0)
    model = nn.Sequential(*[Block(d, h) for _ in range(nblocks)], nn.Linear(d, 1)).to(device)
    graph = variant == "after_graph" and cuda
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None,
                            **({"capturable": True} if graph else {}))
    xs = [torch.randn(batch, d, device=device) for _ in range(2)]
    if graph:
        return Step(graphed_train_step(model, opt, d, batch, device),
                    info={"batch": batch, "width": d, "blocks": nblocks, "empty_cache": False, "cuda_graph": True})
    st = {"i": 0}
    free = variant == "before" and cuda

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            out = model(xs[i % 2])
        out.float().pow(2).mean().backward()
        opt.step()
        if free:
            torch.cuda.empty_cache()

    return Step(step, info={"batch": batch, "width": d, "blocks": nblocks, "empty_cache": free})
