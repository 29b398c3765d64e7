"""Waits for other ranks inside collective kernels, taken out of one rank's GPU timeline.

A collective kernel (NCCL) starts when its rank arrives and ends once every rank has arrived and the data
has moved, so on a rank that arrives early most of its duration is waiting: the GPU spins in the kernel,
busy in the trace, idle in substance. One rank's trace cannot tell that wait from the transfer; a job's
traces can (job/analysis.py lines the ranks' collectives up on one clock). Where they do, the kernel here
starts when the last rank arrived: the wait becomes an idle gap before it (attribution: collective_wait)
and the rank's own work is what the analyses read. Measured on two H200s (sample_traces/nccl, set 31):
the early rank of a job whose ranks were both host-bound had 40 ms of a 44 ms step in all-reduce
kernels, and its report called it communication-bound with the GPU busy 95% of the step.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .kernel_names import COLLECTIVE

MATCH_US = 0.5          # a collective's start in the job's table is the kernel's own ts, read from the same file


def take_out(gpu: pd.DataFrame, names: np.ndarray, uniques: list[str], starts: np.ndarray,
             waits: np.ndarray) -> tuple[pd.DataFrame, np.ndarray, float]:
    """(the GPU table with each matched collective kernel starting `wait` us later and a `peer_wait` column,
    its name codes in the table's new order, the wait taken out in all). `starts`: the kernels' ts on this
    table's clock."""
    if not len(starts) or not len(gpu):
        return gpu, names, 0.0
    pat = re.compile(COLLECTIVE, re.I)
    coll_name = np.array([bool(pat.search(n)) for n in uniques] + [False])
    coll = coll_name[np.minimum(names, len(uniques))]
    rows = np.flatnonzero(coll)
    ts = gpu["ts"].to_numpy()[rows]
    order = np.argsort(ts, kind="stable")
    rows, ts = rows[order], ts[order]
    k = np.clip(np.searchsorted(ts, starts), 0, max(len(ts) - 1, 0))
    best = np.where(np.abs(ts[np.maximum(k - 1, 0)] - starts) < np.abs(ts[k] - starts), np.maximum(k - 1, 0), k)
    hit = np.abs(ts[best] - starts) <= MATCH_US if len(ts) else np.zeros(len(starts), dtype=bool)
    if not hit.any():
        return gpu, names, 0.0
    target = rows[best[hit]]
    dur = gpu["dur"].to_numpy()
    # Keep the transfer: a wait is at most the kernel's duration (a clock error can say more).
    w = np.minimum(np.maximum(waits[hit], 0.0), dur[target])
    new_ts, new_dur = gpu["ts"].to_numpy().copy(), dur.copy()
    new_ts[target] += w
    new_dur[target] -= w
    # How long each kernel waited: the replay keeps it (estimate/replay.py), as no fix of this rank's own
    # work makes the other ranks arrive sooner.
    waited = np.zeros(len(gpu))
    waited[target] = w
    gpu = gpu.assign(ts=new_ts, dur=new_dur, peer_wait=waited)
    gpu["end"] = gpu["ts"] + gpu["dur"]
    # The table stays in (ts, dur) order, as the model builds it.
    perm = np.lexsort((gpu["dur"].to_numpy(), gpu["ts"].to_numpy()))
    return gpu.iloc[perm].reset_index(drop=True), names[perm], float(w.sum())
