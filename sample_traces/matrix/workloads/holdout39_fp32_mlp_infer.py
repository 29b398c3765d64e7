"""holdout39_fp32_mlp_infer: fp32 inference of a residual MLP at a mid size, whose GEMMs run tens of us -> TF32.

Thirty-ninth held-out set (pre-registered 2026-12-01 before it was recorded), the first test of fp32_matmul's
per-GEMM law (a GEMM of d us in FP32 gains 1 + (peak - 1) * d / (d + 120 us) from TF32, fitted on the matrix's
fp32 programs, whose GEMMs ran mostly 80 us to 3 ms). Here they run ~90 us (2048 x 512 x 2048: 92 us in FP32,
27.8 us in TF32 on an H200, timed alone before registering), where the law is steep (3.8x predicted; one constant
had said 4.4x for any GEMM).
Model: 8 pre-LayerNorm residual blocks (LayerNorm, Linear 512 -> 2048, GELU, Linear 2048 -> 512, add), a 1000-way
head, argmax kept on the GPU (no host read); fp32 weights and inputs, torch.inference_mode, batch 2048 rows
from a pool of GPU tensors.
before: set_float32_matmul_precision("highest").
after:  set_float32_matmul_precision("high") (TF32 tensor cores); model and data stay fp32.
"""

import torch
import torch.nn as nn

from ._util import Step, is_cuda

NAME = "holdout39_fp32_mlp_infer"
EXPECTED_KIND = "fp32_matmul"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = 'torch.set_float32_matmul_precision("high") (TF32 tensor cores); model and data remain fp32'
SIZE = {"batch": 2048, "d": 512, "hidden": 2048, "blocks": 8}
DESCRIPTION = {
    "before": "fp32 inference, 8 residual MLP blocks (LayerNorm, 512 -> 2048 -> 512, GELU), batch 2048, "
              'argmax on the GPU, set_float32_matmul_precision("highest")',
    "after": 'same, set_float32_matmul_precision("high") (TF32)',
}
WARMUP_STEPS = 10


class Block(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.norm, self.up, self.down = nn.LayerNorm(d), nn.Linear(d, hidden), nn.Linear(hidden, d)

    def forward(self, x):
        return x + self.down(nn.functional.gelu(self.up(self.norm(x))))


def make(variant, device, pool=4):
    cuda = is_cuda(device)
    s = SIZE if cuda else {"batch": 4, "d": 16, "hidden": 32, "blocks": 2}
    prev = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest" if variant == "before" else "high")
    torch.manual_seed(0)
    model = nn.Sequential(*[Block(s["d"], s["hidden"]) for _ in range(s["blocks"])],
                          nn.LayerNorm(s["d"]), nn.Linear(s["d"], 1000)).to(device).eval()
    xs = [torch.randn(s["batch"], s["d"], device=device) for _ in range(pool)]
    st = {"i": 0, "out": None}

    def step():
        i = st["i"] = st["i"] + 1
        with torch.inference_mode():
            st["out"] = model(xs[i % pool]).argmax(-1)

    def close():
        torch.set_float32_matmul_precision(prev)
    return Step(step, close=close, info={**s, "matmul_precision": torch.get_float32_matmul_precision()})
