"""holdout45_ddim_unet_compile: a diffusion sampler (DDIM, classifier-free guidance) whose small UNet runs eagerly ->
the UNet under torch.compile(mode="reduce-overhead"), the sampler's own arithmetic left eager.

Forty-fifth held-out set (pre-registered 2026-12-04 before it was recorded): the loop users profile when they sample
images, a denoiser called once per sampling step with the scheduler's few tensor ops between the calls; the matrix had
language-model decode loops (holdout30_*, holdout44_*) but no sampling loop. One step is one image generated.
Model: a class-conditional UNet written out (no diffusers): 4 x 32 x 32 latents, channels 64/128/128, one ResBlock
(GroupNorm, SiLU, 3x3 convs, the time-and-class embedding added) per level down and up, self-attention (SDPA) at 8 x 8,
sinusoidal time embedding and an nn.Embedding of 11 classes (10 and the null class), bf16 weights, eval,
inference_mode. Sampler: 20 DDIM steps (eta 0), its alphas as Python floats (no device sync), guidance scale 4: the
latent doubled (class and null class) into one UNet call a step, then the guided noise, x0 and the next latent: 7
small ops a sampling step. Batch 1 image (2 in the UNet call).
before: eager.
after:  unet = torch.compile(unet, mode="reduce-overhead"): each call's forward a CUDA graph replay (cudagraph trees),
        the sampler's ops between the calls eager.
"""

import math

import torch
import torch.nn.functional as F

from ._util import Step, cpu_mode, is_cuda

NAME = "holdout45_ddim_unet_compile"
EXPECTED_KIND = "launch_overhead"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = 'torch.compile(unet, mode="reduce-overhead") (CUDA graphs per UNet call; the sampler stays eager)'
SIZE = {"channels": (64, 128, 128), "latent": 32, "batch": 1, "sampling_steps": 20, "guidance": 4.0}
DESCRIPTION = {
    "before": "hand-written class-conditional UNet (64/128/128, attention at 8x8, bf16), DDIM 20 steps with "
              "classifier-free guidance, batch 1 (2 per call), 4x32x32 latents, eager",
    "after": 'same, the UNet under torch.compile(mode="reduce-overhead")',
}
WARMUP_STEPS = 6      # (after compiles and records its graphs in the first of them)


def timestep_embedding(t, dim):
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, device=t.device, dtype=torch.float32) / half)
    args = t.float()[:, None] * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


class ResBlock(torch.nn.Module):
    def __init__(self, cin, cout, temb):
        super().__init__()
        self.n1, self.c1 = torch.nn.GroupNorm(32, cin), torch.nn.Conv2d(cin, cout, 3, padding=1)
        self.emb = torch.nn.Linear(temb, cout)
        self.n2, self.c2 = torch.nn.GroupNorm(32, cout), torch.nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = torch.nn.Conv2d(cin, cout, 1) if cin != cout else torch.nn.Identity()

    def forward(self, x, e):
        h = self.c1(F.silu(self.n1(x)))
        h = h + self.emb(F.silu(e))[:, :, None, None]
        h = self.c2(F.silu(self.n2(h)))
        return self.skip(x) + h


