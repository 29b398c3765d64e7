"""holdout45_ddim_dit_compile: a diffusion transformer (DiT, adaLN-zero) sampled with DDIM and classifier-free
guidance, eager -> the DiT under torch.compile(mode="reduce-overhead"), the sampler's own arithmetic left eager.

Forty-fifth held-out set (pre-registered 2026-12-04 before it was recorded; see holdout45_ddim_unet_compile, whose
sampler it shares). Model: a DiT written out: 4 x 32 x 32 latents in 2 x 2 patches (256 tokens), 6 blocks of width 384,
6 heads (SDPA), MLP 1536 (GELU, tanh), adaLN-zero modulation from the time and class embeddings (an nn.Embedding of 11
classes), fixed sine-cosine position embedding, bf16 weights, eval, inference_mode. Sampler: 20 DDIM steps, guidance
scale 4, batch 2 images (4 per call).
before: eager.
after:  dit = torch.compile(dit, mode="reduce-overhead").
"""

import torch
import torch.nn.functional as F

from ._util import is_cuda
from .holdout45_ddim_unet_compile import make_sampler, timestep_embedding

NAME = "holdout45_ddim_dit_compile"
EXPECTED_KIND = "launch_overhead"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = 'torch.compile(dit, mode="reduce-overhead") (CUDA graphs per DiT call; the sampler stays eager)'
SIZE = {"depth": 6, "width": 384, "heads": 6, "patch": 2, "latent": 32, "batch": 2, "sampling_steps": 20,
        "guidance": 4.0}
DESCRIPTION = {
    "before": "hand-written DiT (6 x 384, 6 heads, patch 2, adaLN-zero, bf16), DDIM 20 steps with classifier-free "
              "guidance, batch 2 (4 per call), 4x32x32 latents, eager",
    "after": 'same, the DiT under torch.compile(mode="reduce-overhead")',
}
WARMUP_STEPS = 6


def modulate(x, shift, scale):
    return x * (1 + scale[:, None]) + shift[:, None]


class Block(torch.nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.n1 = torch.nn.LayerNorm(d, elementwise_affine=False, eps=1e-6)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.n2 = torch.nn.LayerNorm(d, elementwise_affine=False, eps=1e-6)
        self.fc1, self.fc2 = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)
        self.ada = torch.nn.Linear(d, 6 * d)

    def forward(self, x, c):
        sh1, sc1, g1, sh2, sc2, g2 = self.ada(F.silu(c)).chunk(6, dim=-1)
        b, n, d = x.shape
        q, k, v = self.qkv(modulate(self.n1(x), sh1, sc1)).reshape(b, n, 3, self.heads, d // self.heads) \
            .permute(2, 0, 3, 1, 4).unbind(0)
        o = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, d)
        x = x + g1[:, None] * self.proj(o)
        h = self.fc2(F.gelu(self.fc1(modulate(self.n2(x), sh2, sc2)), approximate="tanh"))
        return x + g2[:, None] * h


class DiT(torch.nn.Module):
    def __init__(self, depth=6, d=384, heads=6, patch=2, latent=32, cin=4, classes=11):
        super().__init__()
        self.patch, self.d, self.cin = patch, d, cin
        self.embed = torch.nn.Conv2d(cin, d, patch, stride=patch)
        n = latent // patch
        ys, xs = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
        pos = torch.cat([timestep_embedding(ys.flatten(), d // 2), timestep_embedding(xs.flatten(), d // 2)], -1)
        self.register_buffer("pos", pos[None])
        self.t_mlp = torch.nn.Sequential(torch.nn.Linear(256, d), torch.nn.SiLU(), torch.nn.Linear(d, d))
        self.label = torch.nn.Embedding(classes, d)
        self.blocks = torch.nn.ModuleList(Block(d, heads) for _ in range(depth))
        self.final_norm = torch.nn.LayerNorm(d, elementwise_affine=False, eps=1e-6)
        self.final_ada = torch.nn.Linear(d, 2 * d)
        self.final = torch.nn.Linear(d, patch * patch * cin)

    def forward(self, x, t, y):
        b, _, hh, ww = x.shape
        h = self.embed(x).flatten(2).transpose(1, 2) + self.pos.to(x.dtype)
        c = self.t_mlp(timestep_embedding(t, 256).to(x.dtype)) + self.label(y)
        for blk in self.blocks:
            h = blk(h, c)
        sh, sc = self.final_ada(F.silu(c)).chunk(2, dim=-1)
        h = self.final(modulate(self.final_norm(h), sh, sc))
        p, n = self.patch, hh // self.patch
        h = h.reshape(b, n, n, p, p, self.cin).permute(0, 5, 1, 3, 2, 4)
        return h.reshape(b, self.cin, hh, ww)


def make(variant, device):
    s = SIZE if is_cuda(device) else {**SIZE, "depth": 1, "width": 32, "heads": 2, "latent": 8, "sampling_steps": 3}
    torch.manual_seed(0)
    net = DiT(s["depth"], s["width"], s["heads"], s["patch"], s["latent"])
    return make_sampler(net, s, variant, device)

