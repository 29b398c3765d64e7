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

import re

import numpy as np
import pandas as pd

from ..host import HostActivity
from ..model import TraceModel

CAUSES = ("launch_overhead", "host_bound", "sync_stall", "pageable_memcpy", "collective_wait",
          "dependency_wait", "unattributed")
BLOCK_TOL_US = 50.0


COLLECTIVE = r"nccl|rccl|AllReduce|AllGather|ReduceScatter|all_reduce|all_gather"


def is_collective(model: TraceModel) -> np.ndarray:
    """Boolean per gpu row: a collective (NCCL / RCCL) kernel."""
    return model.gpu_match(COLLECTIVE, re.I)


def launch_latency_us(model: TraceModel) -> float:
    """Typical launch call -> GPU start delay, from activities whose stream was idle at launch.

    Queued work (stream still busy with anything, linked or not) says nothing about launch latency.
    Bounded to [20, 100] us: beyond that a delay is a dependency, not the cost of a launch.
    """
    return model.memo("launch_latency_us", lambda: _launch_latency_us(model))


def _launch_latency_us(model: TraceModel) -> float:
    g = model.gpu
    if g.empty:
        return 20.0
    prev_end = g.sort_values("ts", kind="stable").groupby(["device", "stream"])["end"].shift(1)
    prev_end = prev_end.reindex(g.index).to_numpy()
    linked = g["launcher"].to_numpy() >= 0
    lt = np.where(linked, model.cpu["ts"].to_numpy()[np.maximum(g["launcher"].to_numpy(), 0)], np.nan)
    delay = g["ts"].to_numpy() - lt
    idle = linked & (prev_end < lt) & (delay >= 0)
    med = float(np.median(delay[idle])) if idle.any() else 10.0
    return float(min(100.0, max(20.0, 2.0 * med)))


def blocking_calls(model: TraceModel) -> pd.DataFrame:
    """Runtime calls that block the CPU until GPU work finishes, with what kind of block it was.

    Attribution, sync_stall and the graph all read it: computed once per model, treat as read-only.
    """
    return model.memo("blocking_calls", lambda: _blocking_calls(model))


def _blocking_calls(model: TraceModel) -> pd.DataFrame:
    cpu, gpu = model.cpu, model.gpu
    rt = cpu[cpu["kind"] == "runtime"]
    kind = pd.Series("", index=rt.index, dtype=object)
    kind[rt["rkind"] == "sync"] = "sync"
    # Copies: what the correlated GPU memcpy says about direction and host memory.
    copies = gpu[(gpu["kind"] == "memcpy") & (gpu["launcher"] >= 0)]
    by_launcher = copies.drop_duplicates("launcher").set_index("launcher")
    mc = rt[rt["rkind"] == "memcpy"]
    if len(mc):
        d = by_launcher.reindex(mc.index)
        dtoh = (d["copy_dir"] == "DtoH").to_numpy()
        pageable = d["pageable"].fillna(False).to_numpy().astype(bool)
        plain = ~mc["name"].str.contains("Async").to_numpy()  # cudaMemcpy: synchronous by definition
        # A device-to-host copy waits for the GPU queue whatever the host memory: that is a sync
        # (.item(), .cpu()). Host-to-device pageable copies block while staging: pageable_memcpy.
        k = np.where(dtoh | plain, "copy_sync", np.where(pageable, "pageable", ""))
        kind[mc.index] = k
    out = rt.loc[kind[kind != ""].index, ["thread", "ts", "end", "name", "parent"]].copy()
    out["block_kind"] = kind[kind != ""]
    return out.sort_values("end")


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
