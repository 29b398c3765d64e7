"""holdout2_compile_conv: a compiled small conv net's inference, torch.compile default -> reduce-overhead.

Second held-out set: convolutions (cuDNN, not Triton, for the heavy ops) instead of MLPs and attention.

before: 6 conv blocks [Conv2d 3x3, BatchNorm (eval), ReLU] on 8x64x32x32 inputs, fp16 autocast, no_grad,
        torch.compile(mode="default").
after:  the same, torch.compile(mode="reduce-overhead").
"""

import torch
import torch.nn as nn

from ._util import Step, autocast, cpu_mode, is_cuda

NAME = "holdout2_compile_conv"
EXPECTED_KIND = "launch_overhead"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = 'torch.compile(model, mode="reduce-overhead") instead of mode="default"'
DESCRIPTION = {
    "before": "6 [Conv3x3(64), BN, ReLU] blocks, batch 8x64x32x32, fp16 no_grad, torch.compile default",
    "after": 'same, torch.compile(mode="reduce-overhead")',
}
WARMUP_STEPS = 8
MODES = {"before": "default", "after": "reduce-overhead"}


def make(variant, device):
    cuda = is_cuda(device)
    c, n, hw = (64, 8, 32) if cuda else (4, 1, 8)
    torch.manual_seed(0)
    blocks = []
    for _ in range(6):
        blocks += [nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU()]
    model = nn.Sequential(*blocks).to(device).eval()
    compiled = not cpu_mode()
    fn = model
    if compiled:
        torch._dynamo.reset()
        fn = torch.compile(model, mode=MODES[variant])
    xs = [torch.randn(n, c, hw, hw, device=device) for _ in range(4)]
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        with torch.no_grad(), autocast(device, torch.float16):
            fn(xs[i % 4])

    def close():
        if compiled:
            torch._dynamo.reset()
    return Step(step, close=close, info={"compile_mode": MODES[variant], "compiled": compiled})
