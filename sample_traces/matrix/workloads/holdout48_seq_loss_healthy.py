"""holdout48_seq_loss_healthy: the transformer tagger of holdout48_per_seq_loss_train with its batched loss, wider and
deeper (4 x 512, 8 heads) at batch 128 x 128: the GPU work per step several times the host's.

Forty-eighth held-out set (registered before it was recorded; see the matrix README). Expected healthy.
"""

from .holdout48_per_seq_loss_train import SIZE as TRAIN_SIZE
from .holdout48_per_seq_loss_train import make as make_train

NAME = "holdout48_seq_loss_healthy"
EXPECTED_KIND = "healthy"
ROLE = "healthy"
VARIANTS = ("before",)
FIX = None
SIZE = {**TRAIN_SIZE, "batch": 128, "dim": 512, "heads": 8, "layers": 4}
DESCRIPTION = {"before": ("transformer tagger (4 x 512, 8 heads, vocabulary 4000), batch 128 x 128, bf16 autocast, "
                          "fused AdamW; the loss taken once over the padded batch")}


def make(variant, device):
    return make_train("after", device, SIZE)
