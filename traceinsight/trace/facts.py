"""Derived facts about a trace that several layers read: which calls block the CPU on the GPU,
the typical launch latency, which kernels are collectives. Computed once per model (TraceModel.memo).

The sync causality lives here once: a blocking call "explains" GPU work that ended within
BLOCK_TOL_US of the call's end (attribution uses it to blame gaps, the graph to draw sync edges).
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .model import TraceModel

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


