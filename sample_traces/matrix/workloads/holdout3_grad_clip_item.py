"""holdout3_grad_clip_item: gradient clipping that reads the norm with .item() every step -> no sync.

Third held-out set (written after the no-launch host rule): a launch-bound training step with one sync.

before: 6 residual blocks [LayerNorm(256), Linear(256,256), GELU] + head, batch 256, bf16 autocast,
        fused Adam; after backward, norm = clip_grad_norm_(params, 1.0) and `if norm.item() > 100: skip`.
after:  the same clipping, no .item(): clip_grad_norm_(..., error_if_nonfinite=False) and nothing read back.
after_graph: after, with the whole step captured in one CUDA graph (added after the held-out run: the tool
        ranked launch_overhead above the sync on every row, and the sync fix alone measured slower).
"""

import torch
import torch.nn as nn

from workloads.unfused_optimizer import Block

from ._util import Step, autocast, capture_graph, is_cuda, replay_step

NAME = "holdout3_grad_clip_item"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph")
FIX = "do not read the gradient norm back each step (no .item())"
DESCRIPTION = {
    "before": "6 blocks of 256, batch 256, bf16, fused Adam, clip_grad_norm_ then norm.item() every step",
    "after": "same clipping, the norm not read back",
    "after_graph": "after, the whole step in one CUDA graph (capturable fused Adam)",
}


def make(variant, device):
    cuda = is_cuda(device)
    d, batch = (256, 256) if cuda else (16, 8)
    torch.manual_seed(0)
    model = nn.Sequential(*[Block(d) for _ in range(6)], nn.Linear(d, 1)).to(device)
    params = list(model.parameters())
    graph = variant == "after_graph" and cuda
    opt = torch.optim.Adam(params, lr=1e-4, fused=True if cuda else None, capturable=graph)
    xs = [torch.randn(batch, d, device=device) for _ in range(2)]
    if graph:
        sx = xs[0].clone()

        def body():
            opt.zero_grad(set_to_none=False)
            # The autocast weight cache must be off inside a graph (torch.cuda.graph docs).
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16, cache_enabled=False):
                out = model(sx)
            out.float().pow(2).mean().backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
        return Step(replay_step(capture_graph(body, warmup=3), [(sx, xs)]), info={"cuda_graph": True})
    st = {"i": 0, "skipped": 0}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            out = model(xs[i % 2])
        out.float().pow(2).mean().backward()
        norm = torch.nn.utils.clip_grad_norm_(params, 1.0)
        if variant == "before" and norm.item() > 100.0:
            st["skipped"] += 1
            return
        opt.step()
    return Step(step, info={"sync": variant == "before"})
