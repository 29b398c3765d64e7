"""item_logging_large: item_logging with a GPU-heavier step (added after the H100 run; H200 only so far).

On the H100 machine item_logging (width 512, batch 64) was host-bound (GPU busy ~4%), so the
per-step loss.item() only cost the GPU tail (1.06x).  Here the MLP is 2048 wide at batch 4096,
so the GPU time per step is comparable to the host time and the per-step sync serialises them.
Same code as item_logging.py (after_graph too: no per-step .item(), the step in a CUDA graph; after_compile:
the per-step .item() kept, the model in torch.compile, added later to measure the fusion fix;
after_graph_only: the per-step .item() kept after a graph of the step, added 2026-11-26 18:00Z).
"""

from . import item_logging as base

NAME = "item_logging_large"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph", "after_compile", "after_graph_only")
WARMUP_STEPS = 8
D, BATCH = 2048, 4096
FIX = base.FIX
DESCRIPTION = {k: v.replace("MLP 512->512", f"MLP {D}->{D}").replace("batch 64", f"batch {BATCH}")
               for k, v in base.DESCRIPTION.items()}
SOURCE = "item_logging.py with width 2048, batch 4096"


def make(variant, device):
    return base.make(variant, device, d=D, batch=BATCH)
