"""exposed_communication: collective (NCCL / RCCL) kernels that run while no compute runs. They make the
GPU look busy, so a communication-bound step passes for a healthy one; what counts is the compute share
of the step and the communication time nothing hides.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace.facts import is_collective
from ..trace.steps import merged_intervals
from .base import Context, Finding, KindSpec

SPEC = KindSpec("exposed_communication", "communication-bound", estimate="measured")
ALREADY_OVERLAPS = 0.15     # of the communication time: the program overlaps already (DDP's buckets do)


def _covered(s: np.ndarray, e: np.ndarray, cs: np.ndarray, ce: np.ndarray) -> float:
    """Length of the union [s, e) that the (merged, sorted) intervals [cs, ce) cover."""
    total = 0.0
    for a, b in zip(s, e):
        lo, hi = np.searchsorted(ce, a, "right"), np.searchsorted(cs, b, "left")
        if hi > lo:
            total += float(np.sum(np.minimum(b, ce[lo:hi]) - np.maximum(a, cs[lo:hi])))
    return total


def comm_split(ctx: Context) -> pd.DataFrame:
    """Per step (us, summed over devices / device count): compute busy, communication, and the part of
    communication no compute overlaps."""
    m = ctx.model
    rows = []
    g = m.gpu
    coll = is_collective(m) if len(g) else np.zeros(0, dtype=bool)
    ndev = max(1, g["device"].nunique()) if len(g) else 1
    # In a job, a collective that waited for the other ranks (trace/peer_waits.py) is read where this rank would
    # have run it, at its own arrival: the exposure its wait added is collective_wait's, not this finding's.
    back = g["peer_wait"].to_numpy() if "peer_wait" in g else np.zeros(len(g))
    g_ts, g_end = g["ts"].to_numpy() - back, g["end"].to_numpy() - back
    for st in m.steps.itertuples():
        comp = comm = exposed = 0.0
        for dev in (g["device"].unique() if len(g) else []):
            on = (g["device"].to_numpy() == dev) & (g_end > st.start) & (g_ts < st.end)
            ts = np.clip(g_ts[on], st.start, st.end)
            te = np.clip(g_end[on], st.start, st.end)
            c = coll[on]
            ks, ke = merged_intervals(ts[~c], te[~c]) if (~c).any() else (np.zeros(0), np.zeros(0))
            cs, ce = merged_intervals(ts[c], te[c]) if c.any() else (np.zeros(0), np.zeros(0))
            comp += float((ke - ks).sum())
            cl = float((ce - cs).sum())
            comm += cl
            exposed += cl - _covered(cs, ce, ks, ke)
        rows.append((st.step, comp / ndev, comm / ndev, exposed / ndev))
    return pd.DataFrame(rows, columns=["step", "compute", "comm", "exposed"]).set_index("step")


def analyze(ctx: Context) -> list[Finding]:
    if not len(ctx.model.gpu) or not is_collective(ctx.model).any():
        return []
    split = comm_split(ctx)
    lost = ctx.per_step_median(split["exposed"])
    comp = ctx.per_step_median(split["compute"])
    comm = ctx.per_step_median(split["comm"])
    step = ctx.median_step_us or 1.0
    # Perfect overlap leaves a step no shorter than the longer of compute and communication.
    bound = max(0.0, min(lost, step - max(comp, comm)))
    same_stream = _same_stream(ctx)
    ev = {"compute_busy_ms_per_step": round(comp / 1000, 3), "communication_ms_per_step": round(comm / 1000, 3),
          "saving_if_fully_overlapped_ms": round(bound / 1000, 3),
          "collectives_on_compute_stream": same_stream,
          "exposed_communication_ms_per_step": round(lost / 1000, 3),
          "compute_utilisation_pct": round(100 * comp / step, 1),
          "overlapped_pct_of_communication": round(100 * (1 - lost / comm), 1) if comm else None}
    # Read with the other ranks (trace/peer_waits.py), the waits are out of these figures and the job report
    # names the straggler.
    in_job = ctx.model.meta.get("peer_wait_us") is not None
    straggler = (" (the job report names it)" if in_job else " that makes the others wait inside the collective "
                 "(`traceinsight analyze` on all ranks' traces)")
    if same_stream:
        fix = ("The collectives run on the compute stream (tensor-parallel style), so nothing can overlap "
               "them: cut their cost instead (fewer, larger all-reduces; a faster algorithm or transport; "
               f"a parallel layout that communicates less), and check for a straggler rank{straggler}. The saving "
               "shown is the most that can come of it, the collectives' exposed time were it gone"
               + ("." if in_job else ": a collective's kernel time includes its wait for the slowest rank, "
                  "which one rank's trace cannot tell apart from the transfer."))
    elif comm and lost < (1 - ALREADY_OVERLAPS) * comm:
        # (a review: "let DDP start all-reduces during backward" to a program whose buckets already did)
        fix = (f"The program already overlaps {100 * (1 - lost / comm):.0f}% of its communication with compute "
               "(collectives start during the backward): the rest runs after the last compute. Overlap more with "
               "smaller buckets (bucket_cap_mb) or FSDP prefetch (forward_prefetch / backward_prefetch), and "
               f"check for a straggler rank{straggler}.")
    else:
        fix = ("Overlap communication with compute: let DDP start all-reduces during backward (smaller "
               "bucket_cap_mb, gradient_as_bucket_view=True, no sync points inside backward), prefetch FSDP "
               f"all-gathers (forward_prefetch / backward_prefetch), and check for a straggler rank{straggler}.")
    if comm > comp and not same_stream:
        fix += (" Communication takes longer than compute here: even perfect overlap saves at most "
                f"{bound / 1000:.2f} ms per step; the rest needs less communication"
                + ("." if in_job else ", or less waiting: a collective's kernel time includes its wait for the "
                   "slowest rank, which one rank's trace cannot tell apart from the transfer."))
    f = Finding(
        kind=SPEC.kind,
        title=(f"Communication runs exposed: {lost / 1000:.2f} ms per step of collectives overlap no compute; "
               f"compute keeps the GPU busy only {100 * comp / step:.0f}% of the step"),
        lost_per_step_us=lost, lost_total_us=float(split["exposed"].sum()), fix=fix,
        confidence="medium" if comm else "low", evidence=ev)
    f.estimated_savings_us = bound
    return [f]


def _same_stream(ctx: Context) -> bool:
    """Most collective kernel time runs on streams that also run compute kernels."""
    g = ctx.model.gpu
    coll = is_collective(ctx.model)
    kern = (g["kind"] == "kernel").to_numpy()
    compute_streams = set(map(tuple, g.loc[kern & ~coll, ["device", "stream"]].drop_duplicates().to_numpy()))
    c = g[coll]
    on = np.array([(d, s) in compute_streams for d, s in zip(c["device"], c["stream"])], dtype=bool)
    return bool(len(c)) and float(c["dur"].to_numpy()[on].sum()) > 0.5 * float(c["dur"].sum())
