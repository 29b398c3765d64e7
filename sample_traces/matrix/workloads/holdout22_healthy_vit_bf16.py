"""holdout22_healthy_vit_bf16: a ViT-style encoder trained in bf16 with SDPA: GPU-bound, healthy.

Twenty-second held-out set: a healthy attention model of another shape than healthy_transformer_bf16 (patch
embedding by a strided convolution, a class token, pre-norm blocks with F.scaled_dot_product_attention,
a classification head). 8 blocks, width 768, 12 heads, MLP 3072, 196 patches + 1 token, batch 128,
bf16 autocast, fused AdamW. Nothing to fix: it must be called healthy with and without with_stack.
after_compile (added once the set was read, 2026-11-29: the tool's top finding on every trace was
        fusion_candidates, a 1.2x step, which nobody had measured): the same step with the loss under
        torch.compile (default mode), to measure it. It measured 33.3 -> 26.2 ms and 33.6 -> 26.1 ms (1.27x,
        1.29x; h200_clean19E/F): the tool was right and the pre-registered "healthy" wrong, so the workload is
        scored as a pair (fusion_candidates) from then on; its name keeps the registration's word.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._util import Step, autocast, cpu_mode, is_cuda

NAME = "holdout22_healthy_vit_bf16"
EXPECTED_KIND = "fusion_candidates"   # registered as "healthy" (79efc66); see after_compile
ROLE = "pair"
VARIANTS = ("before", "after_compile")
FIX = "torch.compile of the model and loss (default mode): inductor fuses the pointwise work"
DESCRIPTION = {"before": ("ViT-style encoder: 16x16 patch conv, class token, 8 pre-norm blocks (width 768, 12 heads, "
                          "SDPA, MLP 3072), batch 128 of 224x224, bf16 autocast, fused AdamW"),
               "after_compile": "same, the model and loss under torch.compile (default mode)"}
WARMUP_STEPS = 8


class Block(nn.Module):
    def __init__(self, d, heads, h):
        super().__init__()
        self.heads = heads
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.up, self.down = nn.Linear(d, h), nn.Linear(h, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.n1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(a)
        return x + self.down(F.gelu(self.up(self.n2(x))))


class ViT(nn.Module):
    def __init__(self, d, depth, heads, h, patch, img, classes):
        super().__init__()
        self.embed = nn.Conv2d(3, d, patch, stride=patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.pos = nn.Parameter(torch.zeros(1, (img // patch) ** 2 + 1, d))
        self.blocks = nn.Sequential(*[Block(d, heads, h) for _ in range(depth)])
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, classes)

    def forward(self, img):
        x = self.embed(img).flatten(2).transpose(1, 2)
        x = torch.cat((self.cls.expand(x.shape[0], -1, -1), x), dim=1) + self.pos
        return self.head(self.norm(self.blocks(x))[:, 0])


def make(variant, device):
    cuda = is_cuda(device)
    d, depth, heads, h, batch, img = (768, 8, 12, 3072, 128, 224) if cuda else (32, 2, 2, 64, 2, 32)
    torch.manual_seed(0)
    model = ViT(d, depth, heads, h, 16, img, 1000).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    xs = [torch.randn(batch, 3, img, img, device=device) for _ in range(2)]
    ys = [torch.randint(0, 1000, (batch,), device=device) for _ in range(2)]
    st = {"i": 0}

    def loss_fn(x, y):
        with autocast(device):
            out = model(x)
        return F.cross_entropy(out.float(), y)
    compiled = variant == "after_compile" and not cpu_mode()
    if compiled:
        torch._dynamo.reset()
        loss_fn = torch.compile(loss_fn)

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        loss_fn(xs[i % 2], ys[i % 2]).backward()
        opt.step()

    def close():
        if compiled:
            torch._dynamo.reset()
    return Step(step, close=close, info={"compiled": compiled, "batch": batch, "width": d, "depth": depth, "heads": heads, "amp": "bf16",
                            "attention": "F.scaled_dot_product_attention"})
