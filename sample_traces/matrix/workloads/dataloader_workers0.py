"""dataloader_workers0: DataLoader(num_workers=0) with per-sample numpy augmentation.

Reuses sample_traces/workloads/host_preprocess.py (its dataset, model and both variants) at
batch 16 instead of 32, to keep the step short:
before: DataLoader(num_workers=0): per-sample numpy work on the main thread.
after:  DataLoader(num_workers=4, persistent_workers=True, pin_memory=True, prefetch_factor=4),
        non_blocking H2D copies.
"""

from workloads import host_preprocess as base

NAME = "dataloader_workers0"
EXPECTED_KIND = "host_bound"
ROLE = "pair"
VARIANTS = ("before", "after")
BATCH = 16
DESCRIPTION = {k: v.replace("batch 32", f"batch {BATCH}") for k, v in base.DESCRIPTION.items()}
FIX = base.FIX
SOURCE = "sample_traces/workloads/host_preprocess.py (batch=16)"
WARMUP_STEPS = 10


def make(variant, device):
    return base.make(variant, device, batch=BATCH)
