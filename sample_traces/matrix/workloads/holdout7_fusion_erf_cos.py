"""holdout7_fusion_erf_cos: exact (erf) GELU and a cosine term on fp32, looped with a prologue -> torch.compile.

Seventh held-out set (written after the per-op arithmetic costs of a fused kernel and the stack-read
calls of a repeated chain): erf and cos, which the first chains did not have.

before: eager no_grad on two 8M-element fp32 tensors: a = x + y, then 4 rounds of a = a * 0.5 * (1 + erf(a * 0.7071)) + cos(y) * 0.1, then a * x.
after:  the same function under torch.compile(mode="default").
"""

import torch

from ._util import Step, cpu_mode, is_cuda

NAME = "holdout7_fusion_erf_cos"
EXPECTED_KIND = "fusion_candidates"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = 'torch.compile(fn) fuses the chain into Triton kernels'
DESCRIPTION = {
    "before": "eager erf-GELU + cos rounds on two 8M-element fp32 tensors",
    "after": 'same function, torch.compile(mode="default")',
}
WARMUP_STEPS = 4

def run(x, y):
    a = x + y
    for _ in range(4):
        a = a * 0.5 * (1.0 + torch.erf(a * 0.7071)) + torch.cos(y) * 0.1
    return a * x


def make(variant, device):
    n = 8 * 2**20 if is_cuda(device) else 4096
    torch.manual_seed(0)
    args = (torch.randn(n, device=device), torch.randn(n, device=device))
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
    return Step(step, close=close, info={"elements": n, "dtype": "fp32", "compiled": compiled})
