"""holdout7_fusion_swiglu_calls: a SwiGLU gate (silu(g) * u + r) called on three bf16 pairs -> torch.compile.

Seventh held-out set (written after the per-op arithmetic costs of a fused kernel and the stack-read
calls of a repeated chain): SiLU in bf16, and a short sequence repeated by three calls of one function (a pass each).

before: eager no_grad: for each of 3 bf16 [4096, 4096] (g, u) pairs, swiglu(g, u, r) = silu(g) * u * 0.5 + r.
after:  the same function under torch.compile(mode="default").
"""

import torch

from ._util import Step, cpu_mode, is_cuda

NAME = "holdout7_fusion_swiglu_calls"
EXPECTED_KIND = "fusion_candidates"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = 'torch.compile(fn) fuses the chain into Triton kernels'
DESCRIPTION = {
    "before": "eager silu(g) * u * 0.5 + r, called on 3 bf16 [4096, 4096] pairs",
    "after": 'same function, torch.compile(mode="default")',
}
WARMUP_STEPS = 4

def swiglu(g, u, r):
    return torch.nn.functional.silu(g) * u * 0.5 + r


def run(gs, us, r):
    return [swiglu(g, u, r) for g, u in zip(gs, us)]


def make(variant, device):
    rows, cols = (4096, 4096) if is_cuda(device) else (16, 32)
    dt = torch.bfloat16 if is_cuda(device) else torch.float32
    torch.manual_seed(0)
    args = ([torch.randn(rows, cols, device=device, dtype=dt) for _ in range(3)],
            [torch.randn(rows, cols, device=device, dtype=dt) for _ in range(3)],
            torch.randn(rows, cols, device=device, dtype=dt))
    compiled = variant == "after" and not cpu_mode()
    if compiled:
        torch._dynamo.reset()
        fn = torch.compile(run, mode="default")
    else:
        fn = run

    def step():
        with torch.no_grad():
            fn(*args)

    def close():
        if compiled:
            torch._dynamo.reset()
    return Step(step, close=close, info={"shape": [rows, cols], "calls": 3, "compiled": compiled})
