"""holdout9_fusion_newton_loop: a fixed-count Newton iteration on one tensor, in eager -> torch.compile.

Ninth held-out set: the other side of the repeated-chain question. One fp32 tensor is updated in place
of itself eight times (x = x - (x * x - a) / (2 * x): Newton's square root), so the repeated kernel
sequence is a loop over one tensor and fuses into one pass. Without Python stacks the tool now assumes
a pass per repeat at its point estimate, so the default-option traces test how far that costs.

before: eager no_grad: x = a for a 16M fp32 tensor a in [0.5, 1.5), then 8 Newton steps.
after:  the same function under torch.compile(mode="default").
"""

import torch

from ._util import Step, cpu_mode, is_cuda

NAME = "holdout9_fusion_newton_loop"
EXPECTED_KIND = "fusion_candidates"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = 'torch.compile(fn) fuses the loop into one Triton kernel'
DESCRIPTION = {
    "before": "eager 8 Newton square-root steps x = x - (x * x - a) / (2 * x) on one 16M fp32 tensor",
    "after": 'same function, torch.compile(mode="default")',
}
WARMUP_STEPS = 4
STEPS = 8


def newton_sqrt(a):
    x = a               # no prefix op: the kernel sequence is eight exact repeats
    for _ in range(STEPS):
        x = x - (x * x - a) / (2.0 * x)
    return x


def make(variant, device):
    n = 16 * 1024 * 1024 if is_cuda(device) else 1024
    torch.manual_seed(0)
    a = torch.rand(n, device=device) + 0.5
    compiled = variant == "after" and not cpu_mode()
    if compiled:
        torch._dynamo.reset()
        fn = torch.compile(newton_sqrt, mode="default")
    else:
        fn = newton_sqrt

    def step():
        with torch.no_grad():
            fn(a)

    def close():
        if compiled:
            torch._dynamo.reset()
    return Step(step, close=close, info={"n": n, "iterations": STEPS, "compiled": compiled})
