"""holdout57_mha_fastpath_infer: a ViT's fp16 inference (model.half().eval(), inference_mode, no autocast) whose
nn.MultiheadAttention runs its native fast path (torch._native_multi_head_attention) asked for the weights by default
-> need_weights=False.

Fifty-seventh held-out set (registered before it was recorded; see the matrix README). With the weights asked for, the
fast path writes the attention out inside one ATen op (bmm, softmax, bmm, then the weights summed over heads); without
them it calls SDPA's fused kernel. Model: 256 patch tokens (16x16 patches of 256x256 images), 12 pre-norm blocks of
width 768 (12 heads of 64, MLP 3072), batch 64; the pooled features kept on the GPU.
"""

import torch
import torch.nn as nn

from ._mha import Encoder
from ._util import Step, is_cuda

NAME = "holdout57_mha_fastpath_infer"
EXPECTED_KIND = "fusion_candidates"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "need_weights=False in the nn.MultiheadAttention call (its weights were dropped); nothing else"
DESCRIPTION = {
    "before": ("ViT inference: 256 patch tokens, 12 pre-norm blocks (width 768, 12 heads, MLP 3072), batch 64, "
               "fp16 weights, eval, inference_mode: nn.MultiheadAttention's native fast path, weights asked for"),
    "after": "same, need_weights=False",
}


def make(variant, device, pool=2):
    cuda = is_cuda(device)
    d, heads, layers, batch, side = (768, 12, 12, 64, 256) if cuda else (32, 4, 2, 2, 64)
    dt = torch.float16 if cuda else torch.float32
    torch.manual_seed(0)
    patch = nn.Conv2d(3, d, 16, stride=16)
    enc = Encoder(d, heads, layers, need_weights=variant == "before")
    patch, enc = patch.to(device=device, dtype=dt).eval(), enc.to(device=device, dtype=dt).eval()
    imgs = [torch.randn(batch, 3, side, side, device=device, dtype=dt) for _ in range(pool)]
    st = {"i": 0, "out": None}

    def step():
        i = st["i"] = st["i"] + 1
        with torch.inference_mode():
            x = patch(imgs[i % pool]).flatten(2).transpose(1, 2)
            st["out"] = enc(x).mean(1)
    return Step(step, info={"batch": batch, "tokens": (side // 16) ** 2, "width": d, "heads": heads, "layers": layers,
                            "dtype": "fp16", "need_weights": variant == "before"})
