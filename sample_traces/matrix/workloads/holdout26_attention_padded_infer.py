"""holdout26_attention_padded_infer: a BERT-style encoder's attention written out, with a padding mask -> SDPA.

Twenty-sixth held-out set (pre-registered 2026-11-29 before it was recorded, after the twenty-fifth set fitted
the written-out attention core on causal programs only): bidirectional attention whose mask is the batch's
padding, added to the scores as 0 / -inf (the way BERT-style code applies an attention_mask), so no masked_fill
kernel, and a fused kernel that cannot skip tiles the way a causal one does. 6 post-norm encoder blocks
(width 768, 12 heads of 64, MLP 3072, GELU), batch 16 of 512 tokens, the last quarter of every other sequence
padding, bf16, inference under no_grad.
before: scores = q @ k^T * scale + mask; softmax; @ v.
after:  F.scaled_dot_product_attention(q, k, v, attn_mask=mask) (the same additive mask).
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._util import Step, is_cuda

NAME = "holdout26_attention_padded_infer"
EXPECTED_KIND = "fusion_candidates"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "F.scaled_dot_product_attention(q, k, v, attn_mask=mask) in place of the written-out attention"
DESCRIPTION = {
    "before": ("6 BERT-style encoder blocks (width 768, 12 heads, MLP 3072), batch 16 x 512 tokens with padding, "
               "bf16, no_grad; attention written out: q @ k^T * scale + additive padding mask, softmax, @ v"),
    "after": "same blocks, F.scaled_dot_product_attention(attn_mask=the additive padding mask)",
}


class EncoderBlock(nn.Module):
    def __init__(self, d, heads, sdpa):
        super().__init__()
        self.heads, self.sdpa = heads, sdpa
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x, mask):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        if self.sdpa:
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        else:
            a = F.softmax((q @ k.transpose(-2, -1)) / math.sqrt(k.shape[-1]) + mask, dim=-1) @ v
        x = self.n1(x + self.proj(a.transpose(1, 2).reshape(b, t, d)))
        return self.n2(x + self.down(F.gelu(self.up(x))))


def make(variant, device, pool=2):
    cuda = is_cuda(device)
    d, heads, layers, batch, t = (768, 12, 6, 16, 512) if cuda else (32, 4, 2, 2, 16)
    dt = torch.bfloat16 if cuda else torch.float32
    torch.manual_seed(0)
    blocks = nn.ModuleList([EncoderBlock(d, heads, sdpa=variant == "after") for _ in range(layers)])
    blocks = blocks.to(device=device, dtype=dt).eval()
    lengths = torch.tensor([t if i % 2 == 0 else 3 * t // 4 for i in range(batch)], device=device)
    keep = torch.arange(t, device=device)[None, :] < lengths[:, None]
    mask = torch.zeros(batch, 1, 1, t, device=device, dtype=dt).masked_fill(~keep[:, None, None, :], float("-inf"))
    xs = [torch.randn(batch, t, d, device=device, dtype=dt) for _ in range(pool)]
    st = {"i": 0, "out": None}

    def step():
        i = st["i"] = st["i"] + 1
        with torch.no_grad():
            x = xs[i % pool]
            for blk in blocks:
                x = blk(x, mask)
            st["out"] = x
    return Step(step, info={"batch": batch, "seq": t, "width": d, "heads": heads, "layers": layers,
                            "mask": "additive padding", "attention": "sdpa" if variant == "after" else "written out"})
