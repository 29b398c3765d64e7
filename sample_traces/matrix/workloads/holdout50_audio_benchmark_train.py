"""holdout50_audio_benchmark_train: a wav2vec2-style audio classifier trained on raw waveforms with
torch.backends.cudnn.benchmark=True, each batch padded to its own length (2.5-3.5 s at 16 kHz, any sample count):
cuDNN searches its convolution algorithms again for every new shape, every step -> benchmark off.

Fiftieth held-out set (registered before it was recorded; see the matrix README). Model: wav2vec2's conv feature
extractor (7 Conv1d layers of 512 channels, kernels 10,3,3,3,3,2,2, strides 5,2,2,2,2,2,2, GroupNorm after the
first, GELU), a linear projection to 256, 2 pre-norm transformer encoder layers (4 heads), mean-pooled, 35 classes;
bf16 autocast, fused AdamW; batch 16. The padded lengths are distinct draws from [40000, 56000) samples, the same
distribution in both variants; the first layers meet a shape not seen before on every step (the deepest, stride 320,
sometimes repeat one). The variants draw alternate lengths of one seeded permutation (before the even places, after the
odd ones), so that the after variant, run in the same process, meets no length whose plans the before variant's
search left in cuDNN's cache (as first registered both drew the same lengths, and the after variant's measured steps
reused the before variant's cached plans: matrix README, fiftieth set).
before: torch.backends.cudnn.benchmark = True.
after:  torch.backends.cudnn.benchmark = False (cuDNN's heuristics pick each algorithm; nothing is timed).
"""

import torch

from ._cudnn_search import AudioClassifier, Waves, benchmark_flag, lengths, train_step
from ._util import Step, autocast, is_cuda

NAME = "holdout50_audio_benchmark_train"
EXPECTED_KIND = "cudnn_benchmark"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = ("torch.backends.cudnn.benchmark = False: cuDNN's algorithm search no longer runs for every new input length "
       "(the lengths change every step)")
DESCRIPTION = {
    "before": ("wav2vec2-style audio classifier (7 Conv1d of 512 ch, 2 transformer layers of 256), batch 16 of raw "
               "audio padded to each batch's length (40000-56000 samples, a new length every step), bf16 autocast, "
               "fused AdamW, torch.backends.cudnn.benchmark=True"),
    "after": "same, torch.backends.cudnn.benchmark=False",
}
WARMUP_STEPS = 8


def make(variant, device, batch=16):
    cuda = is_cuda(device)
    lo, hi = (40000, 56000) if cuda else (3200, 4800)
    if not cuda:
        batch = 2
    restore = benchmark_flag(variant == "before")
    torch.manual_seed(0)
    model = AudioClassifier().to(device) if cuda else AudioClassifier(ch=16, dim=16, layers=1, heads=2).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    step = train_step(model, opt, Waves(batch, lengths(lo, hi)[int(variant != "before")::2], device), autocast(device))
    return Step(step, close=restore, info={"batch": batch, "samples": [lo, hi], "amp": "bf16",
                                           "cudnn_benchmark": variant == "before"})
