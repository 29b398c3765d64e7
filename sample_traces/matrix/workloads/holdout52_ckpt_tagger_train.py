"""holdout52_ckpt_tagger_train: a transformer token tagger trained with activation checkpointing on every encoder layer
(`torch.utils.checkpoint.checkpoint(layer, x, use_reentrant=False)`, what gradient_checkpointing_enable() does) on a
model whose activations fit in memory without it -> checkpointing off.

Fifty-second held-out set (registered before it was recorded; see the matrix README). With checkpointing, each layer's
forward keeps only its input; the backward pass runs each layer's forward again (its linears, attention, norms,
activations) before that layer's backward: about one more forward's GPU work and dispatch a step, on autograd's thread.
Model: holdout48's tagger (token embedding, vocabulary 8000, plus positions; nn.TransformerEncoderLayer, pre-norm, no
dropout; a linear head), 6 layers of 768, 12 heads; bf16 autocast, fused AdamW; batch 16 x 512 tokens already on the GPU
(two batches in turn), a cross_entropy over every position.
"""

import torch
import torch.nn.functional as F

from ._ckpt import CkptTagger
from ._util import Step, autocast, is_cuda

NAME = "holdout52_ckpt_tagger_train"
EXPECTED_KIND = "activation_checkpointing"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "activation checkpointing off (the layers called directly), nothing else"
SIZE = {"batch": 16, "seq": 512, "vocab": 8000, "dim": 768, "heads": 12, "layers": 6}
DESCRIPTION = {
    "before": ("transformer tagger (6 x 768, 12 heads, vocabulary 8000), batch 16 x 512, bf16 autocast, fused AdamW, "
               "every encoder layer under torch.utils.checkpoint (use_reentrant=False)"),
    "after": "same, no checkpointing",
}


def make(variant, device, size=SIZE):
    cuda = is_cuda(device)
    s = size if cuda else {**size, "batch": 3, "seq": 16, "vocab": 50, "dim": 16, "heads": 2, "layers": 2}
    torch.manual_seed(0)
    model = CkptTagger(s["vocab"], s["dim"], s["heads"], s["layers"], s["seq"], ckpt=variant == "before").to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    g = torch.Generator().manual_seed(1)
    xs = [torch.randint(0, s["vocab"], (s["batch"], s["seq"]), generator=g).to(device) for _ in range(2)]
    ys = [torch.randint(0, s["vocab"], (s["batch"], s["seq"]), generator=g).to(device) for _ in range(2)]
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            logits = model(xs[i % 2])
        F.cross_entropy(logits.float().flatten(0, 1), ys[i % 2].flatten()).backward()
        opt.step()
    return Step(step, info={"batch": s["batch"], "seq": s["seq"], "amp": "bf16", "checkpointing": variant == "before"})
