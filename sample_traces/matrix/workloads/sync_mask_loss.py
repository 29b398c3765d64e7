"""sync_mask_loss: the existing sample workload ``workloads/sync_mask_loss.py``, reused unchanged.

See sample_traces/workloads/sync_mask_loss.py for what before/after do.
"""

from workloads import sync_mask_loss as base

NAME = "sync_mask_loss"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = tuple(base.VARIANTS)
DESCRIPTION = dict(base.DESCRIPTION)
FIX = base.FIX
SOURCE = "sample_traces/workloads/sync_mask_loss.py"
WARMUP_STEPS = getattr(base, "WARMUP_STEPS", 5)


def make(variant, device):
    return base.make(variant, device)
