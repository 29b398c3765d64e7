"""holdout57_attention_bidir_train: a bidirectional encoder trained with its attention written out by hand and no
mask at all -> F.scaled_dot_product_attention(q, k, v).

Fifty-seventh held-out set (registered before it was recorded; see the matrix README): a held-out check of pricing a
core without a mask at the causal share (changed after reading the fifty-sixth set). Model: 6 pre-norm blocks of
width 768 (12 heads of 64, MLP 3072) over 1,024 tokens of a 8,192 vocabulary, batch 8, bf16 autocast, a masked-LM
style cross-entropy over every token, fused AdamW.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._util import Step, autocast, is_cuda
from .holdout26_attention_vit_fp16 import Block    # the same block, trained here at 1,024 tokens

NAME = "holdout57_attention_bidir_train"
EXPECTED_KIND = "fusion_candidates"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "F.scaled_dot_product_attention(q, k, v) in place of the written-out attention; nothing else"
DESCRIPTION = {
    "before": ("bidirectional encoder: 6 pre-norm blocks (width 768, 12 heads, MLP 3072), batch 8 x 1024 tokens, "
               "vocab 8192, bf16 autocast, fused AdamW; attention written out without a mask: softmax(q @ k^T * "
               "scale) @ v"),
    "after": "same, F.scaled_dot_product_attention(q, k, v)",
}


def make(variant, device, pool=2):
    cuda = is_cuda(device)
    d, heads, layers, batch, t, vocab = (768, 12, 6, 8, 1024, 8192) if cuda else (32, 4, 2, 2, 16, 64)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(vocab, d), *[Block(d, heads, sdpa=variant == "after") for _ in range(layers)],
                          nn.LayerNorm(d), nn.Linear(d, vocab)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    toks = [torch.randint(0, vocab, (batch, t), device=device) for _ in range(pool)]
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        x = toks[i % pool]
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            logits = model(x)
        F.cross_entropy(logits.float().view(-1, vocab), x.view(-1)).backward()
        opt.step()
    return Step(step, info={"batch": batch, "seq": t, "width": d, "heads": heads, "layers": layers, "amp": "bf16",
                            "attention": "sdpa" if variant == "after" else "written out, no mask"})
