"""holdout57_mha_cross_attn_train: a Perceiver-style model trained in bf16 whose latents cross-attend to the inputs
through nn.MultiheadAttention called as attn(lat, x, x) (need_weights=True by default) -> need_weights=False.

Fifty-seventh held-out set (registered before it was recorded; see the matrix README). Cross-attention (the query is
not the key) always takes F.multi_head_attention_forward. Model: inputs of 4,096 tokens x 64 features projected to
width 512; 256 learned latents; 4 blocks, each a pre-norm cross-attention of the latents to the inputs (8 heads of 64)
and a GELU MLP of 2048 on the latents; mean-pooled latents regress a 16-wide target (MSE). Batch 32, bf16 autocast,
fused AdamW; inputs already on the GPU (two batches in turn).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._util import Step, autocast, is_cuda

NAME = "holdout57_mha_cross_attn_train"
EXPECTED_KIND = "fusion_candidates"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "need_weights=False in the nn.MultiheadAttention call (its weights were dropped); nothing else"
DESCRIPTION = {
    "before": ("Perceiver-style: 256 latents cross-attend to 4096 input tokens (width 512, 8 heads, MLP 2048), 4 "
               "blocks, batch 32, bf16 autocast, fused AdamW; attn(lat, x, x) with the weights asked for by default"),
    "after": "same, need_weights=False",
}


class Cross(nn.Module):
    def __init__(self, d, heads, need_weights):
        super().__init__()
        self.need_weights = need_weights
        self.nq, self.nkv, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, lat, x):
        q, kv = self.nq(lat), self.nkv(x)
        if self.need_weights:
            a, _ = self.attn(q, kv, kv)
        else:
            a, _ = self.attn(q, kv, kv, need_weights=False)
        lat = lat + a
        return lat + self.down(F.gelu(self.up(self.n2(lat))))


class Perceiver(nn.Module):
    def __init__(self, feat, d, heads, layers, latents, out, need_weights):
        super().__init__()
        self.inp = nn.Linear(feat, d)
        self.lat = nn.Parameter(torch.randn(1, latents, d) * 0.02)
        self.blocks = nn.ModuleList(Cross(d, heads, need_weights) for _ in range(layers))
        self.head = nn.Linear(d, out)

    def forward(self, x):
        x = self.inp(x)
        lat = self.lat.expand(x.shape[0], -1, -1)
        for b in self.blocks:
            lat = b(lat, x)
        return self.head(lat.mean(1))


def make(variant, device, pool=2):
    cuda = is_cuda(device)
    feat, d, heads, layers, latents, n, batch = (64, 512, 8, 4, 256, 4096, 32) if cuda else (8, 32, 4, 2, 8, 32, 2)
    torch.manual_seed(0)
    model = Perceiver(feat, d, heads, layers, latents, 16, need_weights=variant == "before").to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    xs = [torch.randn(batch, n, feat, device=device) for _ in range(pool)]
    ys = [torch.randn(batch, 16, device=device) for _ in range(pool)]
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            pred = model(xs[i % pool])
        F.mse_loss(pred.float(), ys[i % pool]).backward()
        opt.step()
    return Step(step, info={"batch": batch, "inputs": n, "latents": latents, "width": d, "heads": heads,
                            "layers": layers, "amp": "bf16", "need_weights": variant == "before"})
