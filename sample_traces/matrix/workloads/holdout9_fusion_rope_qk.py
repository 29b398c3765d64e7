"""holdout9_fusion_rope_qk: rotary embeddings applied to q and then k, written out in eager -> torch.compile.

Ninth held-out set (written after a repeated chain without stacks began to pay a pass per call): the
classic repeated chain of a real model, one rotary function called on two tensors back to back.

before: eager no_grad: q, k bf16 [8, 32, 2048, 128]; rope(x) = x * cos + rotate_half(x) * sin, with
        rotate_half(x) = cat(-x2, x1) of the two halves; called on q, then on k.
after:  the same function under torch.compile(mode="default").
"""

import torch

from ._util import Step, cpu_mode, is_cuda

NAME = "holdout9_fusion_rope_qk"
EXPECTED_KIND = "fusion_candidates"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = 'torch.compile(fn) fuses the rotary chain into Triton kernels'
DESCRIPTION = {
    "before": "eager rotary embedding x * cos + rotate_half(x) * sin on q, then k, bf16 [8, 32, 2048, 128]",
    "after": 'same function, torch.compile(mode="default")',
}
WARMUP_STEPS = 4


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rope(x, cos, sin):
    return x * cos + rotate_half(x) * sin


def run(q, k, cos, sin):
    return rope(q, cos, sin), rope(k, cos, sin)


def make(variant, device):
    b, h, t, d = (8, 32, 2048, 128) if is_cuda(device) else (1, 2, 8, 16)
    dt = torch.bfloat16 if is_cuda(device) else torch.float32
    torch.manual_seed(0)
    q = torch.randn(b, h, t, d, device=device, dtype=dt)
    k = torch.randn(b, h, t, d, device=device, dtype=dt)
    pos = torch.arange(t, device=device, dtype=torch.float32)[:, None]
    freq = 1.0 / (10000 ** (torch.arange(0, d, 2, device=device, dtype=torch.float32) / d))
    ang = torch.cat((pos * freq, pos * freq), dim=-1)
    cos, sin = ang.cos().to(dt), ang.sin().to(dt)
    compiled = variant == "after" and not cpu_mode()
    if compiled:
        torch._dynamo.reset()
        fn = torch.compile(run, mode="default")
    else:
        fn = run

    def step():
        with torch.no_grad():
            fn(q, k, cos, sin)

    def close():
        if compiled:
            torch._dynamo.reset()
    return Step(step, close=close, info={"shape": [b, h, t, d], "calls": 2, "compiled": compiled})
