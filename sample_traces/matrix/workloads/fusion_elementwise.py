"""fusion_elementwise: a GPU-bound chain of elementwise ops on mid-size tensors -> torch.compile.

before: eager: ~34 elementwise kernels (sin, mul, add, sigmoid, tanh ...) over 8M-element fp32
        tensors (32 MiB); each kernel reads/writes HBM, so the step is memory-bandwidth bound
        on the GPU (not launch-bound).
after:  the same function under torch.compile(mode="default"): Inductor fuses the chain into a
        single Triton kernel (one read of x/y, one write).
"""

import torch

from ._util import Step, cpu_mode, is_cuda

NAME = "fusion_elementwise"
EXPECTED_KIND = "fusion_candidates"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = 'torch.compile(fn, mode="default") fuses the elementwise chain into one Triton kernel'
DESCRIPTION = {
    "before": "eager no_grad chain of ~34 elementwise ops on two 8M-element fp32 tensors (32 MiB each)",
    "after": 'same function compiled with torch.compile(mode="default")',
}
WARMUP_STEPS = 3


def chain(x, y):
    a = x * 1.1 + y
    for k in range(8):
        b = torch.sin(a) * 0.5
        a = a * 0.75 + b
        a = a * torch.sigmoid(y)
    return torch.tanh(a) + y


def make(variant, device):
    n = 8 * 2**20 if is_cuda(device) else 4096
    torch.manual_seed(0)
    x = torch.randn(n, device=device)
    y = torch.randn(n, device=device)
    fn = chain
    compiled = False
    if variant == "after" and not cpu_mode():
        torch._dynamo.reset()
        fn = torch.compile(chain, mode="default")
        compiled = True

    def step():
        with torch.no_grad():
            fn(x, y)

    def close():
        if compiled:
            torch._dynamo.reset()
    return Step(step, close=close, info={"elements": n, "compiled": compiled})
