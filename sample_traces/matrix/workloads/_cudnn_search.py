"""Shared by the fiftieth held-out set: cuDNN's algorithm search (torch.backends.cudnn.benchmark) meeting input
shapes that change from step to step. A wav2vec2-style audio classifier (raw waveform -> a conv feature extractor
-> a small transformer), the lengths it is fed, and the flag set for the step's lifetime and restored after."""

import random

import torch
import torch.nn.functional as F
from torch import nn

# wav2vec2's feature extractor: (kernel, stride) per Conv1d layer, 512 channels; total stride 320.
CONVS = ((10, 5), (3, 2), (3, 2), (3, 2), (3, 2), (2, 2), (2, 2))


class AudioClassifier(nn.Module):
    """conv2d: each Conv1d written as a Conv2d over (N, C, 1, L) in channels_last (cuDNN runs a Conv1d as a 2-D one in
    NCHW and transposes around it; the variant that tests whether writing it so removes them)."""

    def __init__(self, ch=512, dim=256, layers=2, heads=4, classes=35, convs=CONVS, conv2d=False):
        super().__init__()
        mods, cin = [], 1
        self.conv2d = conv2d
        for i, (k, s) in enumerate(convs):
            mods.append(nn.Conv2d(cin, ch, (1, k), (1, s), bias=False) if conv2d else nn.Conv1d(cin, ch, k, s, bias=False))
            # wav2vec2 ("group" norm mode): GroupNorm after the first conv only.
            mods.append(nn.GroupNorm(ch, ch) if i == 0 else nn.Identity())
            mods.append(nn.GELU())
            cin = ch
        self.features = nn.Sequential(*mods)
        self.proj = nn.Linear(ch, dim)
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(dim, classes)

    def forward(self, wav):                       # wav: (batch, samples)
        if self.conv2d:
            x = wav[:, None, None, :].contiguous(memory_format=torch.channels_last)
            h = self.features(x).squeeze(2)       # (batch, ch, frames)
        else:
            h = self.features(wav.unsqueeze(1))   # (batch, ch, frames)
        h = self.encoder(self.proj(h.transpose(1, 2)))
        return self.head(h.mean(1))


def lengths(lo, hi, n=4096, seed=0):
    """n padded batch lengths in samples, distinct, drawn from [lo, hi): a length-sorted sampler's batches, each
    padded to its longest clip, whose lengths are whatever the recordings were."""
    return random.Random(seed).sample(range(lo, hi), min(n, hi - lo))


class Waves:
    """Batch j: `batch` clips of random length between 90% and 100% of the padded length, zero-padded, and labels.
    Made on the GPU (the data path is not what this set tests)."""

    def __init__(self, batch, lens, device, classes=35):
        self.batch, self.lens, self.device, self.classes = batch, lens, device, classes
        self.g = torch.Generator(device=device).manual_seed(0)
        self.j = 0

    def __call__(self):
        n = self.lens[self.j % len(self.lens)]
        self.j += 1
        wav = torch.randn(self.batch, n, device=self.device, generator=self.g)
        keep = (torch.rand(self.batch, 1, device=self.device, generator=self.g) * 0.1 + 0.9) * n
        wav = wav * (torch.arange(n, device=self.device) < keep)
        y = torch.randint(0, self.classes, (self.batch,), device=self.device, generator=self.g)
        return wav, y


def benchmark_flag(on: bool):
    """Set torch.backends.cudnn.benchmark for a step's life; returns the function that restores it."""
    prev = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = on

    def restore():
        torch.backends.cudnn.benchmark = prev
    return restore


def train_step(model, opt, waves, autocast):
    def step():
        wav, y = waves()
        opt.zero_grad(set_to_none=True)
        with autocast:
            out = model(wav)
        F.cross_entropy(out.float(), y).backward()
        opt.step()
    return step