class Attention(torch.nn.Module):
    def __init__(self, c, heads=4):
        super().__init__()
        self.heads, self.norm = heads, torch.nn.GroupNorm(32, c)
        self.qkv, self.out = torch.nn.Conv2d(c, 3 * c, 1), torch.nn.Conv2d(c, c, 1)

    def forward(self, x):
        b, c, hh, ww = x.shape
        q, k, v = self.qkv(self.norm(x)).reshape(b, 3, self.heads, c // self.heads, hh * ww).unbind(1)
        o = F.scaled_dot_product_attention(q.transpose(-1, -2), k.transpose(-1, -2), v.transpose(-1, -2))
        return x + self.out(o.transpose(-1, -2).reshape(b, c, hh, ww))


class UNet(torch.nn.Module):
    def __init__(self, channels=(64, 128, 128), classes=11, cin=4):
        super().__init__()
        c0, temb = channels[0], 4 * channels[0]
        self.c0 = c0
        self.t_mlp = torch.nn.Sequential(torch.nn.Linear(c0, temb), torch.nn.SiLU(), torch.nn.Linear(temb, temb))
        self.label = torch.nn.Embedding(classes, temb)
        self.inp = torch.nn.Conv2d(cin, c0, 3, padding=1)
        self.down, self.pools = torch.nn.ModuleList(), torch.nn.ModuleList()
        prev = c0
        for i, c in enumerate(channels):
            self.down.append(ResBlock(prev, c, temb))
            self.pools.append(torch.nn.Conv2d(c, c, 3, stride=2, padding=1) if i < len(channels) - 1
                              else torch.nn.Identity())
            prev = c
        self.mid1, self.attn, self.mid2 = ResBlock(prev, prev, temb), Attention(prev), ResBlock(prev, prev, temb)
        self.up = torch.nn.ModuleList()
        for c in reversed(channels):
            self.up.append(ResBlock(prev + c, c, temb))
            prev = c
        self.out_norm, self.out = torch.nn.GroupNorm(32, prev), torch.nn.Conv2d(prev, cin, 3, padding=1)

    def forward(self, x, t, y):
        e = self.t_mlp(timestep_embedding(t, self.c0).to(x.dtype)) + self.label(y)
        h, skips = self.inp(x), []
        for block, pool in zip(self.down, self.pools):
            h = block(h, e)
            skips.append(h)
            h = pool(h)
        h = self.mid2(self.attn(self.mid1(h, e)), e)
        for block in self.up:
            s = skips.pop()
            if h.shape[-1] != s.shape[-1]:
                h = F.interpolate(h, size=s.shape[-2:], mode="nearest")
            h = block(torch.cat([h, s], dim=1), e)
        return self.out(F.silu(self.out_norm(h)))


def ddim_sampler(denoiser, s, device, dtype, null_class):
    """The sampling step shared by the set's workloads: one generation of s["batch"] images, s["sampling_steps"] DDIM
    steps (eta 0) with classifier-free guidance, the schedule's alphas as Python floats."""
    betas = torch.linspace(1e-4, 0.02, 1000, dtype=torch.float64)
    abar = torch.cumprod(1 - betas, 0).tolist()
    ts = list(range(999, -1, -1000 // s["sampling_steps"]))[: s["sampling_steps"]]
    g = torch.Generator().manual_seed(0)
    b, lat = s["batch"], s["latent"]
    noise = [torch.randn(b, 4, lat, lat, generator=g).to(device, dtype) for _ in range(2)]
    labels = torch.cat([torch.arange(b) % null_class, torch.full((b,), null_class)]).to(device)
    tvec = {t: torch.full((2 * b,), t, device=device, dtype=torch.long) for t in ts}
    out = torch.empty(b, 4, lat, lat, device=device, dtype=dtype)
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        x = noise[i % 2]
        with torch.inference_mode():
            for k, t in enumerate(ts):
                a, a_prev = abar[t], (abar[ts[k + 1]] if k + 1 < len(ts) else 1.0)
                cond, uncond = denoiser(torch.cat([x, x]), tvec[t], labels).chunk(2)
                eps = uncond + s["guidance"] * (cond - uncond)
                x0 = (x - math.sqrt(1 - a) * eps) / math.sqrt(a)
                x = math.sqrt(a_prev) * x0 + math.sqrt(1 - a_prev) * eps
            out.copy_(x)
    return step


def make_sampler(net, s, variant, device, mode="reduce-overhead"):
    """The UNet or DiT sampler, eager (before) or the denoiser under torch.compile(mode=mode) (after)."""
    cuda = is_cuda(device)
    compiled = variant == "after" and cuda and not cpu_mode()
    if compiled:
        torch._dynamo.reset()
    dtype = torch.bfloat16 if cuda else torch.float32
    net = net.to(device=device, dtype=dtype).eval()
    denoiser = torch.compile(net, mode=mode) if compiled else net

    def close():
        if compiled:
            torch._dynamo.reset()
    return Step(ddim_sampler(denoiser, s, device, dtype, null_class=10), close=close,
                info={**s, "compiled": compiled})


def make(variant, device):
    s = SIZE if is_cuda(device) else {**SIZE, "channels": (32, 32, 32), "latent": 8, "sampling_steps": 3}
    torch.manual_seed(0)
    return make_sampler(UNet(s["channels"]), s, variant, device)
