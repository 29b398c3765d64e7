"""What-if fixes that take work the program did not ask for out of the steps: torch.compile compiling (recompile's
fix), cuDNN searching its algorithms (cudnn_benchmark's) and autograd's anomaly detection (anomaly_detection's): the
calls made in it go, with the GPU work they launched (autotuning's and the search's trial kernels, the NaN checks'),
and the host time of their own bucket of the graph's edges (graph.py; trace/unasked.py). And work the program asked for
but need not do each step (fixes.DropSpans): activation checkpointing's recomputation, which it did once already, and
tensors it builds on the host and copies every step; their calls and kernels go, and the CPU time inside their spans."""
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


def drop_spans(c: Compiled, s: State, fx: fixes.DropSpans, _bw: float) -> None:
    """The work inside the spans goes (a recomputed forward, a host-built tensor and its copy): the calls made there,
    the GPU work those launched, and the CPU time between the calls inside the spans (the ops' dispatch, the host
    ops that launch nothing)."""
    idx = c.cpu_idx[c.in_regions(c.cpu_idx, [(a, b, th) for th, a, b in fx.spans])]
    calls = np.zeros(len(c.nodes), dtype=bool)
    calls[idx] = True
    _drop_calls_and_work(c, s, calls)
    inside = c.span_share(fx.spans)
    inside[idx] = 1.0
    s.feed = s.feed * (1.0 - inside)
    s.host = s.host * (1.0 - inside)
