"""holdout35_compiled_norm_log: a compiled model that logs each block's activation norm with `.item()` -> kept on GPU.

Thirty-fifth held-out set (written after the graph-break merge learned to read, without Python stacks, a break in
a frame Dynamo gave up on from the regions' compile ids; before any GPU trace of the program existed). Per-layer
activation statistics logged inside the forward are common in training code. The `.item()` inside the loop over
blocks breaks the graph inside a loop, so Dynamo gives up on the model's forward (frame 0) and compiles each block
apart (frame 1): on CPU (torch 2.13, backend="eager") the profiled regions read "Torch-Compiled Region: 1/0" and
"1/1", none of frame 0. Its partner, holdout35_regional_norm_log, logs the same way between blocks compiled one
by one (regional compilation), where the regions are of frame 0 and removing the sync merges nothing.
before: 6 residual MLP blocks (LayerNorm, 1024 -> 4096 -> 1024, GELU), batch 1024, bf16 autocast, the model under
        torch.compile (default mode), MSE-like loss in eager, fused AdamW; after each block the activation norm is
        read with `.item()` into a Python list (6 syncs and 6 breaks a step).
after:  the norms kept on the GPU (torch.stack of them, read by nobody in the timed steps): one graph, no sync.
after_graph: that under torch.compile(mode="reduce-overhead").
"""

import torch
import torch.nn as nn

from ._util import Step, autocast, cpu_mode, is_cuda

NAME = "holdout35_compiled_norm_log"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph")
FIX = "keep the per-block norms on the GPU (torch.stack, read rarely): no graph breaks, no syncs"
DESCRIPTION = {
    "before": ("6 residual MLP blocks (LayerNorm, 1024->4096->1024, GELU), batch 1024, bf16 autocast, the model under "
               "torch.compile default, fused AdamW; each block's activation norm read with .item() in the forward's "
               "loop (6 graph breaks and syncs a step)"),
    "after": "same, the norms kept on the GPU (torch.stack; one graph, no sync)",
    "after_graph": 'same as after, torch.compile(mode="reduce-overhead")',
}
WARMUP_STEPS = 8


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.norm, self.up, self.down = nn.LayerNorm(d), nn.Linear(d, h), nn.Linear(h, d)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class Net(nn.Module):
    def __init__(self, d, h, n, on_gpu):
        super().__init__()
        self.blocks = nn.ModuleList(Block(d, h) for _ in range(n))
        self.on_gpu = on_gpu

    def forward(self, x):
        norms = []
        for blk in self.blocks:
            x = blk(x)
            norm = x.detach().float().norm()
            norms.append(norm if self.on_gpu else norm.item())
        return x, (torch.stack(norms) if self.on_gpu else norms)


def make(variant, device):
    cuda = is_cuda(device)
    d, h, batch, nblocks = (1024, 4096, 1024, 6) if cuda else (32, 64, 8, 6)
    torch.manual_seed(0)
    model = Net(d, h, nblocks, on_gpu=variant != "before").to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    compiled = not cpu_mode()
    fn = model
    if compiled:
        torch._dynamo.reset()
        fn = torch.compile(model, mode="reduce-overhead" if variant == "after_graph" else "default")
    xs = [torch.randn(batch, d, device=device) for _ in range(2)]
    st = {"i": 0, "norms": None}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            out, st["norms"] = fn(xs[i % 2])
            loss = out.float().pow(2).mean()
        loss.backward()
        opt.step()

    def close():
        if compiled:
            torch._dynamo.reset()
    return Step(step, close=close, info={"batch": batch, "width": d, "hidden": h, "blocks": nblocks,
                                         "compiled": compiled, "amp": "bf16",
                                         "norms": "on the GPU" if variant != "before" else ".item() per block",
                                         "mode": "reduce-overhead" if variant == "after_graph" else "default"})
