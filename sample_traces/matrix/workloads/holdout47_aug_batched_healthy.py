"""holdout47_aug_batched_healthy: the conv net of holdout47_aug_loop_train with its batched GPU augmentation, at batch
1024: the GPU work per step several times the host's.

Forty-seventh held-out set (registered before it was recorded; see the matrix README). Expected healthy.
"""

from .holdout47_aug_loop_train import SIZE as TRAIN_SIZE
from .holdout47_aug_loop_train import make as make_train

NAME = "holdout47_aug_batched_healthy"
EXPECTED_KIND = "healthy"
ROLE = "healthy"
VARIANTS = ("before",)
FIX = None
SIZE = {**TRAIN_SIZE, "batch": 1024}
DESCRIPTION = {"before": ("ResNet-ish conv net (64/128 ch), batch 1024 of 3 x 32 x 32, bf16 autocast, channels_last, "
                          "fused SGD; the augmentation done on the whole batch on the GPU")}


def make(variant, device):
    return make_train("after", device, SIZE)
