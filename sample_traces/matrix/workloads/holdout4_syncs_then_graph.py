"""holdout4_syncs_then_graph: a launch-bound step with per-step syncs -> no syncs -> the step in a CUDA graph.

Fourth held-out set: a small residual MLP (8 blocks of 192, batch 64) with SGD(momentum, foreach), fp32;
each step checks the loss for NaN with .item() and logs the gradient norm with .item() (two syncs).
after_nosync: both kept as GPU tensors (no sync), still launch-bound.
after_graph:  after_nosync with the whole step captured in one CUDA graph.
"""

import torch
import torch.nn as nn

from workloads.unfused_optimizer import Block

from ._util import Step, capture_graph, is_cuda, replay_step

NAME = "holdout4_syncs_then_graph"
EXPECTED_KIND = "launch_overhead"
ROLE = "pair"
VARIANTS = ("before", "after_nosync", "after_graph")
FIX = "keep the NaN check and the gradient norm on the GPU, then capture the step in a CUDA graph"
DESCRIPTION = {
    "before": "8 blocks of 192, batch 64, fp32, SGD(momentum, foreach); loss NaN check + grad-norm .item() per step",
    "after_nosync": "same, the checks kept as GPU tensors",
    "after_graph": "after_nosync, the whole step in one CUDA graph",
}


def make(variant, device, pool=4):
    cuda = is_cuda(device)
    d, batch = (192, 64) if cuda else (16, 4)
    torch.manual_seed(0)
    model = nn.Sequential(*[Block(d) for _ in range(8)], nn.Linear(d, 1)).to(device)
    params = list(model.parameters())
    opt = torch.optim.SGD(params, lr=1e-3, momentum=0.9, foreach=True)
    xs = [torch.randn(batch, d, device=device) for _ in range(pool)]
    stats = {"bad": 0, "norm": 0.0}

    def body(x, sync):
        opt.zero_grad(set_to_none=False)
        loss = model(x).pow(2).mean()
        bad = torch.isnan(loss)
        loss.backward()
        norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in params]))
        if sync:
            stats["bad"] += int(bad.item())
            stats["norm"] = norm.item()
        else:
            stats["bad_t"], stats["norm_t"] = bad, norm
        opt.step()

    if variant == "after_graph" and cuda:
        sx = xs[0].clone()
        g = capture_graph(lambda: body(sx, False), warmup=3)
        return Step(replay_step(g, [(sx, xs)]), info={"cuda_graph": True})
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        body(xs[i % pool], variant == "before")
    return Step(step, info={"syncs_per_step": 2 if variant == "before" else 0})
