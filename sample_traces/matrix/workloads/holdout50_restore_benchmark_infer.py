"""holdout50_restore_benchmark_infer: a fully convolutional image-restoration net (DnCNN-style) denoising photos one
at a time at their own size, with torch.backends.cudnn.benchmark=True (as restoration toolkits' test scripts set
it): every photo's size is new, so cuDNN searches its convolution algorithms again on every call -> benchmark off.

Fiftieth held-out set (registered before it was recorded; see the matrix README). Model: DnCNN (17 3x3 convolutions
of 64 channels, padding 1, BatchNorm and ReLU between, the input minus the predicted noise), eval mode, bf16 autocast,
channels_last, under torch.inference_mode; batch 1; height and width each any integer in [384, 512), a distinct pair
per call; the variants draw alternate pairs of one seeded permutation (before the even places, after the odd ones),
so that the after variant, run in the same process, meets no size whose plans cuDNN cached during the before
variant (as first registered both drew the same sizes). The denoised image stays on the GPU (clamped and summed into a running
checksum, no copy to the host).
before: torch.backends.cudnn.benchmark = True.
after:  torch.backends.cudnn.benchmark = False.
"""

import random

import torch
from torch import nn

from ._cudnn_search import benchmark_flag
from ._util import Step, autocast, is_cuda

NAME = "holdout50_restore_benchmark_infer"
EXPECTED_KIND = "cudnn_benchmark"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = ("torch.backends.cudnn.benchmark = False: cuDNN's algorithm search no longer runs for every new image size "
       "(each call's size is new)")
DESCRIPTION = {
    "before": ("DnCNN denoiser (17 3x3 convs of 64 ch, BatchNorm, ReLU), eval, bf16 autocast, channels_last, "
               "inference_mode, batch 1 at a new size every call (H, W any in 384-511), "
               "torch.backends.cudnn.benchmark=True"),
    "after": "same, torch.backends.cudnn.benchmark=False",
}
WARMUP_STEPS = 8


class DnCNN(nn.Module):
    def __init__(self, depth=17, ch=64, cin=3):
        super().__init__()
        mods = [nn.Conv2d(cin, ch, 3, padding=1), nn.ReLU(inplace=True)]
        for _ in range(depth - 2):
            mods += [nn.Conv2d(ch, ch, 3, padding=1, bias=False), nn.BatchNorm2d(ch), nn.ReLU(inplace=True)]
        mods.append(nn.Conv2d(ch, cin, 3, padding=1))
        self.body = nn.Sequential(*mods)

    def forward(self, x):
        return x - self.body(x)


def sizes(lo, hi, n=4096, seed=0):
    """n distinct (height, width) pairs in [lo, hi)."""
    span = hi - lo
    return [(lo + k // span, lo + k % span) for k in random.Random(seed).sample(range(span * span), min(n, span * span))]


def make(variant, device):
    cuda = is_cuda(device)
    lo, hi = (384, 512) if cuda else (24, 40)
    restore = benchmark_flag(variant == "before")
    torch.manual_seed(0)
    model = (DnCNN() if cuda else DnCNN(depth=4, ch=8)).to(device).eval().to(memory_format=torch.channels_last)
    hw = sizes(lo, hi)[int(variant != "before")::2]
    g = torch.Generator(device=device).manual_seed(0)
    state = {"j": 0, "sum": torch.zeros((), device=device)}

    def step():
        h, w = hw[state["j"] % len(hw)]
        state["j"] += 1
        with torch.inference_mode():
            x = torch.rand(1, 3, h, w, device=device, generator=g).contiguous(memory_format=torch.channels_last)
            with autocast(device):
                y = model(x)
            state["sum"] += y.float().clamp_(0, 1).sum()
    return Step(step, close=restore, info={"batch": 1, "hw_range": [lo, hi], "amp": "bf16",
                                           "memory_format": "channels_last", "cudnn_benchmark": variant == "before"})
