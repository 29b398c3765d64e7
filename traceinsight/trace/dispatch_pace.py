"""How fast the host runs PyTorch's own dispatch: the median time of ops that only make a view or a new
tensor header (aten::view, as_strided, t, ...), which do the same tiny work on any program and any GPU.

On our own H100 and H200 recordings their median is 0.3-2.5 us without Python stacks and up to 6.3 us with
them (sample_traces/matrix, 2026-12-02). HTA's DDP trace reads 27.7 us over 3,738 of them (aten::view 22.6 us):
a host that runs every op 10-20 times slower than usual, a contended or throttled CPU. Its CPU-side idle and the
profiler's cost, fitted on normal hosts, then say more about the machine than about the program.
"""
from __future__ import annotations

import numpy as np

from .model import TraceModel

METADATA_OPS = r"^aten::(view|_unsafe_view|as_strided|t|transpose|detach|expand|slice|select|narrow|alias|" \
               r"unsqueeze|squeeze|permute|_reshape_alias|resolve_conj|resolve_neg)$"
SLOW_US = 12.0        # twice the slowest median of our recordings, with stacks
MIN_OPS = 200         # enough of them for a median that says something about the host


def metadata_op_us(model: TraceModel) -> tuple[float, int] | None:
    """(median us, how many) of the trace's metadata-only ops; None without any."""
    cpu = model.cpu
    hit = model.cpu_match(METADATA_OPS) & (cpu["kind"] == "op").to_numpy()
    if not hit.any():
        return None
    return float(np.median(cpu["dur"].to_numpy()[hit])), int(hit.sum())


def slow_dispatch(model: TraceModel) -> tuple[float, int] | None:
    """metadata_op_us() where it says the host runs ops far slower than a normal one does, else None."""
    got = metadata_op_us(model)
    return got if got and got[1] >= MIN_OPS and got[0] >= SLOW_US else None
