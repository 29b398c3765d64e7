"""holdout36_fusion_qk_rmsnorm_calls: RMSNorm written out on q and then k, through a helper -> torch.compile.

Thirty-sixth held-out set (written after Python stacks began to read a repeated chain's calls from the
outermost frame the repeats do not share, so that a function calling a helper counts once, and after the
generic 16-bit elementwise kernels began to count at a vectorized kernel's time): the QK-norm of recent
transformers, one function called on two tensors, each call reducing in fp32 and scaling back in bf16.

before: eager no_grad: q, k bf16 [8, 32, 1024, 128]; qk_norm(q, k) = rms_norm(q, wq), rms_norm(k, wk) with
        rms_norm(x, w) = (x.float() * inv_rms(x.float())).to(bf16) * w and inv_rms(x) =
        rsqrt(mean(x^2, -1, keepdim) + eps) (a helper: each call of rms_norm makes one of inv_rms).
after:  the same function under torch.compile(mode="default").
"""

import torch

from ._util import Step, cpu_mode, is_cuda

NAME = "holdout36_fusion_qk_rmsnorm_calls"
EXPECTED_KIND = "fusion_candidates"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = 'torch.compile(fn) fuses each RMSNorm (upcast, reduction, scale, downcast, weight) into Triton kernels'
DESCRIPTION = {
    "before": "eager RMSNorm written out (fp32 reduction through a helper, bf16 weight) on q, then k, bf16 "
              "[8, 32, 1024, 128]",
    "after": 'same function, torch.compile(mode="default")',
}
WARMUP_STEPS = 4


def inv_rms(x):
    return torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


def rms_norm(x, w):
    xf = x.float()
    return (xf * inv_rms(xf)).to(x.dtype) * w


def qk_norm(q, k, wq, wk):
    return rms_norm(q, wq), rms_norm(k, wk)


def make(variant, device):
    b, h, t, d = (8, 32, 1024, 128) if is_cuda(device) else (1, 2, 8, 16)
    dt = torch.bfloat16 if is_cuda(device) else torch.float32
    torch.manual_seed(0)
    q = torch.randn(b, h, t, d, device=device, dtype=dt)
    k = torch.randn(b, h, t, d, device=device, dtype=dt)
    wq = torch.randn(d, device=device, dtype=dt)
    wk = torch.randn(d, device=device, dtype=dt)
    compiled = variant == "after" and not cpu_mode()
    if compiled:
        torch._dynamo.reset()
        fn = torch.compile(qk_norm, mode="default")
    else:
        fn = qk_norm

    def step():
        with torch.no_grad():
            fn(q, k, wq, wk)

    def close():
        if compiled:
            torch._dynamo.reset()
    return Step(step, close=close, info={"shape": [b, h, t, d], "calls": 2, "compiled": compiled})
