"""amp_scaler_unfused: fp16 autocast + GradScaler + single-tensor Adam -> fused Adam.

before: Adam(foreach=False): GradScaler.step() unscales with a foreach kernel, then reads
        found_inf with .item() (a device sync) before running the per-parameter Python loop
        of Adam (~6 small kernels per tensor).
after:  Adam(fused=True): GradScaler passes grad_scale / found_inf to the fused kernel, so
        there is no found_inf sync and the update is a few multi-tensor kernels.
after_graph: after (Adam(fused=True, capturable=True) + GradScaler), the whole step, scaler update
        included, in one CUDA graph: the plan "fused optimizer, then a graph", measured.
"""

import torch
import torch.nn as nn

from workloads.unfused_optimizer import Block

from ._util import Step, autocast, capture_graph, is_cuda, replay_step

NAME = "amp_scaler_unfused"
EXPECTED_KIND = "unfused_optimizer"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph")
FIX = "torch.optim.Adam(fused=True) (GradScaler-aware: no found_inf .item() sync, multi-tensor kernels)"
DESCRIPTION = {
    "before": ("6 blocks [LayerNorm(384), Linear(384,384), GELU] + head (26 param tensors), batch 1024, "
               "fp16 autocast, torch.amp.GradScaler, Adam(foreach=False)"),
    "after": "same model / scaler, Adam(fused=True)",
    "after_graph": "same model / scaler, Adam(fused=True, capturable=True), the whole step in one CUDA graph",
}


def make(variant, device):
    cuda = is_cuda(device)
    d, batch, nblocks = (384, 1024, 6) if cuda else (32, 16, 6)
    torch.manual_seed(0)
    model = nn.Sequential(*[Block(d) for _ in range(nblocks)], nn.Linear(d, 1)).to(device)
    params = list(model.parameters())
    if variant == "after_graph" and cuda:
        return graphed(model, params, d, batch, device)
    if variant == "before":
        opt = torch.optim.Adam(params, lr=1e-4, foreach=False)
    else:
        opt = torch.optim.Adam(params, lr=1e-4, fused=True if cuda else None)
    scaler = torch.amp.GradScaler(torch.device(device).type, enabled=cuda)
    xs = [torch.randn(batch, d, device=device) for _ in range(2)]
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        with autocast(device, torch.float16):
            out = model(xs[i % 2])
        loss = out.float().pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    return Step(step, info={"param_tensors": len(params), "amp": "fp16 autocast + GradScaler",
                            "optimizer": "Adam(foreach=False)" if variant == "before" else "Adam(fused=True)",
                            "batch": batch, "width": d})


def graphed(model, params, d, batch, device, pool=2):
    opt = torch.optim.Adam(params, lr=1e-4, fused=True, capturable=True)
    scaler = torch.amp.GradScaler("cuda")
    xs = [torch.randn(batch, d, device=device) for _ in range(pool)]
    sx = xs[0].clone()

    def body():
        opt.zero_grad(set_to_none=False)
        # The autocast weight cache must be off inside a graph (torch.cuda.graph docs).
        with torch.autocast(device_type="cuda", dtype=torch.float16, cache_enabled=False):
            out = model(sx)
        scaler.scale(out.float().pow(2).mean()).backward()
        scaler.step(opt)
        scaler.update()

    step = replay_step(capture_graph(body, warmup=3), [(sx, xs)])
    return Step(step, info={"param_tensors": len(params), "amp": "fp16 autocast + GradScaler",
                            "optimizer": "Adam(fused=True, capturable=True)", "batch": batch, "width": d,
                            "cuda_graph": True})
