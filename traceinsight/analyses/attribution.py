"""Attribute every GPU idle gap to a cause. Vectorised: a launch-bound trace has a gap per kernel.

For each gap we look at the GPU activity that ended it and the runtime call that launched that
activity (the launch edge of the graph):

  * launched before the GPU went idle, started only after `lat` -> the GPU waited on something else:
    a collective (NCCL kernel) -> collective_wait, otherwise a cross-stream dependency -> dependency_wait.
    Launched just in time (within the launch latency) -> launch_overhead.
  * launched after the GPU went idle -> the CPU was late. If the launching thread had just come out of a
    blocking call (stream/device/event sync, device-to-host copy) that returned after the GPU drained, the
    sync edge explains the gap: sync_stall (pageable_memcpy when the blocking call was a pageable copy).
    Otherwise the stretch [gap start, launch] is split by what the thread was doing: host work that
    launches nothing -> host_bound, feeding the GPU (dispatch, Python between launches) -> launch_overhead.
    The launch latency itself (launch call to kernel start) is launch_overhead too.
  * no CPU launch in the trace (CUDA-graph replay, another process) -> unattributed, or collective_wait
    for NCCL kernels.
"""
from __future__ import annotations


import numpy as np
import pandas as pd

from .base import KindSpec
from ..trace.facts import BLOCK_TOL_US, blocking_calls, is_collective, launch_latency_us
from ..trace.host import HostActivity
from ..trace.model import TraceModel

# Idle causes that are no finding kind of their own (yet): their specs live here.
CAUSE_ONLY = (
    KindSpec("dependency_wait", "waiting on dependencies", idle_cause=True, color="#5b7fd6", estimate="measured"),
    KindSpec("unattributed", "idle for reasons the trace does not show", idle_cause=True, color="#9a9a9a",
             estimate="measured"),
)
# Every idle cause, in the order reports show them.
CAUSES = ("launch_overhead", "host_bound", "sync_stall", "pageable_memcpy", "collective_wait",
          "dependency_wait", "unattributed")
def attribute_gaps(model: TraceModel, host: HostActivity) -> pd.DataFrame:
    gaps = model.gaps.copy()
    for c in CAUSES:
        gaps[c] = 0.0
    gaps["blocker"] = -1
    gaps["thread"] = ""
    gaps["launch_ts"] = np.nan
    if gaps.empty:
        return gaps
    cpu, gpu = model.cpu, model.gpu
    lat = launch_latency_us(model)
    s = gaps["start"].to_numpy()
    e = gaps["end"].to_numpy()
    dur = e - s
    nxt = gaps["next_gpu"].to_numpy()
    has_next = nxt >= 0
    nxt_safe = np.where(has_next, nxt, 0)
    launcher = np.where(has_next, gpu["launcher"].to_numpy()[nxt_safe], -1)
    coll = np.zeros(len(gaps), dtype=bool)
    if len(gpu):
        coll = has_next & is_collective(model)[nxt_safe]
    linked = launcher >= 0
    lsafe = np.where(linked, launcher, 0)
    lt = np.where(linked, cpu["ts"].to_numpy()[lsafe], np.nan)
    thread = np.where(linked, cpu["thread"].to_numpy()[lsafe], "")
    gaps["thread"] = thread
    gaps["launch_ts"] = lt

    res = {c: np.zeros(len(gaps)) for c in CAUSES}
    # 1. No launch in the trace.
    unl = ~linked
    res["collective_wait"][unl & coll] = dur[unl & coll]
    res["unattributed"][unl & ~coll] = dur[unl & ~coll]
    # 2. Issued before the GPU went idle.
    early = linked & (lt <= s)
    just_in_time = early & ((e - lt) <= lat)
    res["launch_overhead"][just_in_time] = dur[just_in_time]
    waited = early & ~just_in_time
    res["collective_wait"][waited & coll] = dur[waited & coll]
    res["dependency_wait"][waited & ~coll] = dur[waited & ~coll]
    # 3. Issued after: was the thread just released by a blocking call?
    late = linked & (lt > s)
    blocker = np.full(len(gaps), -1, dtype=np.int64)
    blocks = blocking_calls(model)
    for th in np.unique(thread[late]):
        sel = np.flatnonzero(late & (thread == th))
        b = blocks[blocks["thread"] == th]
        if b.empty:
            continue
        b_end = b["end"].to_numpy()
        k = np.searchsorted(b_end, lt[sel], side="right") - 1
        ok = k >= 0
        kk = np.maximum(k, 0)
        ok &= b_end[kk] >= s[sel] - BLOCK_TOL_US
        blocker[sel[ok]] = b.index.to_numpy()[kk[ok]]
    gaps["blocker"] = blocker
    blocked = late & (blocker >= 0)
    if blocked.any():
        bk = blocks["block_kind"].reindex(blocker[blocked]).to_numpy()
        idx = np.flatnonzero(blocked)
        pg = idx[bk == "pageable"]
        sy = idx[bk != "pageable"]
        res["pageable_memcpy"][pg] = dur[pg]
        res["sync_stall"][sy] = dur[sy]
    # 4. Issued after, nothing blocked: host work vs feeding the GPU.
    free = np.flatnonzero(late & (blocker < 0))
    if len(free):
        host_us = np.zeros(len(free))
        for th in np.unique(thread[free]):
            m = thread[free] == th
            rows = free[m]
            host_us[m] = host.host_time(th, s[rows], np.minimum(lt[rows], e[rows]))
        host_us = np.minimum(host_us, dur[free])
        res["host_bound"][free] = host_us
        res["launch_overhead"][free] = dur[free] - host_us
    for c in CAUSES:
        gaps[c] = res[c]
    return gaps


def per_step_causes(model: TraceModel, gaps: pd.DataFrame) -> pd.DataFrame:
    """Idle time per step and cause (us), averaged over devices so it adds up to the step's idle."""
    steps = model.steps[["step"]].copy()
    ndev = max(1, int(model.steps["n_devices"].iloc[0])) if len(model.steps) else 1
    if gaps.empty:
        for c in CAUSES:
            steps[c] = 0.0
        return steps.set_index("step")
    sums = gaps.groupby("step")[list(CAUSES)].sum() / ndev
    return steps.set_index("step").join(sums).fillna(0.0)
