"""What-if fixes that take work the program did not ask for out of the steps: torch.compile compiling (recompile's
fix), cuDNN searching its algorithms (cudnn_benchmark's) and autograd's anomaly detection (anomaly_detection's): the
calls made in it go, with the GPU work they launched (autotuning's and the search's trial kernels, the NaN checks'),
and the host time of their own bucket of the graph's edges (graph.py; trace/unasked.py)."""
from __future__ import annotations

import numpy as np

from ..analyses import fixes
from .compiled import Compiled
from .state import State


def no_compiles(c: Compiled, s: State, _fx: fixes.NoCompiles, _bw: float) -> None:
    """The compiler's CPU time goes, with the calls it made (autotuning's launches and syncs) and their GPU work."""
    s.unasked["compile"].fill(0.0)
    calls = _drop_calls_and_work(c, s, c.made_in["compile"])
    s.feed[calls] = s.host[calls] = 0.0


def _drop_calls_and_work(c: Compiled, s: State, calls: np.ndarray) -> np.ndarray:
    """These calls (a mask) are no longer made, nor is the GPU work they launched; their positions."""
    idx = np.flatnonzero(calls)
    s.dur[idx] = 0.0
    # (a copy to the host among them no longer waits for its stream either: the NaN checks' answers)
    s.unblocked[idx] = True
    for i in idx:
        s.syncs[i] = []
    g = c.gpu_idx[(c.lpred[c.gpu_idx] >= 0) & calls[np.maximum(c.lpred[c.gpu_idx], 0)]]
    s.dur[g] = s.min_gap[g] = 0.0
    return idx


def no_search(c: Compiled, s: State, fx: fixes.NoSearch, _bw: float) -> None:
    """cuDNN no longer searches: its trials' calls and GPU work go, and `keep` of its host time stays (NoSearch)."""
    s.unasked["search"] = s.unasked["search"] * fx.keep
    _drop_calls_and_work(c, s, c.made_in["search"])


def no_anomaly(c: Compiled, s: State, _fx: fixes.NoAnomaly, _bw: float) -> None:
    """Anomaly detection off: the NaN checks' calls, kernels and syncs go, and the stacks' host time with them."""
    s.unasked["anomaly"].fill(0.0)
    _drop_calls_and_work(c, s, c.made_in["anomaly"])
