"""holdout32_compiled_mask_any: a compiled encoder's training step that asks `if pad.any():` -> the mask always.

Thirty-second held-out set (written after the sync fix learned to merge the compiled regions a graph break
splits, analyses/graph_break.py, before any GPU trace of the program existed): a graph break once, early in the
forward and outside any loop, where the thirty-first set's broke inside a loop over blocks. A text classifier's
forward builds the padding mask only when some sequence is padded (`if pad.any():`, a sync that Dynamo cannot
trace); every batch has padded sequences, so the mask is always built.
before: token embedding, 4 pre-norm blocks (d 512, 8 heads, SDPA with a boolean mask, MLP 2048), masked mean pool,
        a linear head; batch 64 x 128 tokens, bf16 autocast, the loss under torch.compile (default mode), fused
        AdamW; the `if pad.any():` branch in the forward.
after:  the mask built unconditionally (no branch: one graph, no sync).
after_graph: that under torch.compile(mode="reduce-overhead").
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._util import Step, autocast, cpu_mode, is_cuda

NAME = "holdout32_compiled_mask_any"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph")
FIX = "build the padding mask unconditionally (no `if pad.any():`): no graph break, no sync"
DESCRIPTION = {
    "before": ("text classifier: embedding, 4 pre-norm blocks (d 512, 8 heads, SDPA with a padding mask, MLP 2048), "
               "masked mean pool; batch 64 x 128, bf16 autocast, torch.compile default, fused AdamW; `if pad.any():` "
               "in the forward (a graph break and a sync)"),
    "after": "same, the mask built unconditionally (one graph, no sync)",
    "after_graph": 'same as after, torch.compile(mode="reduce-overhead")',
}
WARMUP_STEPS = 8


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x, mask):
        b, t, d = x.shape
        q, k, v = self.qkv(self.n1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(a)
        return x + self.down(F.gelu(self.up(self.n2(x))))


class Classifier(nn.Module):
    def __init__(self, vocab, d, heads, depth, classes, always_mask):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(depth))
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, classes)
        self.always_mask = always_mask

    def forward(self, tokens, lengths):
        x = self.emb(tokens)
        pad = torch.arange(tokens.shape[1], device=tokens.device)[None, :] >= lengths[:, None]
        if self.always_mask:
            mask = ~pad[:, None, None, :]
        elif pad.any():
            mask = ~pad[:, None, None, :]
        else:
            mask = None
        for blk in self.blocks:
            x = blk(x, mask)
        keep = (~pad).unsqueeze(-1).to(x.dtype)
        return self.head((self.norm(x) * keep).sum(1) / keep.sum(1))


def make(variant, device):
    cuda = is_cuda(device)
    vocab, d, heads, depth, batch, t = (8000, 512, 8, 4, 64, 128) if cuda else (100, 32, 2, 2, 4, 16)
    torch.manual_seed(0)
    model = Classifier(vocab, d, heads, depth, 10, always_mask=variant != "before").to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    compiled = not cpu_mode()

    def loss_fn(tokens, lengths, y):
        with autocast(device):
            out = model(tokens, lengths)
        return F.cross_entropy(out.float(), y)
    if compiled:
        torch._dynamo.reset()
        loss_fn = torch.compile(loss_fn, mode="reduce-overhead" if variant == "after_graph" else "default")
    g = torch.Generator().manual_seed(0)
    batches = []
    for _ in range(4):
        lengths = torch.randint(t // 4, t + 1, (batch,), generator=g)
        lengths[0] = t // 2                       # at least one padded sequence in every batch
        batches.append((torch.randint(0, vocab, (batch, t), generator=g).to(device), lengths.to(device),
                        torch.randint(0, 10, (batch,), generator=g).to(device)))
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        loss_fn(*batches[i % len(batches)]).backward()
        opt.step()

    def close():
        if compiled:
            torch._dynamo.reset()
    return Step(step, close=close, info={"batch": batch, "tokens": t, "width": d, "blocks": depth, "compiled": compiled,
                                         "mask": "always" if variant != "before" else "if pad.any()",
                                         "mode": "reduce-overhead" if variant == "after_graph" else "default"})
