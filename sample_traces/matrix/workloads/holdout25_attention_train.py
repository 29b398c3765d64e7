"""holdout25_attention_train: training with causal attention written out -> F.scaled_dot_product_attention.

Twenty-fifth held-out set (pre-registered 2026-11-29 before it was recorded), the training side of
holdout25_attention_infer (its blocks): the backward of the written-out attention adds softmax's backward,
the mask's and the scale's over the [T, T] scores, where the fused kernel recomputes the scores on chip.
Pre-registered as the held-out check of any model fitted on the inference program of this set.
6 decoder blocks (width 768, 12 heads of 64, MLP 3072), batch 16 of 512 tokens, bf16 autocast, cross-entropy
over a 4096-token vocabulary, fused AdamW.
before: the written-out attention.
after:  F.scaled_dot_product_attention(q, k, v, is_causal=True).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._util import Step, autocast, is_cuda
from .holdout25_attention_infer import decoder

NAME = "holdout25_attention_train"
EXPECTED_KIND = "fusion_candidates"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "F.scaled_dot_product_attention(q, k, v, is_causal=True) in place of the written-out attention"
DESCRIPTION = {
    "before": ("6 GPT decoder blocks (width 768, 12 heads, MLP 3072), batch 16 x 512 tokens, vocab 4096, bf16 "
               "autocast, fused AdamW; attention written out: q @ k^T * scale, masked_fill(causal), softmax, @ v"),
    "after": "same training step, F.scaled_dot_product_attention(is_causal=True)",
}


def make(variant, device, pool=2):
    cuda = is_cuda(device)
    d, heads, layers, batch, t, vocab = (768, 12, 6, 16, 512, 4096) if cuda else (32, 4, 2, 2, 16, 64)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(vocab, d), decoder(d, heads, layers, t, sdpa=variant == "after"),
                          nn.LayerNorm(d), nn.Linear(d, vocab)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    toks = [torch.randint(0, vocab, (batch, t + 1), device=device) for _ in range(pool)]
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        x = toks[i % pool]
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            logits = model(x[:, :-1])
        F.cross_entropy(logits.float().view(-1, vocab), x[:, 1:].reshape(-1)).backward()
        opt.step()
    return Step(step, info={"batch": batch, "seq": t, "width": d, "heads": heads, "layers": layers, "amp": "bf16",
                            "attention": "sdpa" if variant == "after" else "written out"})
