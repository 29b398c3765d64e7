"""holdout4_amp_adamw_loop: fp16 AMP with GradScaler and AdamW(foreach=False) -> AdamW(fused=True).

Fourth held-out set (the issue's categories on programs the models were not built on): a residual
MLP of 12 blocks (384 wide, 26 parameter tensors), batch 512, fp16 autocast, torch.amp.GradScaler.
before: AdamW(foreach=False): GradScaler.step() reads found_inf (a sync), then a per-parameter loop.
after:  AdamW(fused=True) (GradScaler hands it grad_scale / found_inf: no sync, a few kernels).
after_graph: after (capturable), with the whole step, GradScaler included, captured in one CUDA graph (added
        after the held-out run: the tool ranked launch_overhead above the optimizer on every row). The
        scaler's scale and growth tracker are GPU tensors updated in place, so replays keep them current.
"""

import torch
import torch.nn as nn

from workloads.unfused_optimizer import Block

from ._util import Step, autocast, capture_graph, is_cuda, replay_step

NAME = "holdout4_amp_adamw_loop"
EXPECTED_KIND = "unfused_optimizer"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph")
FIX = "torch.optim.AdamW(fused=True) with the same GradScaler"
DESCRIPTION = {
    "before": "12 blocks of 384 (26 tensors), batch 512, fp16 autocast + GradScaler, AdamW(foreach=False)",
    "after": "same, AdamW(fused=True)",
    "after_graph": "after (capturable), the whole step with GradScaler in one CUDA graph",
}


def make(variant, device):
    cuda = is_cuda(device)
    d, batch, n = (384, 512, 12) if cuda else (16, 8, 2)
    torch.manual_seed(0)
    model = nn.Sequential(*[Block(d) for _ in range(n)], nn.Linear(d, 1)).to(device)
    graph = variant == "after_graph" and cuda
    if variant in ("after", "after_graph") and cuda:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True, capturable=graph)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
    scaler = torch.amp.GradScaler(torch.device(device).type, enabled=cuda)
    xs = [torch.randn(batch, d, device=device) for _ in range(2)]
    if graph:
        sx = xs[0].clone()

        def body():
            opt.zero_grad(set_to_none=False)
            with torch.autocast(device_type="cuda", dtype=torch.float16, cache_enabled=False):
                out = model(sx)
            scaler.scale(out.float().pow(2).mean()).backward()
            scaler.step(opt)
            scaler.update()
        return Step(replay_step(capture_graph(body, warmup=3), [(sx, xs)]),
                    info={"batch": batch, "optimizer": variant, "cuda_graph": True})
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        with autocast(device, torch.float16):
            out = model(xs[i % 2])
        scaler.scale(out.float().pow(2).mean()).backward()
        scaler.step(opt)
        scaler.update()
    return Step(step, info={"batch": batch, "optimizer": variant})
