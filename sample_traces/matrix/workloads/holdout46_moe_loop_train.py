"""holdout46_moe_loop_train: a mixture-of-experts transformer trained with the per-expert dispatch loop most
first MoE implementations write (``for e in experts: tok = (idx == e).nonzero()``), -> a fixed-capacity dispatch
(GShard-style: each routed token's slot in its expert from a cumulative sum, the experts as two batched matmuls).

Forty-sixth held-out set (registered before it was recorded; see the matrix README). Model: token embedding
(vocabulary 8192), 4 blocks of width 512 (LayerNorm, 8-head SDPA attention, LayerNorm, a top-2 MoE of 8 experts,
hidden 1024, GELU), tied-free head; batch 8 x 256 tokens; bf16 autocast, fused AdamW.
before: per expert, (topk_idx == e).nonzero(as_tuple=True) (a device-to-host sync sizing the selection: 8 a layer,
        32 a forward), x[tok] @ w1[e] ... out.index_add_(tok, ...).
after:  capacity 1.25 x the even share: slot = expert * C + position (a cumsum of the one-hot routing), tokens
        scattered into an [experts, C, d] buffer, two torch.bmm, gathered back and weighted by their gates; no sync.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._util import Step, autocast, is_cuda

NAME = "holdout46_moe_loop_train"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = ("a fixed-capacity dispatch (each token's slot from a cumsum of the one-hot routing, the experts as two "
       "torch.bmm) instead of a loop over experts with (idx == e).nonzero()")
SIZE = {"vocab": 8192, "layers": 4, "width": 512, "heads": 8, "experts": 8, "top_k": 2, "hidden": 1024,
        "batch": 8, "seq": 256, "capacity_factor": 1.25}
DESCRIPTION = {
    "before": ("MoE transformer (4 x 512, 8 heads, 8 experts top-2, hidden 1024), batch 8 x 256, bf16 autocast, "
               "fused AdamW; experts dispatched in a loop with (idx == e).nonzero() (a sync per expert)"),
    "after": "same, a fixed-capacity dispatch (cumsum slots, two batched matmuls; no sync)",
}


class MoE(nn.Module):
    def __init__(self, d, hidden, experts, top_k, capacity_factor, dispatch):
        super().__init__()
        self.e, self.k, self.cf, self.dispatch = experts, top_k, capacity_factor, dispatch
        self.router = nn.Linear(d, experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(experts, d, hidden) * d ** -0.5)
        self.w2 = nn.Parameter(torch.randn(experts, hidden, d) * hidden ** -0.5)

    def forward(self, x):
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        gates, idx = self.router(x).float().softmax(-1).topk(self.k, dim=-1)
        gates = (gates / gates.sum(-1, keepdim=True)).to(x.dtype)
        out = self.loop(x, gates, idx) if self.dispatch == "loop" else self.capacity(x, gates, idx)
        return out.reshape(shape)

    def loop(self, x, gates, idx):
        out = torch.zeros_like(x)
        for e in range(self.e):
            tok, slot = (idx == e).nonzero(as_tuple=True)      # the sync: the selection's size
            h = F.gelu(x[tok] @ self.w1[e].to(x.dtype)) @ self.w2[e].to(x.dtype)
            out = out.index_add(0, tok, h * gates[tok, slot, None])
        return out

    def capacity(self, x, gates, idx):
        n, d = x.shape
        cap = math.ceil(n * self.k / self.e * self.cf)
        flat = idx.reshape(-1)                                  # token-major: token t's choices at t*k ...
        onehot = (flat[:, None] == torch.arange(self.e, device=x.device)).to(torch.int32)
        pos = ((onehot.cumsum(0) - 1) * onehot).sum(-1)         # position of each choice within its expert
        keep = (pos < cap).to(x.dtype)
        slot = flat * cap + pos.clamp(max=cap - 1)
        tok = torch.arange(n, device=x.device)[:, None].expand(n, self.k).reshape(-1)
        buf = x.new_zeros(self.e * cap, d).index_put((slot,), x[tok] * keep[:, None], accumulate=True)
        h = torch.bmm(F.gelu(torch.bmm(buf.view(self.e, cap, d), self.w1.to(x.dtype))), self.w2.to(x.dtype))
        y = h.reshape(self.e * cap, d)[slot] * (gates.reshape(-1) * keep)[:, None]
        return torch.zeros_like(x).index_add(0, tok, y)


class Block(nn.Module):
    def __init__(self, d, heads, moe):
        super().__init__()
        self.heads = heads
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.moe = moe

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.n1(x)).reshape(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        x = x + self.proj(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d))
        return x + self.moe(self.n2(x))


class MoELM(nn.Module):
    def __init__(self, s, dispatch):
        super().__init__()
        d = s["width"]
        self.embed = nn.Embedding(s["vocab"], d)
        self.blocks = nn.ModuleList(
            Block(d, s["heads"], MoE(d, s["hidden"], s["experts"], s["top_k"], s["capacity_factor"], dispatch))
            for _ in range(s["layers"]))
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, s["vocab"], bias=False)

    def forward(self, toks):
        h = self.embed(toks)
        for blk in self.blocks:
            h = blk(h)
        return self.head(self.norm(h))


def sizes(device, size=SIZE):
    if is_cuda(device):
        return size
    return {**size, "vocab": 64, "layers": 1, "width": 32, "heads": 2, "hidden": 48, "batch": 2, "seq": 16}


def make_model(s, variant, device):
    torch.manual_seed(0)
    return MoELM(s, "loop" if variant == "before" else "capacity").to(device)


def make(variant, device, size=SIZE):
    s = sizes(device, size)
    model = make_model(s, variant, device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if is_cuda(device) else None)
    g = torch.Generator().manual_seed(1)
    toks = [torch.randint(0, s["vocab"], (s["batch"], s["seq"] + 1), generator=g).to(device) for _ in range(2)]
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        t = toks[i % 2]
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            logits = model(t[:, :-1])
        F.cross_entropy(logits.float().reshape(-1, s["vocab"]), t[:, 1:].reshape(-1)).backward()
        opt.step()
    return Step(step, info={"tokens": s["batch"] * s["seq"]})
