"""holdout7_fusion_exp_log: a softplus-and-scale chain written out with exp and log on fp32 -> torch.compile.

Seventh held-out set (written after the per-op arithmetic costs of a fused kernel and the stack-read
calls of a repeated chain): exp and log (cheap transcendental ops) in fp32, about 20 ops.

before: eager no_grad on two 16M-element fp32 tensors: 3 rounds of a = log(1 + exp(a.clamp(-10, 10))) * y - a * 0.1 + 0.05, after a = x * y.
after:  the same function under torch.compile(mode="default").
"""

import torch

from ._util import Step, cpu_mode, is_cuda

NAME = "holdout7_fusion_exp_log"
EXPECTED_KIND = "fusion_candidates"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = 'torch.compile(fn) fuses the chain into Triton kernels'
DESCRIPTION = {
    "before": "eager softplus written out (exp, log) in 3 rounds on two 16M-element fp32 tensors",
    "after": 'same function, torch.compile(mode="default")',
}
WARMUP_STEPS = 4

def run(x, y):
    a = x * y
    for _ in range(3):
        a = torch.log(1.0 + torch.exp(a.clamp(-10.0, 10.0))) * y - a * 0.1 + 0.05
    return a


def make(variant, device):
    n = 16 * 2**20 if is_cuda(device) else 4096
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
