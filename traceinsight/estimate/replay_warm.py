"""How the what-if replay (replay.py) warms the CPU work a fix leaves, and applies a loop over a batch's items done on
the whole batch (fixes.BatchItems), which warms it the same way."""
from __future__ import annotations

import numpy as np

from ..analyses import fixes
from .compiled import Compiled
from .state import State


def graph_warm(cpu: np.ndarray, s: State, cold: float) -> float:
    """Scales the CPU work a graph leaves by how warm it runs (see fixes.py, below WARM_CPU); returns it."""
    if cold <= 0:
        return 1.0
    warm = fixes.toward(fixes.WARM_CPU, max(0.0, 1.0 - float(s.feed[cpu].sum() + s.dur[cpu].sum()) / cold))
    s.feed[cpu] = s.feed[cpu] * warm
    s.dur[cpu] = s.dur[cpu] * warm
    return warm


def batch_items(c: Compiled, s: State, fx: fixes.BatchItems, _bw: float) -> None:
    # The turns' CPU time goes (their calls and the stretches before them inside the spans); their kernels keep
    # only their work share of what they do past a kernel's fixed cost, which the batched kernels pay once. The CPU work left runs warm
    # as a graph's does, by the share taken off (the forty-seventh set's fixed steps: the same model's ops, forward
    # and autograd's backward, ran 1.1-2x faster without the loop's hundreds of ops between them).
    cold = float(s.feed[c.cpu_idx].sum() + s.dur[c.cpu_idx].sum())
    idx = c.cpu_positions(fx.calls)
    s.dur[idx] = 0.0
    inside = c.span_share(fx.spans)
    inside[idx] = 1.0
    # (the turns' Python outside any op, the per-item offsets and appends, goes with them)
    s.feed = s.feed * (1.0 - inside)
    s.host = s.host * (1.0 - inside)
    pos = [(i, w) for i, w in ((c.gpu_pos.get(r), w) for r, w in zip(fx.kernels, fx.work)) if i is not None]
    if pos:
        gpu = np.array([i for i, _w in pos], dtype=np.int64)
        s.dur[gpu] = np.maximum(0.0, c.dur[gpu] - fixes.KERNEL_FIXED_US) * np.array([w for _i, w in pos])
        s.min_gap[gpu] = 0.0
    graph_warm(c.cpu_idx, s, cold)
