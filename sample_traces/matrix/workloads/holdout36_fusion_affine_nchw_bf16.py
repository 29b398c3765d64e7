"""holdout36_fusion_affine_nchw_bf16: a frozen BatchNorm + SiLU written out on a bf16 NCHW map -> torch.compile.

Thirty-sixth held-out set (written after a chain's mean kernel began to count the generic, non-vectorized
elementwise kernels on 16-bit data at the time a vectorized one takes): per-channel statistics broadcast
over an NCHW activation make every op a generic elementwise kernel, the slow kind, in one call (no repeats).

before: eager no_grad: x bf16 [64, 256, 56, 56]; y = (x - mean[c]) * inv_std[c] * w[c] + b[c] with the
        per-channel tensors shaped [256, 1, 1]; then y * sigmoid(y).
after:  the same function under torch.compile(mode="default").
"""

import torch

from ._util import Step, cpu_mode, is_cuda

NAME = "holdout36_fusion_affine_nchw_bf16"
EXPECTED_KIND = "fusion_candidates"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = 'torch.compile(fn) fuses the per-channel affine and the SiLU into one Triton kernel'
DESCRIPTION = {
    "before": "eager frozen BatchNorm written out ((x - mean) * inv_std * w + b, per-channel [C, 1, 1]) + SiLU "
              "on bf16 [64, 256, 56, 56]",
    "after": 'same function, torch.compile(mode="default")',
}
WARMUP_STEPS = 4


def norm_act(x, mean, inv_std, w, b):
    y = (x - mean) * inv_std * w + b
    return y * torch.sigmoid(y)


def make(variant, device):
    n, c, h, w_ = (64, 256, 56, 56) if is_cuda(device) else (2, 8, 6, 6)
    dt = torch.bfloat16 if is_cuda(device) else torch.float32
    torch.manual_seed(0)
    x = torch.randn(n, c, h, w_, device=device, dtype=dt)
    mean, inv_std, w, b = (torch.randn(c, 1, 1, device=device, dtype=dt) for _ in range(4))
    compiled = variant == "after" and not cpu_mode()
    if compiled:
        torch._dynamo.reset()
        fn = torch.compile(norm_act, mode="default")
    else:
        fn = norm_act

    def step():
        with torch.no_grad():
            fn(x, mean, inv_std, w, b)

    def close():
        if compiled:
            torch._dynamo.reset()
    return Step(step, close=close, info={"shape": [n, c, h, w_], "compiled": compiled})
