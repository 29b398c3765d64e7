"""How the what-if replay (replay.py) applies a compiler's fixes: pointwise chains fused into one kernel each
(fixes.FuseChains), and an eager model's dispatch replaced by torch.compile's generated code (fixes.CompiledDispatch)."""
from __future__ import annotations

import numpy as np

from ..analyses import fixes
from .compiled import Compiled
from .state import GRAPH_KEEPS_BARE_US, State


def fuse_chains(c: Compiled, s: State, fx: fixes.FuseChains, _bw: float) -> None:
    pos = c.gpu_pos
    for k, chain in enumerate(fx.chains):
        idx = [pos[r] for r in chain if r in pos]
        if len(idx) < 2:
            continue
        fused = fx.fused_us(k, float(c.dur[idx].sum()), float(c.dur[idx].mean()))
        s.dur[idx[0]] = fused
        for i in idx[1:]:
            s.dur[i] = 0.0
            s.min_gap[i] = 0.0
            if c.lpred[i] >= 0:         # one kernel: the other ops' dispatch and launches go too,
                s.dur[c.lpred[i]] = 0.0   # and the Python between them, which the compiler traced away
                s.feed[c.lpred[i]] = 0.0
                s.host[c.lpred[i]] = 0.0


def compiled_dispatch(c: Compiled, s: State, fx: fixes.CompiledDispatch, _bw: float) -> None:
    # The model's Python and each op's dispatch go, spread over its launches: each costs `ratio` times the eager
    # CPU per launch, with its call (FuseChains, after this, takes the fused ones away). What a compiler cannot take
    # stays: host work that launches nothing, long bare Python (as a graph keeps it, GRAPH_KEEPS_BARE_US), calls'
    # own time but a launch's, and the eager regions.
    cpu = c.cpu_idx[~c.in_regions(c.cpu_idx, fx.eager)]
    launch = c.is_launch[cpu] & (s.dur[cpu] > 0)
    if not launch.any():
        return
    keep = np.where(c.bare[cpu] >= GRAPH_KEEPS_BARE_US, c.bare[cpu], 0.0)
    spent = float((np.maximum(0.0, s.feed[cpu] - keep)).sum() + s.dur[cpu][launch].sum())
    per = fx.ratio * spent / int(launch.sum())
    s.feed[cpu] = np.where(launch, keep + np.maximum(0.0, per - s.dur[cpu]), np.minimum(s.feed[cpu], keep))
    s.dur[cpu] = np.where(launch, np.minimum(s.dur[cpu], per), s.dur[cpu])
    for i in c.first_gpu_of_step:
        if c.lpred[i] >= 0:
            s.feed[c.lpred[i]] += fx.wrapper_us
