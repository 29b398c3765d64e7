"""compile_default_vs_ro: torch.compile(mode="default") on a small launch-bound model -> "reduce-overhead".

before: 8x [Linear(256), LayerNorm(256), GELU] + head, batch 32, fp32 inference (no_grad),
        torch.compile(mode="default"): Inductor fuses the pointwise ops, but every step still
        launches ~17 kernels of a few us each plus the compiled-graph guard overhead.
after:  torch.compile(mode="reduce-overhead"): the compiled graph runs as a CUDA graph
        (cudagraph trees), one cudaGraphLaunch per step.

Expected: launch_overhead; the advice must be mode="reduce-overhead" (the model is already compiled).
"""

import torch
import torch.nn as nn

from ._util import Step, cpu_mode, is_cuda

NAME = "compile_default_vs_ro"
EXPECTED_KIND = "launch_overhead"
EXPECTED_ADVICE = 'torch.compile(mode="reduce-overhead")'
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = 'torch.compile(mode="reduce-overhead") instead of mode="default" (CUDA graphs)'
DESCRIPTION = {
    "before": ('8x [Linear(256,256), LayerNorm, GELU] + Linear(256,10), batch 32, fp32 no_grad inference, '
               'torch.compile(mode="default")'),
    "after": 'same model, torch.compile(mode="reduce-overhead")',
}
WARMUP_STEPS = 6
MODES = {"before": "default", "after": "reduce-overhead"}


def build_model(device, d=256, layers=8):
    torch.manual_seed(0)
    mods = []
    for _ in range(layers):
        mods += [nn.Linear(d, d), nn.LayerNorm(d), nn.GELU()]
    return nn.Sequential(*mods, nn.Linear(d, 10)).to(device).eval()


def compiled_step(device, mode, batch=32, pool=8, d=256):
    model = build_model(device, d)
    xs = [torch.randn(batch, d, device=device) for _ in range(pool)]
    compiled = mode is not None and not cpu_mode()
    if compiled:
        torch._dynamo.reset()
        fn = torch.compile(model, mode=mode)
    else:
        fn = model
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        with torch.no_grad():
            fn(xs[i % pool])

    def close():
        if compiled:
            torch._dynamo.reset()
    return Step(step, close=close, info={"batch": batch, "compile_mode": mode if compiled else None,
                                         "compiled": compiled})


def make(variant, device):
    return compiled_step(device, MODES[variant])
