"""holdout5_fusion_arith: a GPU-bound chain of cheap arithmetic only (no transcendental op) -> torch.compile.

Fifth held-out set (written after the fused-arithmetic model): the fused kernel should stay
memory-bound, so fusing saves nearly every kernel but one pass.

before: eager no_grad chain of ~40 mul/add/sub/clamp/abs/maximum ops over two 16M-element fp32 tensors.
after:  the same function under torch.compile(mode="default").
"""

import torch

from ._util import Step, cpu_mode, is_cuda

NAME = "holdout5_fusion_arith"
EXPECTED_KIND = "fusion_candidates"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = 'torch.compile(fn) fuses the arithmetic chain into one Triton kernel'
DESCRIPTION = {
    "before": "eager chain of ~40 cheap elementwise ops (mul, add, sub, clamp, abs, maximum) on 16M fp32",
    "after": 'same function, torch.compile(mode="default")',
}
WARMUP_STEPS = 4


def chain(x, y):
    a = x * 0.5 + y
    for k in range(6):
        a = (a - y * 0.25).clamp(-3.0, 3.0)
        a = torch.abs(a) * 0.9 + x * 0.1
        a = torch.maximum(a, y) - 0.5
    return a * y + x


def make(variant, device):
    n = 16 * 2**20 if is_cuda(device) else 4096
    torch.manual_seed(0)
    x = torch.randn(n, device=device)
    y = torch.randn(n, device=device)
    compiled = variant == "after" and not cpu_mode()
    if compiled:
        torch._dynamo.reset()
        fn = torch.compile(chain, mode="default")
    else:
        fn = chain

    def step():
        with torch.no_grad():
            fn(x, y)

    def close():
        if compiled:
            torch._dynamo.reset()
    return Step(step, close=close, info={"elements": n, "dtype": "fp32", "compiled": compiled})
