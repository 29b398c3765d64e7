"""holdout6_fusion_loop: one tensor through the same short pointwise sequence, looped -> torch.compile.

Sixth held-out set (written after the fusion range learned to count a pass per repeat): here the chain
is an exact repeat (a loop over one tensor, no prologue), which fuses into ONE pass, so the point
estimate (one pass) should hold and the range's worst end (a pass per repeat) should not be needed.

before: eager no_grad, bf16 16M elements: 6 times a = a * sigmoid(1.702 * a) * 0.9 + 0.1 (quick GELU, a
        scale and a shift: five kernels per round).
after:  the same function under torch.compile(mode="default").
"""

import torch

from ._util import Step, cpu_mode, is_cuda

NAME = "holdout6_fusion_loop"
EXPECTED_KIND = "fusion_candidates"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = 'torch.compile(fn) fuses the six rounds into one Triton kernel'
DESCRIPTION = {
    "before": "eager: 6 rounds of quick-GELU, scale and shift on one 16M-element bf16 tensor",
    "after": 'same function, torch.compile(mode="default")',
}
WARMUP_STEPS = 4


def rounds(a):
    for _ in range(6):
        a = a * torch.sigmoid(a * 1.702) * 0.9 + 0.1
    return a


def make(variant, device):
    n = 16 * 2**20 if is_cuda(device) else 4096
    dt = torch.bfloat16 if is_cuda(device) else torch.float32
    torch.manual_seed(0)
    x = torch.randn(n, device=device, dtype=dt)
    compiled = variant == "after" and not cpu_mode()
    if compiled:
        torch._dynamo.reset()
        fn = torch.compile(rounds, mode="default")
    else:
        fn = rounds

    def step():
        with torch.no_grad():
            fn(x)

    def close():
        if compiled:
            torch._dynamo.reset()
    return Step(step, close=close, info={"elements": n, "dtype": str(dt), "compiled": compiled})
