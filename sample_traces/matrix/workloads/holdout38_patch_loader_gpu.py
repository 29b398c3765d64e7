"""holdout38_patch_loader_gpu: the host-bound loader of holdout38_patch_loader_host in front of a deeper fp32
patch MLP, where the fp32 GPU work is the step -> TF32, more workers, both.

Thirty-eighth held-out set (pre-registered 2026-12-01 before it was recorded): the same loader and model code, 8
MLP blocks instead of 1. The GPU's fp32 work outlasts the loader, so the loader's time hides behind it: TF32
should pay until the loader is the step; the workers alone should save ~nothing; both should save the most.
before:         num_workers=0, matmul precision "highest".
after:          set_float32_matmul_precision("high") (TF32); num_workers=0 kept.
after_workers:  DataLoader(num_workers=8, persistent_workers=True, pin_memory=True, prefetch_factor=4); "highest" kept.
after_both:     TF32 and 8 workers (the plan).
"""

from .holdout38_patch_loader_host import build, describe

NAME = "holdout38_patch_loader_gpu"
EXPECTED_KIND = "fp32_matmul"
ROLE = "pair"
VARIANTS = ("before", "after", "after_workers", "after_both")
FIX = 'torch.set_float32_matmul_precision("high") (TF32 tensor cores); model and data remain fp32'
SIZE = {"image": 160, "batch": 64, "d": 1024, "blocks": 8}
WARMUP_STEPS = 12
_D = describe(SIZE)
DESCRIPTION = {"before": _D["before"], "after": _D["after_tf32"], "after_workers": _D["after"],
               "after_both": _D["after_both"]}
# The host module's variant names, by this module's.
_AS = {"before": "before", "after": "after_tf32", "after_workers": "after", "after_both": "after_both"}


def make(variant, device):
    return build(_AS[variant], device, SIZE)
