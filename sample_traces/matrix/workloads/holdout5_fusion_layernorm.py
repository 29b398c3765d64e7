"""holdout5_fusion_layernorm: a hand-written LayerNorm + SiLU (reductions in the chain), fp32 -> torch.compile.

Fifth held-out set (written after the fused-arithmetic model): the chain has reductions (mean, var),
which Inductor fuses into a persistent-reduction kernel rather than a pointwise one.

before: eager no_grad on fp32 [16384, 1024]: mu = x.mean(-1), var = ((x - mu)^2).mean(-1),
        y = (x - mu) * rsqrt(var + eps) * w + b, then y * sigmoid(y).
after:  the same function under torch.compile(mode="default").
"""

import torch

from ._util import Step, cpu_mode, is_cuda

NAME = "holdout5_fusion_layernorm"
EXPECTED_KIND = "fusion_candidates"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = 'torch.compile(fn) fuses the normalisation and activation into one or two Triton kernels'
DESCRIPTION = {
    "before": "eager hand-written LayerNorm (mean, var, rsqrt, scale, shift) + SiLU on fp32 [16384, 1024]",
    "after": 'same function, torch.compile(mode="default")',
}
WARMUP_STEPS = 4


def norm_act(x, w, b):
    mu = x.mean(-1, keepdim=True)
    d = x - mu
    var = (d * d).mean(-1, keepdim=True)
    y = d * torch.rsqrt(var + 1e-5) * w + b
    return y * torch.sigmoid(y)


def make(variant, device):
    rows, cols = (16384, 1024) if is_cuda(device) else (64, 32)
    torch.manual_seed(0)
    x = torch.randn(rows, cols, device=device)
    w = torch.randn(cols, device=device)
    b = torch.randn(cols, device=device)
    compiled = variant == "after" and not cpu_mode()
    if compiled:
        torch._dynamo.reset()
        fn = torch.compile(norm_act, mode="default")
    else:
        fn = norm_act

    def step():
        with torch.no_grad():
            for _ in range(3):
                fn(x, w, b)

    def close():
        if compiled:
            torch._dynamo.reset()
    return Step(step, close=close, info={"shape": [rows, cols], "calls_per_step": 3, "compiled": compiled})
