"""holdout26_attention_vit_fp16: a ViT's attention written out, no mask at all, fp16 -> SDPA.

Twenty-sixth held-out set (pre-registered 2026-11-29 before it was recorded): the twenty-fifth set fitted the
written-out attention core on causal programs; a core without a mask is taken at twice that share of its GEMMs
by reasoning (a causal kernel skips half the tiles), never measured. This one has no mask, fp16 instead of bf16,
and 197 tokens (a 224x224 image in 16x16 patches and a class token): 12 pre-norm blocks (width 768, 12 heads of
64, MLP 3072), batch 64, inference under no_grad.
before: scores = q @ k^T * scale; softmax; @ v.
after:  F.scaled_dot_product_attention(q, k, v).
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._util import Step, is_cuda

NAME = "holdout26_attention_vit_fp16"
EXPECTED_KIND = "fusion_candidates"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "F.scaled_dot_product_attention(q, k, v) in place of the written-out attention"
DESCRIPTION = {
    "before": ("12 ViT blocks (width 768, 12 heads, MLP 3072), batch 64 x 197 tokens, fp16, no_grad; attention "
               "written out without a mask: q @ k^T * scale, softmax, @ v"),
    "after": "same blocks, F.scaled_dot_product_attention(q, k, v)",
}


class Block(nn.Module):
    def __init__(self, d, heads, sdpa):
        super().__init__()
        self.heads, self.sdpa = heads, sdpa
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.n1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        if self.sdpa:
            a = F.scaled_dot_product_attention(q, k, v)
        else:
            a = F.softmax((q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.shape[-1])), dim=-1) @ v
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.down(F.gelu(self.up(self.n2(x))))


def make(variant, device, pool=2):
    cuda = is_cuda(device)
    d, heads, layers, batch, t = (768, 12, 12, 64, 197) if cuda else (32, 4, 2, 2, 9)
    dt = torch.float16 if cuda else torch.float32
    torch.manual_seed(0)
    model = nn.Sequential(*[Block(d, heads, sdpa=variant == "after") for _ in range(layers)])
    model = model.to(device=device, dtype=dt).eval()
    xs = [torch.randn(batch, t, d, device=device, dtype=dt) for _ in range(pool)]
    st = {"i": 0, "out": None}

    def step():
        i = st["i"] = st["i"] + 1
        with torch.no_grad():
            st["out"] = model(xs[i % pool])
    return Step(step, info={"batch": batch, "seq": t, "width": d, "heads": heads, "layers": layers, "amp": "fp16",
                            "attention": "sdpa" if variant == "after" else "written out"})
