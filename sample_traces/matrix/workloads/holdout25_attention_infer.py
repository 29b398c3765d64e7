"""holdout25_attention_infer: causal self-attention written out by hand -> F.scaled_dot_product_attention.

Twenty-fifth held-out set (pre-registered 2026-11-29 before it was recorded): the attention core as many
research codebases still write it (nanoGPT's "manual implementation of attention"): scores = q @ k^T * scale,
a causal mask by masked_fill, softmax, scores @ v. The [T, T] score matrix goes through memory three times
(scale, mask, softmax) before the second matmul reads it; SDPA's fused kernel keeps it on chip. No matrix
workload had written-out attention before this set. 4 pre-norm decoder blocks (width 1024, 16 heads of 64,
MLP 4096, GELU), batch 8 of 1024 tokens, bf16 weights, inference under torch.no_grad.
before: the written-out attention (masked_fill with a lower-triangular buffer, softmax in bf16).
after:  the same blocks with F.scaled_dot_product_attention(q, k, v, is_causal=True).
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._util import Step, is_cuda

NAME = "holdout25_attention_infer"
EXPECTED_KIND = "fusion_candidates"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "F.scaled_dot_product_attention(q, k, v, is_causal=True) in place of the written-out attention"
DESCRIPTION = {
    "before": ("4 GPT decoder blocks (width 1024, 16 heads, MLP 4096), batch 8 x 1024 tokens, bf16, no_grad; "
               "attention written out: q @ k^T * scale, masked_fill(causal), softmax, @ v"),
    "after": "same blocks, F.scaled_dot_product_attention(is_causal=True)",
}


class Block(nn.Module):
    """A pre-norm decoder block; ``sdpa`` picks the attention core (fused, or written out)."""

    def __init__(self, d, heads, t, sdpa):
        super().__init__()
        self.heads, self.sdpa = heads, sdpa
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.register_buffer("causal", torch.tril(torch.ones(t, t, dtype=torch.bool)).view(1, 1, t, t))

    def attend(self, q, k, v):
        if self.sdpa:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        t = q.shape[-2]
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.shape[-1]))
        att = att.masked_fill(~self.causal[:, :, :t, :t], float("-inf"))
        return F.softmax(att, dim=-1) @ v

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.n1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        x = x + self.proj(self.attend(q, k, v).transpose(1, 2).reshape(b, t, d))
        return x + self.down(F.gelu(self.up(self.n2(x))))


def decoder(d, heads, layers, t, sdpa):
    return nn.Sequential(*[Block(d, heads, t, sdpa) for _ in range(layers)])


def make(variant, device, pool=2):
    cuda = is_cuda(device)
    d, heads, layers, batch, t = (1024, 16, 4, 8, 1024) if cuda else (32, 4, 2, 2, 16)
    dt = torch.bfloat16 if cuda else torch.float32
    torch.manual_seed(0)
    model = decoder(d, heads, layers, t, sdpa=variant == "after").to(device=device, dtype=dt).eval()
    xs = [torch.randn(batch, t, d, device=device, dtype=dt) for _ in range(pool)]
    st = {"i": 0, "out": None}

    def step():
        i = st["i"] = st["i"] + 1
        with torch.no_grad():
            st["out"] = model(xs[i % pool])
    return Step(step, info={"batch": batch, "seq": t, "width": d, "heads": heads, "layers": layers,
                            "attention": "sdpa" if variant == "after" else "written out"})
