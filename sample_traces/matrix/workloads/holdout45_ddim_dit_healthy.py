"""holdout45_ddim_dit_healthy: a larger DiT, already under torch.compile (default mode), sampled with DDIM at batch 16:
GPU-bound, must be called healthy.

Forty-fifth held-out set (pre-registered 2026-12-04 before it was recorded; see holdout45_ddim_unet_compile, whose
sampler it shares, and holdout45_ddim_dit_compile, whose DiT it is). Model: the DiT at 8 blocks of width 768, 12 heads,
MLP 3072, 4 x 32 x 32 latents in 2 x 2 patches, bf16 weights, eval, inference_mode, under torch.compile (default mode:
Inductor's fused kernels, no CUDA graphs). Sampler: 10 DDIM steps, guidance scale 4, batch 16 images (32 per call).
The one variant is the compiled program: its recorded "before" is compiled (make_sampler's after).
"""

import torch

from ._util import is_cuda
from .holdout45_ddim_dit_compile import DiT
from .holdout45_ddim_unet_compile import make_sampler

NAME = "holdout45_ddim_dit_healthy"
EXPECTED_KIND = "healthy"
ROLE = "healthy"
VARIANTS = ("before",)
FIX = None
SIZE = {"depth": 8, "width": 768, "heads": 12, "patch": 2, "latent": 32, "batch": 16, "sampling_steps": 10,
        "guidance": 4.0}
DESCRIPTION = {"before": "hand-written DiT (8 x 768, 12 heads, patch 2, bf16) under torch.compile (default mode), "
                         "DDIM 10 steps with classifier-free guidance, batch 16 (32 per call), 4x32x32 latents"}
WARMUP_STEPS = 6      # (compiles in the first of them)


def make(variant, device):
    s = SIZE if is_cuda(device) else {**SIZE, "depth": 1, "width": 32, "heads": 2, "latent": 8, "batch": 1,
                                      "sampling_steps": 3}
    torch.manual_seed(0)
    net = DiT(s["depth"], s["width"], s["heads"], s["patch"], s["latent"])
    return make_sampler(net, s, "after", device, mode="default")
