"""Shared by the fifty-fourth held-out set: GEMM dimensions that are not a multiple of 8 (a vocabulary of 50257, 429
concatenated features). A bf16 matrix whose contiguous dimension is odd cannot be read or written 16 bytes at a time,
so cuBLAS runs the product with narrower-aligned kernels; padding the dimension (the vocabulary to 50304 as nanoGPT
does, the features with zero columns) lets it take the aligned ones. Odd dimensions that are nobody's contiguous
dimension (the token count of an odd batch of a prime sequence length) cost nothing."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    """A pre-norm GPT block: causal SDPA, a 4x GELU MLP."""

    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.n1, self.n2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc, self.out = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.n1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.n2(x))))


class GPT(nn.Module):
    """A GPT-2-style LM, the head tied to the token embedding ([vocab, dim])."""

    def __init__(self, vocab, dim, heads, layers, seq):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(seq, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)

    def forward(self, tokens):
        x = self.tok(tokens) + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
        for blk in self.blocks:
            x = blk(x)
        return F.linear(self.norm(x), self.tok.weight)


def lm_step(model, opt, pool, device, autocast):
    """One training step over batches (tokens, targets) already on the device, taken in turn."""
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        x, y = pool[i % len(pool)]
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            logits = model(x)
        F.cross_entropy(logits.float().flatten(0, 1), y.flatten()).backward()
        opt.step()
    return step


class Tabular(nn.Module):
    """A DLRM-style click model: 26 categorical fields of 16 dims from one table (per-field offsets) concatenated with
    the dense columns, then an MLP. `dense_in` is 13 (429 features in all) or 16 (13 and three zero columns: 432)."""

    def __init__(self, fields, rows, emb_dim, dense_in, hidden, mid):
        super().__init__()
        self.emb = nn.Embedding(fields * rows, emb_dim)
        self.register_buffer("offsets", torch.arange(fields) * rows, persistent=False)
        self.mlp = nn.Sequential(nn.Linear(fields * emb_dim + dense_in, hidden), nn.ReLU(),
                                 nn.Linear(hidden, mid), nn.ReLU(), nn.Linear(mid, 1))

    def forward(self, cats, dense):
        return self.mlp(torch.cat((self.emb(cats + self.offsets).flatten(1), dense), 1)).squeeze(1)
