"""unfused_optimizer: Adam(foreach=False) over many small parameter tensors -> Adam(fused=True).

Reuses the Block of sample_traces/workloads/unfused_optimizer.py, smaller (6 blocks of width 512,
26 parameter tensors, batch 2048) to keep the trace small.

after_graph_only: the unfused optimizer kept (Adam(foreach=False, capturable=True)), the whole step
captured in one CUDA graph: the launch fix alone, measured to check how it ranks against the
fused optimizer.
"""

import torch
import torch.nn as nn

from workloads.unfused_optimizer import Block

from ._util import Step, autocast, graphed_train_step, is_cuda

NAME = "unfused_optimizer"
EXPECTED_KIND = "unfused_optimizer"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph_only")
FIX = "torch.optim.Adam(fused=True) instead of Adam(foreach=False)"
DESCRIPTION = {
    "before": ("6 residual blocks [LayerNorm(512), Linear(512,512), GELU] + head (26 param tensors, 1.6M params), "
               "batch 2048, bf16 autocast, Adam(foreach=False)"),
    "after": "same model, Adam(fused=True)",
    "after_graph_only": "same model, Adam(foreach=False, capturable=True), the whole step in one CUDA graph",
}
SOURCE = "Block from sample_traces/workloads/unfused_optimizer.py, 6 blocks x 512"


def make(variant, device):
    cuda = is_cuda(device)
    d, batch, nblocks = (512, 2048, 6) if cuda else (32, 16, 6)
    torch.manual_seed(0)
    model = nn.Sequential(*[Block(d) for _ in range(nblocks)], nn.Linear(d, 1)).to(device)
    params = list(model.parameters())
    if variant == "after_graph_only" and cuda:
        return graphed(model, params, d, batch, device)
    if variant != "after":
        opt = torch.optim.Adam(params, lr=1e-4, foreach=False)
    else:
        opt = torch.optim.Adam(params, lr=1e-4, fused=True if cuda else None)
    xs = [torch.randn(batch, d, device=device) for _ in range(2)]
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            out = model(xs[i % 2])
        loss = out.float().pow(2).mean()
        loss.backward()
        opt.step()

    return Step(step, info={"param_tensors": len(params), "params": sum(p.numel() for p in params),
                            "optimizer": "Adam(foreach=False)" if variant == "before" else "Adam(fused=True)",
                            "batch": batch, "width": d})


def graphed(model, params, d, batch, device, pool=2):
    opt = torch.optim.Adam(params, lr=1e-4, foreach=False, capturable=True)
    step = graphed_train_step(model, opt, d, batch, device, pool)
    return Step(step, info={"param_tensors": len(params), "optimizer": "Adam(foreach=False, capturable=True)",
                            "batch": batch, "width": d, "cuda_graph": True})
