"""holdout_fusion_bf16: a GPU-bound bf16 elementwise chain -> torch.compile (one fused kernel).

Held out (written after the queued-gap change): other ops, dtype and size than fusion_elementwise.

before: eager no_grad chain of ~30 elementwise ops (exp, mul, add, relu, clamp, rsqrt ...) over two
        16M-element bf16 tensors (32 MiB each).
after:  the same function under torch.compile(mode="default").
"""

import torch

from ._util import Step, cpu_mode, is_cuda

NAME = "holdout_fusion_bf16"
EXPECTED_KIND = "fusion_candidates"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = 'torch.compile(fn) fuses the elementwise chain into one Triton kernel'
DESCRIPTION = {
    "before": "eager chain of ~30 elementwise ops on two 16M-element bf16 tensors",
    "after": 'same function, torch.compile(mode="default")',
}
WARMUP_STEPS = 4


def chain(x, y):
    a = torch.relu(x) + y
    for _ in range(6):
        a = torch.exp(a.clamp(-4, 4)) * 0.25 - y
        a = a * torch.rsqrt(a * a + 1.0)
    return a + x


def make(variant, device):
    n = 16 * 2**20 if is_cuda(device) else 4096
    torch.manual_seed(0)
    x = torch.randn(n, device=device, dtype=torch.bfloat16)
    y = torch.randn(n, device=device, dtype=torch.bfloat16)
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
    return Step(step, close=close, info={"elements": n, "dtype": "bf16", "compiled": compiled})
