"""holdout56_mha_weights_text_infer: a text encoder's batched inference (padded batches, a key padding mask) with
nn.MultiheadAttention called as attn(h, h, h, key_padding_mask=...), need_weights=True by default -> need_weights=False.

Fifty-sixth held-out set (registered before it was recorded; see the matrix README). Under autocast the module takes
F.multi_head_attention_forward (the native fast path is off under autocast): with the weights asked for, the padding
mask goes into a baddbmm and softmax runs in float32; without, SDPA takes the mask. Model: 6 pre-norm blocks of width
512 (8 heads of 64, MLP 2048), token embeddings of a 16,384 vocabulary; batch 64 x 384 tokens, each sequence padded
from a length in [192, 384]; fp16 autocast, eval, no_grad; the mean-pooled embedding is kept on the GPU.
"""

import torch
import torch.nn as nn

from ._mha import Encoder
from ._util import Step, autocast, is_cuda

NAME = "holdout56_mha_weights_text_infer"
EXPECTED_KIND = "fusion_candidates"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "need_weights=False in the nn.MultiheadAttention call (its weights were dropped); nothing else"
DESCRIPTION = {
    "before": ("text encoder inference: 6 pre-norm blocks (width 512, 8 heads, MLP 2048), batch 64 x 384 tokens "
               "padded (key_padding_mask), fp16 autocast, no_grad; attn(h, h, h, key_padding_mask=m), weights asked "
               "for by default"),
    "after": "same, need_weights=False",
}


def make(variant, device, pool=2):
    cuda = is_cuda(device)
    d, heads, layers, batch, t, vocab = (512, 8, 6, 64, 384, 16384) if cuda else (32, 4, 2, 2, 16, 64)
    torch.manual_seed(0)
    emb = nn.Embedding(vocab, d).to(device)
    enc = Encoder(d, heads, layers, need_weights=variant == "before").to(device).eval()
    g = torch.Generator().manual_seed(1)
    feeds = []
    for _ in range(pool):
        lens = torch.randint(t // 2, t + 1, (batch,), generator=g)
        pad = torch.arange(t)[None, :] >= lens[:, None]        # True where padded
        toks = torch.randint(1, vocab, (batch, t), generator=g).masked_fill(pad, 0)
        feeds.append((toks.to(device), pad.to(device)))
    st = {"i": 0, "out": None}

    def step():
        i = st["i"] = st["i"] + 1
        toks, pad = feeds[i % pool]
        with torch.no_grad(), autocast(device, torch.float16):
            h = enc(emb(toks), key_padding_mask=pad)
            keep = (~pad).unsqueeze(-1).to(h.dtype)
            st["out"] = (h * keep).sum(1) / keep.sum(1)
    return Step(step, info={"batch": batch, "tokens": t, "width": d, "heads": heads, "layers": layers,
                            "amp": "fp16", "need_weights": variant == "before"})
