"""holdout8_fp32_encoder: an fp32 transformer encoder trained with full-fp32 matmuls -> TF32.

Eighth held-out set: two nn.TransformerEncoderLayer (d_model 1024, 16 heads, feed-forward 4096,
batch_first, no dropout), batch 16 x 256 tokens, fp32 model and data, fused AdamW. Unlike fp32_matmul
(a plain MLP) a share of the step is attention, softmax, LayerNorm and the optimizer, which TF32 does not
speed up.
before: set_float32_matmul_precision("highest") (allow_tf32=False).
after:  set_float32_matmul_precision("high") (TF32 tensor cores); model and data stay fp32.
"""

import torch
import torch.nn as nn

from ._util import Step, is_cuda

NAME = "holdout8_fp32_encoder"
EXPECTED_KIND = "fp32_matmul"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = 'torch.set_float32_matmul_precision("high") (TF32 tensor cores); model and data remain fp32'
DESCRIPTION = {
    "before": "2 TransformerEncoderLayer(1024, 16 heads, ff 4096), batch 16x256, fp32, fused AdamW, "
              'set_float32_matmul_precision("highest")',
    "after": 'same, set_float32_matmul_precision("high") (TF32)',
}


def make(variant, device, pool=2):
    cuda = is_cuda(device)
    d, heads, ff, b, t = (1024, 16, 4096, 16, 256) if cuda else (32, 4, 64, 2, 8)
    prev = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest" if variant == "before" else "high")
    torch.manual_seed(0)
    layer = lambda: nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, batch_first=True)  # noqa: E731
    model = nn.Sequential(layer(), layer()).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    xs = [torch.randn(b, t, d, device=device) for _ in range(pool)]
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        model(xs[i % pool]).pow(2).mean().backward()
        opt.step()

    def close():
        torch.set_float32_matmul_precision(prev)
    return Step(step, close=close, info={"matmul_precision": torch.get_float32_matmul_precision(),
                                         "tokens": b * t})
