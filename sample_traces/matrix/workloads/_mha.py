"""Shared by the fifty-sixth held-out set: nn.MultiheadAttention asked for its attention weights. Called as
attn(x, x, x), the module returns (output, weights) with need_weights=True by default: to hand back the [T, S] weights,
averaged over heads, F.multi_head_attention_forward writes the attention out (bmm or baddbmm for q @ k^T, softmax,
bmm with v, then the weights' mean over heads), where need_weights=False calls F.scaled_dot_product_attention, one
fused kernel that keeps the scores on chip. Most callers drop the weights (`out, _ = attn(x, x, x)`). The fix in
every pair: need_weights=False; nothing else."""

import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    """A pre-norm encoder block around nn.MultiheadAttention (batch_first), GELU MLP of 4x the width."""

    def __init__(self, d, heads, need_weights):
        super().__init__()
        self.need_weights = need_weights
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x, key_padding_mask=None):
        h = self.n1(x)
        if self.need_weights:       # the module's default: the call as most code writes it
            a, _ = self.attn(h, h, h, key_padding_mask=key_padding_mask)
        else:
            a, _ = self.attn(h, h, h, key_padding_mask=key_padding_mask, need_weights=False)
        x = x + a
        return x + self.down(F.gelu(self.up(self.n2(x))))


class Encoder(nn.Module):
    def __init__(self, d, heads, layers, need_weights):
        super().__init__()
        self.blocks = nn.ModuleList(Block(d, heads, need_weights) for _ in range(layers))
        self.norm = nn.LayerNorm(d)

    def forward(self, x, key_padding_mask=None):
        for b in self.blocks:
            x = b(x, key_padding_mask)
        return self.norm(x)
