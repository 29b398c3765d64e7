"""holdout46_moe_capacity_healthy: the fixed-capacity MoE transformer of holdout46_moe_loop_train at a size where
the GPU is busy (healthy role).

Forty-sixth held-out set (registered before it was recorded; see the matrix README). Model as
holdout46_moe_loop_train's fixed variant at 4 x 1024 (16 heads, 8 experts top-2, hidden 4096), batch 16 x 512,
bf16 autocast, fused AdamW. No sync in the step.
"""

from .holdout46_moe_loop_train import SIZE as TRAIN_SIZE
from .holdout46_moe_loop_train import make as make_train

NAME = "holdout46_moe_capacity_healthy"
EXPECTED_KIND = "healthy"
ROLE = "healthy"
VARIANTS = ("before",)
SIZE = {**TRAIN_SIZE, "width": 1024, "heads": 16, "hidden": 4096, "batch": 16, "seq": 512}
DESCRIPTION = {"before": ("MoE transformer (4 x 1024, 16 heads, 8 experts top-2, hidden 4096), fixed-capacity "
                          "dispatch, batch 16 x 512, bf16 autocast, fused AdamW (healthy role)")}


def make(variant, device):
    return make_train("after", device, SIZE)
