"""holdout_compile_train: a compiled training step, torch.compile default -> mode="reduce-overhead".

Held out: written after the reduce-overhead model (wrapper + cudagraph-tree call, compiled regions only)
was fixed, to check it on a program it was not derived from: training (a compiled forward and a
compiled backward), with the loss and a fused Adam step left eager around them.

before: 4x [LayerNorm(512), Linear(512,512), GELU] residual blocks + head, batch 64, bf16 autocast,
        torch.compile(model) (mode="default"); loss, backward() and Adam(fused=True) eager.
after:  the same with torch.compile(model, mode="reduce-overhead") (forward and backward replayed as
        CUDA graphs through cudagraph trees); the loss and the optimizer stay eager.
"""

import torch
import torch.nn as nn

from workloads.unfused_optimizer import Block

from ._util import Step, autocast, cpu_mode, is_cuda

NAME = "holdout_compile_train"
EXPECTED_KIND = "launch_overhead"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = 'torch.compile(model, mode="reduce-overhead") instead of mode="default"'
DESCRIPTION = {
    "before": "4 residual blocks of 512, batch 64, bf16 autocast, torch.compile default, eager loss + fused Adam",
    "after": 'same, torch.compile(model, mode="reduce-overhead")',
}
WARMUP_STEPS = 8
MODES = {"before": "default", "after": "reduce-overhead"}


def make(variant, device):
    cuda = is_cuda(device)
    d, batch, nblocks = (512, 64, 4) if cuda else (32, 8, 2)
    torch.manual_seed(0)
    model = nn.Sequential(*[Block(d) for _ in range(nblocks)], nn.Linear(d, 1)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, fused=True if cuda else None)
    compiled = not cpu_mode()
    if compiled:
        torch._dynamo.reset()
        fn = torch.compile(model, mode=MODES[variant])
    else:
        fn = model
    xs = [torch.randn(batch, d, device=device) for _ in range(4)]
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            out = fn(xs[i % 4])
        loss = out.float().pow(2).mean()
        loss.backward()
        opt.step()

    def close():
        if compiled:
            torch._dynamo.reset()
    return Step(step, close=close, info={"batch": batch, "width": d, "compile_mode": MODES[variant],
                                         "compiled": compiled})
