"""Shared by the fifty-third held-out set: constants a forward needs (a causal mask, rotary tables, a detection head's
grids) built on the host on every call and copied to the GPU (`torch.triu(torch.full(...))`, `torch.arange(...)`,
`.to(x.device)`), as research code often writes them, against the same tensors built once on the device."""

import torch
import torch.nn as nn
import torch.nn.functional as F


def causal_mask(t, device):
    """An additive causal mask, fp32 [t, t] (1 MB at 512): built on the CPU, then copied."""
    return torch.full((t, t), float("-inf")).triu(1).to(device)


def rotary_tables(t, head_dim, device):
    """cos and sin tables, fp32 [t, head_dim]: built on the CPU, then copied."""
    inv = 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim))
    f = torch.outer(torch.arange(t).float(), inv)
    f = torch.cat((f, f), -1)
    return f.cos().to(device), f.sin().to(device)


def rotate(x, cos, sin):
    x1, x2 = x.chunk(2, -1)
    return x * cos + torch.cat((-x2, x1), -1) * sin


class Block(nn.Module):
    """A pre-norm decoder block, rotary positions, an additive causal mask into SDPA. `host`: the mask and tables are
    built on the CPU and copied on every call; otherwise they are buffers made once on the device."""

    def __init__(self, dim, heads, seq, host):
        super().__init__()
        self.heads, self.host = heads, host
        self.n1, self.n2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.ff = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        if not host:
            cos, sin = rotary_tables(seq, dim // heads, "cpu")
            self.register_buffer("mask", causal_mask(seq, "cpu"), persistent=False)
            self.register_buffer("cos", cos, persistent=False)
            self.register_buffer("sin", sin, persistent=False)

    def consts(self, t, device):
        if self.host:
            return (causal_mask(t, device),) + rotary_tables(t, self.qkv.in_features // self.heads, device)
        return self.mask[:t, :t], self.cos[:t], self.sin[:t]

    def forward(self, x):
        b, t, d = x.shape
        mask, cos, sin = self.consts(t, x.device)
        q, k, v = self.qkv(self.n1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        q, k = rotate(q, cos, sin).to(v.dtype), rotate(k, cos, sin).to(v.dtype)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask.to(v.dtype))
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.ff(self.n2(x))


class LM(nn.Module):
    def __init__(self, vocab, dim, heads, layers, seq, host):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, seq, host) for _ in range(layers))
        self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab)

    def forward(self, tokens):
        x = self.emb(tokens)
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x))


def host_grid(nx, ny, anchors, stride, device):
    """A YOLO-style head's cell grid and anchor grid, fp32 [1, 3, ny, nx, 2] each: built on the CPU, then copied."""
    yv, xv = torch.meshgrid(torch.arange(ny), torch.arange(nx), indexing="ij")
    grid = torch.stack((xv, yv), 2).expand(1, len(anchors), ny, nx, 2).float()
    anchor_grid = (torch.tensor(anchors) * stride).view(1, len(anchors), 1, 1, 2).expand(1, len(anchors), ny, nx, 2)
    return grid.to(device), anchor_grid.float().to(device)


def conv(cin, cout, s):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, s, 1), nn.SiLU(), nn.Conv2d(cout, cout, 3, 1, 1), nn.SiLU())


class Detector(nn.Module):
    """A small conv backbone (strides 8, 16, 32) with a YOLO-v5-style head decoded in the forward. `host`: the grids
    are built on the CPU and copied on every call; otherwise made on the device once per feature-map size."""

    ANCHORS = (((10, 13), (16, 30), (33, 23)), ((30, 61), (62, 45), (59, 119)), ((116, 90), (156, 198), (373, 326)))
    STRIDES = (8, 16, 32)

    def __init__(self, classes, host):
        super().__init__()
        self.no, self.host, self.cache = classes + 5, host, {}
        self.stem = nn.Sequential(conv(3, 32, 2), conv(32, 64, 2))
        self.levels = nn.ModuleList((conv(64, 64, 2), conv(64, 128, 2), conv(128, 256, 2)))
        self.heads = nn.ModuleList(nn.Conv2d(c, 3 * self.no, 1) for c in (64, 128, 256))

    def grids(self, i, nx, ny, device):
        a = [tuple(p / self.STRIDES[i] for p in pair) for pair in self.ANCHORS[i]]
        if self.host:
            return host_grid(nx, ny, a, self.STRIDES[i], device)
        key = (i, nx, ny)
        if key not in self.cache:
            self.cache[key] = host_grid(nx, ny, a, self.STRIDES[i], device)
        return self.cache[key]

    def forward(self, img):
        x, out = self.stem(img), []
        for i, (level, head) in enumerate(zip(self.levels, self.heads)):
            x = level(x)
            p = head(x)
            b, _, ny, nx = p.shape
            y = p.view(b, 3, self.no, ny, nx).permute(0, 1, 3, 4, 2).float().sigmoid()
            grid, anchor_grid = self.grids(i, nx, ny, p.device)
            xy = (y[..., :2] * 2 - 0.5 + grid) * self.STRIDES[i]
            wh = (y[..., 2:4] * 2) ** 2 * anchor_grid
            out.append(torch.cat((xy, wh, y[..., 4:]), -1).view(b, -1, self.no))
        return torch.cat(out, 1)


