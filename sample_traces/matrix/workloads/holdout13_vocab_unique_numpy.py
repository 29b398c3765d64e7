"""holdout13_vocab_unique_numpy: a token-frequency table rebuilt in numpy every step -> built once.

Thirteenth held-out set (after the warm-rest rule, fixes.WARM_CPU): host work on the loop's thread that reads
no copied result: each step rebuilds the frequency table of a 3M-token corpus with np.unique (a sort) to
derive frequency-based loss weights for an embedding model, then uploads the 32k weights.
before: np.unique(corpus, return_counts=True) over 3M int32 tokens, weights = counts ** -0.5, normalised,
        torch.from_numpy(...).to(device) every step; then an embedding-bag classifier training step
        (vocab 32k, dim 512, batch 512 x 64 tokens, bf16, fused Adam).
after:  the weights computed once at start-up and kept on the GPU.
"""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ._util import Step, autocast, is_cuda

NAME = "holdout13_vocab_unique_numpy"
EXPECTED_KIND = "host_bound"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "compute the token-frequency weights once at start-up and keep them on the GPU"
DESCRIPTION = {
    "before": ("np.unique over a 3M-token corpus every step for frequency weights (32k vocab), uploaded; embedding-bag "
               "classifier (dim 512, batch 512 x 64 tokens, bf16, fused Adam) step"),
    "after": "same step; the weights computed once and kept on the GPU",
}


def weights(corpus, vocab):
    ids, counts = np.unique(corpus, return_counts=True)
    w = np.zeros(vocab, dtype=np.float32)
    w[ids] = counts.astype(np.float32) ** -0.5
    return w / w[w > 0].mean()


def make(variant, device, pool=4):
    cuda = is_cuda(device)
    vocab, dim, batch, seq, ntok, classes = (32000, 512, 512, 64, 3_000_000, 100) if cuda else \
        (500, 16, 4, 8, 20_000, 5)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    corpus = (rng.zipf(1.2, size=ntok) % vocab).astype(np.int32)
    emb = nn.EmbeddingBag(vocab, dim, mode="sum").to(device)
    head = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, classes)).to(device)
    params = list(emb.parameters()) + list(head.parameters())
    opt = torch.optim.Adam(params, lr=1e-4, fused=True if cuda else None)
    toks = [torch.randint(0, vocab, (batch, seq), device=device) for _ in range(pool)]
    ys = [torch.randint(0, classes, (batch,), device=device) for _ in range(pool)]
    st = {"i": 0, "w": torch.from_numpy(weights(corpus, vocab)).to(device)}

    def step():
        i = st["i"] = st["i"] + 1
        if variant == "before":                                   # host work on the hot path
            st["w"] = torch.from_numpy(weights(corpus, vocab)).to(device)
        t = toks[i % pool]
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            h = emb(t, per_sample_weights=st["w"][t].to(emb.weight.dtype) if not cuda else st["w"][t])
            out = head(h)
        F.cross_entropy(out.float(), ys[i % pool]).backward()
        opt.step()
    return Step(step, info={"batch": batch, "tokens": ntok,
                            "host_work": "per step" if variant == "before" else "once at start-up"})
