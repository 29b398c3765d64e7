"""holdout35_regional_norm_log: blocks compiled one by one, each block's norm read with `.item()` between them -> kept
on the GPU.

Thirty-fifth held-out set, the partner of holdout35_compiled_norm_log (see there): the same model and logging,
but compiled regionally (each block's module compiled apart, the forward's loop in eager Python), as large models
are to cut compile time. The syncs sit between compiled regions, as in the partner, but no graph is broken: the
regions are of frame 0 (on CPU, torch 2.13: "Torch-Compiled Region: 0/0" and "0/1"), and keeping the norms on the
GPU removes the waits and the host reads, not the regions.
before: 6 residual MLP blocks (LayerNorm, 1024 -> 4096 -> 1024, GELU), batch 1024, bf16 autocast, each block
        compiled (module.compile(), default mode), fused AdamW; after each block the activation norm is read with
        `.item()` into a Python list (6 syncs a step).
after:  the norms kept on the GPU (torch.stack of them, read by nobody in the timed steps): the same 6 regions, no
        sync.
after_graph_only: the `.item()` logging kept, each block compiled with mode="reduce-overhead" (6 CUDA graphs a
        forward, the syncs between them). Added after the set was scored (the tool ranked launch_overhead first on
        these traces, and it had not been measured); registered at the commit that adds it, recorded in new
        processes (h200_clean39A-D) with the other two variants.
"""

import torch

from ._util import Step, autocast, cpu_mode, is_cuda
from .holdout35_compiled_norm_log import Net

NAME = "holdout35_regional_norm_log"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph_only")
FIX = "keep the per-block norms on the GPU (torch.stack, read rarely): no syncs (the regions stay)"
DESCRIPTION = {
    "before": ("6 residual MLP blocks (LayerNorm, 1024->4096->1024, GELU), batch 1024, bf16 autocast, each block "
               "compiled apart (regional compilation, default mode), fused AdamW; each block's activation norm read "
               "with .item() in the eager loop over blocks (6 syncs a step)"),
    "after": "same, the norms kept on the GPU (torch.stack; 6 regions, no sync)",
    "after_graph_only": 'same as before (the .item() logging), each block compiled with mode="reduce-overhead"',
}
WARMUP_STEPS = 8


def make(variant, device):
    cuda = is_cuda(device)
    d, h, batch, nblocks = (1024, 4096, 1024, 6) if cuda else (32, 64, 8, 6)
    torch.manual_seed(0)
    model = Net(d, h, nblocks, on_gpu=variant == "after").to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    compiled = not cpu_mode()
    if compiled:
        torch._dynamo.reset()
        for blk in model.blocks:
            blk.compile(mode="reduce-overhead" if variant == "after_graph_only" else "default")
    st = {"i": 0, "norms": None}
    xs = [torch.randn(batch, d, device=device) for _ in range(2)]

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            out, st["norms"] = model(xs[i % 2])
            loss = out.float().pow(2).mean()
        loss.backward()
        opt.step()

    def close():
        if compiled:
            torch._dynamo.reset()
    return Step(step, close=close, info={"batch": batch, "width": d, "hidden": h, "blocks": nblocks,
                                         "compiled": "each block apart" if compiled else False, "amp": "bf16",
                                         "norms": "on the GPU" if variant == "after" else ".item() per block",
                                         "mode": "reduce-overhead" if variant == "after_graph_only" else "default"})
