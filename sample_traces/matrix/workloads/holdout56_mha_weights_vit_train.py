"""holdout56_mha_weights_vit_train: a ViT trained with nn.MultiheadAttention called as attn(h, h, h), which returns the
head-averaged attention weights by default (need_weights=True) and so writes the attention out -> need_weights=False.

Fifty-sixth held-out set (registered before it was recorded; see the matrix README). Model: 16x16 patches of 256x256
images (256 tokens), 8 pre-norm blocks of width 384 (6 heads of 64, MLP 1536), mean-pooled, 1000 classes; batch 128,
bf16 autocast, cross-entropy, fused AdamW; images already on the GPU (two batches in turn).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._mha import Encoder
from ._util import Step, autocast, is_cuda

NAME = "holdout56_mha_weights_vit_train"
EXPECTED_KIND = "fusion_candidates"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "need_weights=False in the nn.MultiheadAttention call (its weights were dropped); nothing else"
DESCRIPTION = {
    "before": ("ViT: 256 patch tokens, 8 pre-norm blocks (width 384, 6 heads, MLP 1536), batch 128, bf16 autocast, "
               "fused AdamW; nn.MultiheadAttention called as attn(h, h, h) (need_weights=True by default)"),
    "after": "same, attn(h, h, h, need_weights=False)",
}


class ViT(nn.Module):
    def __init__(self, d, heads, layers, classes, need_weights):
        super().__init__()
        self.patch = nn.Conv2d(3, d, 16, stride=16)
        self.pos = nn.Parameter(torch.zeros(1, 256, d))
        self.enc = Encoder(d, heads, layers, need_weights)
        self.head = nn.Linear(d, classes)

    def forward(self, img):
        x = self.patch(img).flatten(2).transpose(1, 2)
        x = self.enc(x + self.pos[:, :x.shape[1]])
        return self.head(x.mean(1))


def make(variant, device, pool=2):
    cuda = is_cuda(device)
    d, heads, layers, batch, side, classes = (384, 6, 8, 128, 256, 1000) if cuda else (32, 4, 2, 2, 64, 10)
    torch.manual_seed(0)
    model = ViT(d, heads, layers, classes, need_weights=variant == "before").to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    imgs = [torch.randn(batch, 3, side, side, device=device) for _ in range(pool)]
    labels = [torch.randint(0, classes, (batch,), device=device) for _ in range(pool)]
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            logits = model(imgs[i % pool])
        F.cross_entropy(logits.float(), labels[i % pool]).backward()
        opt.step()
    return Step(step, info={"batch": batch, "tokens": (side // 16) ** 2, "width": d, "heads": heads, "layers": layers,
                            "amp": "bf16", "need_weights": variant == "before"})
