"""holdout5_fusion_gelu_fp16: a hand-written tanh-GELU with bias and residual, fp16 -> torch.compile.

Fifth held-out set (written after the fused-arithmetic model): a short chain (about a dozen ops, one
tanh) of the kind a transformer MLP has, repeated over four activations.

before: eager no_grad: for each of 4 fp16 [4096, 4096] activations, h = x + b; gelu_tanh(h) written out
        (0.5 * h * (1 + tanh(0.79788 * (h + 0.044715 * h^3)))) + residual.
after:  the same function under torch.compile(mode="default").
"""

import torch

from ._util import Step, cpu_mode, is_cuda

NAME = "holdout5_fusion_gelu_fp16"
EXPECTED_KIND = "fusion_candidates"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = 'torch.compile(fn) fuses each bias + GELU + residual chain into one Triton kernel'
DESCRIPTION = {
    "before": "eager bias + hand-written tanh-GELU + residual on 4 fp16 [4096, 4096] activations",
    "after": 'same function, torch.compile(mode="default")',
}
WARMUP_STEPS = 4


def block(x, b, r):
    h = x + b
    g = 0.5 * h * (1.0 + torch.tanh(0.7978845608 * (h + 0.044715 * h * h * h)))
    return g + r


def run(xs, b, r):
    return [block(x, b, r) for x in xs]


def make(variant, device):
    rows, cols = (4096, 4096) if is_cuda(device) else (32, 64)
    dt = torch.float16 if is_cuda(device) else torch.float32
    torch.manual_seed(0)
    xs = [torch.randn(rows, cols, device=device, dtype=dt) for _ in range(4)]
    b = torch.randn(cols, device=device, dtype=dt)
    r = torch.randn(rows, cols, device=device, dtype=dt)
    compiled = variant == "after" and not cpu_mode()
    if compiled:
        torch._dynamo.reset()
        fn = torch.compile(run, mode="default")
    else:
        fn = run

    def step():
        with torch.no_grad():
            fn(xs, b, r)

    def close():
        if compiled:
            torch._dynamo.reset()
    return Step(step, close=close, info={"shape": [rows, cols], "activations": 4, "compiled": compiled})
