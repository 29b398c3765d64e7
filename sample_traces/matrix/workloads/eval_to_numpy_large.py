"""eval_to_numpy_large: eval_to_numpy at batch 8192 (added after the H100 run; H200 only so far).

On the H100 machine eval_to_numpy (batch 512) was host-bound (GPU busy ~10%), so removing the
per-batch .cpu().numpy() only saved the short GPU tail (1.02x).  At batch 8192 the GPU work per
batch is comparable to the host's launch time, which is where a per-batch sync costs the most.
Same code as eval_to_numpy.py, only the batch differs (after_graph_only too: the forward in a CUDA graph; after_pinned: pinned double buffers read a batch later).
"""

from . import eval_to_numpy as base

NAME = "eval_to_numpy_large"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph_only", "after_pinned")
BATCH = 8192
FIX = base.FIX
DESCRIPTION = {k: v.replace("batch 512", f"batch {BATCH}") for k, v in base.DESCRIPTION.items()}
SOURCE = "eval_to_numpy.py with batch=8192"


def make(variant, device):
    return base.make(variant, device, batch=BATCH)
