"""holdout31_compiled_item_branch: a compiled training step whose forward branches on `.item()` -> torch.where.

Thirty-first held-out set (written with the tool at the commit that registers it, before any GPU trace of the
program existed): a kind of program the matrix had not held, a torch.compile'd model with a data-dependent
Python branch in its forward. A guard against activations blowing up (`if h.abs().amax().item() > LIMIT: h =
h / h.abs().amax()`) after the third of six residual blocks breaks the compiled graph there: dynamo runs the
forward as two graphs (and AOT autograd the backward as two), and the `.item()` between them makes the CPU wait
for the first graph's GPU work before it launches the rest.
before: 6 residual MLP blocks (LayerNorm, 2048 -> 4096 -> 2048, GELU), batch 2048, bf16 autocast, the model and
        loss under torch.compile (default mode), fused AdamW; the guard with `.item()` after block 3.
after:  the same guard written without leaving the GPU (torch.where on the amax): one graph, no sync.
after_graph: that, compiled with mode="reduce-overhead" (the graph replayed as a CUDA graph).
after_graph_only: the `.item()` guard kept, compiled with mode="reduce-overhead" (two CUDA graphs, the sync
        between them).
The guard never fires on these activations (LIMIT is far above them), so both variants do the same arithmetic.
"""

import torch
import torch.nn as nn

from ._util import Step, autocast, cpu_mode, is_cuda

NAME = "holdout31_compiled_item_branch"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph", "after_graph_only")
FIX = "the guard as h = torch.where(amax > LIMIT, h / amax, h): no .item(), so no graph break and no sync"
DESCRIPTION = {
    "before": ("6 residual MLP blocks (LayerNorm, 2048->4096->2048, GELU), batch 2048, bf16 autocast, torch.compile "
               "default, fused AdamW; `if h.abs().amax().item() > 1e4` guard after block 3 (a graph break and a sync)"),
    "after": "same, the guard as torch.where on the amax (one graph, no sync)",
    "after_graph": 'same as after, torch.compile(mode="reduce-overhead")',
    "after_graph_only": 'same as before (the .item() guard), torch.compile(mode="reduce-overhead")',
}
WARMUP_STEPS = 8
LIMIT = 1e4


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.norm, self.up, self.down = nn.LayerNorm(d), nn.Linear(d, h), nn.Linear(h, d)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class Net(nn.Module):
    def __init__(self, d, h, n, on_gpu_guard):
        super().__init__()
        self.blocks = nn.ModuleList(Block(d, h) for _ in range(n))
        self.on_gpu_guard = on_gpu_guard

    def forward(self, x):
        for i, blk in enumerate(self.blocks):
            x = blk(x)
            if i == 2:
                amax = x.abs().amax()
                if self.on_gpu_guard:
                    x = torch.where(amax > LIMIT, x / amax, x)
                elif amax.item() > LIMIT:
                    x = x / amax
        return x


def make(variant, device):
    cuda = is_cuda(device)
    d, h, batch, nblocks = (2048, 4096, 2048, 6) if cuda else (32, 64, 8, 6)
    torch.manual_seed(0)
    model = Net(d, h, nblocks, on_gpu_guard=variant in ("after", "after_graph")).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    compiled = not cpu_mode()

    def loss_fn(x):
        with autocast(device):
            return model(x).float().pow(2).mean()
    if compiled:
        torch._dynamo.reset()
        mode = "reduce-overhead" if variant in ("after_graph", "after_graph_only") else "default"
        loss_fn = torch.compile(loss_fn, mode=mode)
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
                                         "compiled": compiled, "amp": "bf16", "guard": "torch.where" if
                                         variant in ("after", "after_graph") else ".item() branch",
                                         "mode": "reduce-overhead" if "graph" in variant else "default"})
