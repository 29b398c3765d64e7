"""holdout50_bucketed_audio_healthy: the same audio classifier with torch.backends.cudnn.benchmark=True, its batches
padded to one of four bucket lengths (2.5, 3, 3.5, 4 s): cuDNN searched each shape once, in the warm-up, and every
step after reuses what it found. Multi-shape input with the search on, and nothing to fix.

Fiftieth held-out set (registered before it was recorded; see the matrix README). Expected healthy. Model and
optimizer as holdout50_audio_benchmark_train's, batch 16; the warm-up steps visit the four buckets in turn, then the
bucket is drawn at random each step.
"""

import random

from ._cudnn_search import AudioClassifier, Waves, benchmark_flag, train_step
from ._util import Step, autocast, is_cuda

import torch

NAME = "holdout50_bucketed_audio_healthy"
EXPECTED_KIND = "healthy"
ROLE = "healthy"
# after_conv2d (added after the set was read, not scored: a healthy role's other variants are not pairs): each
# Conv1d written as a Conv2d over (N, C, 1, L) in channels_last, layout_permute's advice for cuDNN's transposes around
# 1-D convolutions, measured to see whether the 25% of GPU time the tool found there can be had.
VARIANTS = ("before", "after_conv2d")
FIX = None
DESCRIPTION = {"before": ("wav2vec2-style audio classifier (7 Conv1d of 512 ch, 2 transformer layers of 256), batch 16 "
                          "of raw audio padded to one of 4 bucket lengths (40000, 48000, 56000, 64000 samples; each "
                          "searched once in the warm-up), bf16 autocast, fused AdamW, cudnn.benchmark=True"),
               "after_conv2d": "same, each Conv1d a Conv2d over (N, C, 1, L) in channels_last"}
WARMUP_STEPS = 8
BUCKETS = (40000, 48000, 56000, 64000)


def make(variant, device, batch=16):
    cuda = is_cuda(device)
    buckets = BUCKETS if cuda else tuple(b // 10 for b in BUCKETS)
    if not cuda:
        batch = 2
    rng = random.Random(0)
    lens = list(buckets) + [rng.choice(buckets) for _ in range(4096)]
    restore = benchmark_flag(True)
    torch.manual_seed(0)
    c2 = variant == "after_conv2d"
    model = (AudioClassifier(conv2d=c2) if cuda else AudioClassifier(ch=16, dim=16, layers=1, heads=2, conv2d=c2)).to(device)
    if c2:
        model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    step = train_step(model, opt, Waves(batch, lens, device), autocast(device))
    return Step(step, close=restore, info={"batch": batch, "buckets": list(buckets), "amp": "bf16",
                                           "cudnn_benchmark": True})
