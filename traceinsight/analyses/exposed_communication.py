"""exposed_communication: collective (NCCL / RCCL) kernels that run while no compute runs. They make the
GPU look busy, so a communication-bound step passes for a healthy one; what counts is the compute share
of the step and the communication time nothing hides.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace.facts import is_collective, waiting_calls
from ..trace.host import subtract_intervals
from ..trace.profiler_cost import unprofiled_step_us
from ..trace.steps import merged_intervals
from . import collective_speed
from .base import Context, Finding, KindSpec

SPEC = KindSpec("exposed_communication", "communication-bound", estimate="measured")
ALREADY_OVERLAPS = 0.15     # of the communication time: the program overlaps already (DDP's buckets do)
CPU_HELD = 0.5              # of the exposed time: below it compute mostly waited for the CPU, not the collectives


# A launch this soon after a wait on the GPU was held back by that wait (the thread's next calls after a
# synchronize returns are its own few microseconds of dispatch).
WAIT_GAP_US = 200.0


def _ready(m) -> np.ndarray:
    """Per GPU row: when the CPU had queued it, the end of its launch call (-inf where the trace shows no
    launch). Where the launching thread sat in a call waiting for the GPU (a synchronize, a copy to the host)
    just before, the work was held back by what the GPU ran, not by the CPU: ready when that wait began."""
    g, cpu = m.gpu, m.cpu
    lr = g["launcher"].to_numpy()
    ready = np.full(len(g), -np.inf)
    has = lr >= 0
    if not has.any():
        return ready
    ts, end, thread = cpu["ts"].to_numpy(), cpu["end"].to_numpy(), cpu["thread"].to_numpy()
    ready[has] = end[lr[has]]
    waits = np.flatnonzero(waiting_calls(m))
    for t in np.unique(thread[waits]).tolist() if len(waits) else []:
        w = waits[thread[waits] == t]
        w = w[np.argsort(end[w], kind="stable")]
        on = np.flatnonzero(has & (thread[np.maximum(lr, 0)] == t))
        # The last wait on the thread that ended before the launch call began, if it ended right before it.
        k = np.searchsorted(end[w], ts[lr[on]], "right") - 1
        ok = (k >= 0) & (ts[lr[on]] - end[w[np.maximum(k, 0)]] <= WAIT_GAP_US)
        ready[on[ok]] = ts[w[k[ok]]]
    return ready


def comm_split(ctx: Context) -> pd.DataFrame:
    """Per step (us, summed over devices / device count): compute busy, communication, the part of
    communication no compute overlaps, and the part of that in which compute was waiting for it: its next
    work already queued (launched, or held back by a wait on the GPU). The rest ran while compute waited for
    the CPU to launch its next kernel: overlapping the collectives better gives that back to nobody (HTA's
    a100 DDP rank: 10.4 ms of all-reduce 'exposed' in a backward whose compute stream waited on the CPU)."""
    m = ctx.model
    rows = []
    g = m.gpu
    coll = is_collective(m) if len(g) else np.zeros(0, dtype=bool)
    ndev = max(1, g["device"].nunique()) if len(g) else 1
    # In a job, a collective that waited for the other ranks (trace/peer_waits.py) is read where this rank would
    # have run it, at its own arrival: the exposure its wait added is collective_wait's, not this finding's.
    back = g["peer_wait"].to_numpy() if "peer_wait" in g else np.zeros(len(g))
    g_ts, g_end = g["ts"].to_numpy() - back, g["end"].to_numpy() - back
    ready = _ready(m) if len(g) else np.zeros(0)
    for st in m.steps.itertuples():
        comp = comm = exposed = blocking = 0.0
        for dev in (g["device"].unique() if len(g) else []):
            on = (g["device"].to_numpy() == dev) & (g_end > st.start) & (g_ts < st.end)
            ts = np.clip(g_ts[on], st.start, st.end)
            te = np.clip(g_end[on], st.start, st.end)
            c = coll[on]
            ks, ke = merged_intervals(ts[~c], te[~c]) if (~c).any() else (np.zeros(0), np.zeros(0))
            cs, ce = merged_intervals(ts[c], te[c]) if c.any() else (np.zeros(0), np.zeros(0))
            comp += float((ke - ks).sum())
            comm += float((ce - cs).sum())
            ps, pe = subtract_intervals(cs, ce, ks, ke)
            exposed += float((pe - ps).sum())
            # Each uncovered piece against the compute that follows it: the part after that work was queued.
            k_ts, k_ready = ts[~c], ready[on][~c]
            order = np.argsort(k_ts, kind="stable")
            k_ts, k_ready = k_ts[order], k_ready[order]
            nxt = np.searchsorted(k_ts, ps, "left")
            late = np.where(nxt < len(k_ts), k_ready[np.minimum(nxt, len(k_ts) - 1)], -np.inf)
            blocking += float(np.clip(pe - np.maximum(ps, late), 0.0, None).sum())
        rows.append((st.step, comp / ndev, comm / ndev, exposed / ndev, blocking / ndev))
    return pd.DataFrame(rows, columns=["step", "compute", "comm", "exposed", "blocking"]).set_index("step")


def analyze(ctx: Context) -> list[Finding]:
    if not len(ctx.model.gpu) or not is_collective(ctx.model).any():
        return []
    split = comm_split(ctx)
    lost = ctx.per_step_median(split["exposed"])
    held = _unprofiled_held(ctx, lost, min(lost, ctx.per_step_median(split["blocking"])))
    comp = ctx.per_step_median(split["compute"])
    comm = ctx.per_step_median(split["comm"])
    step = ctx.median_step_us or 1.0
    # Perfect overlap leaves a step no shorter than the longer of compute and communication, and gives back
    # only the exposed time in which compute had work queued behind the collectives.
    bound = max(0.0, min(held, step - max(comp, comm)))
    same_stream = _same_stream(ctx)
    ev = {"compute_busy_ms_per_step": round(comp / 1000, 3), "communication_ms_per_step": round(comm / 1000, 3),
          "saving_if_fully_overlapped_ms": round(bound / 1000, 3),
          "collectives_on_compute_stream": same_stream,
          "exposed_communication_ms_per_step": round(lost / 1000, 3),
          "exposed_while_compute_waited_on_it_ms_per_step": round(held / 1000, 3),
          "compute_utilisation_pct": round(100 * comp / step, 1),
          "overlapped_pct_of_communication": round(100 * (1 - lost / comm), 1) if comm else None}
    # Read with the other ranks (trace/peer_waits.py), the waits are out of these figures and the job report
    # names the straggler.
    in_job = ctx.model.meta.get("peer_wait_us") is not None
    straggler = (" (the job report says whether one sets the pace)" if in_job else " that makes the others wait inside the collective "
                 "(`traceinsight analyze` on all ranks' traces)")
    already = (f"The program already overlaps {100 * (1 - lost / comm):.0f}% of its communication with compute"
               if comm and lost < (1 - ALREADY_OVERLAPS) * comm else "")
    if same_stream:
        fix = ("The collectives run on the compute stream (tensor-parallel style), so nothing can overlap "
               "them: cut their cost instead (fewer, larger all-reduces; a faster algorithm or transport; "
               f"a parallel layout that communicates less), and check for a straggler rank{straggler}. The saving "
               "shown is the most that can come of it, the collectives' exposed time were it gone"
               + ("." if in_job else ": a collective's kernel time includes its wait for the slowest rank, "
                  "which one rank's trace cannot tell apart from the transfer."))
    elif already:
        # (a review: "let DDP start all-reduces during backward" to a program whose buckets already did)
        fix = (f"{already} (collectives start during the backward): the rest runs after the last compute. "
               f"Overlap more with {overlap_advice(ctx.model, more=True)}, and check for a straggler rank{straggler}.")
    else:
        fix = (f"Overlap communication with compute: {overlap_advice(ctx.model)}, and check for a straggler "
               f"rank{straggler}.")
    # How fast the collectives moved their data: where the largest crawl, overlap is not the answer.
    speed = collective_speed.table(ctx)
    slow = collective_speed.slow_note(speed, in_job) if speed else ""
    cpu_held = lost > 0 and held < CPU_HELD * lost
    if slow and not same_stream and not cpu_held:
        # (a review of TraceLens' MI300 rank: "smaller DDP buckets" beside all-reduces that take 6.7-8.7 ms whatever
        # their size, a cost per collective that more buckets multiply)
        larger = ("Fewer, larger DDP buckets (a larger bucket_cap_mb)" if ctx.model.cpu_match(DDP_RANGE).any() else
                  "Fewer, larger collectives")
        fix = (slow.strip() + (f" {already}." if already else "")
               + f" Overlap hides at most the compute beside them ({comp / 1000:.2f} ms a step), "
               f"whatever the cause; the rest needs the collectives to run at the links' speed. {larger} pay less per "
               "collective than smaller ones"
               + (" (the job report says whether a rank sets the pace)." if in_job else "."))
        slow = ""
    if cpu_held:
        # (a review of HTA's a100 DDP rank: "overlap more" for all-reduces that ran in the backward while the
        # compute stream waited on a launch-bound CPU, the last one done 15 ms before the optimizer began)
        fix = (f"Of the {lost / 1000:.2f} ms per step of collectives that overlap no compute, compute was waiting "
               f"for them only {held / 1000:.2f} ms: the rest ran while the compute stream waited for the CPU to "
               "launch its next kernel. The CPU, not the communication, holds this step (see the CPU-side "
               "findings); better overlap gives back at most the part compute waited for. Check for a straggler "
               f"rank{straggler}.")
    if comm > comp and not same_stream and not cpu_held:
        fix += (" Communication takes longer than compute here: even perfect overlap saves at most "
                f"{bound / 1000:.2f} ms per step; the rest needs less communication"
                + ("." if in_job else ", or less waiting: a collective's kernel time includes its wait for the "
                   "slowest rank, which one rank's trace cannot tell apart from the transfer."))
    if speed:
        ev["collective_bandwidth"] = speed
        fix += slow
    f = Finding(
        kind=SPEC.kind,
        title=(f"Communication runs exposed: {lost / 1000:.2f} ms per step of collectives overlap no compute; "
               f"compute keeps the GPU busy only {100 * comp / step:.0f}% of the step"),
        lost_per_step_us=lost, lost_total_us=float(split["exposed"].sum()), fix=fix,
        confidence="medium" if comm and not cpu_held else "low", evidence=ev)
    f.estimated_savings_us = bound
    return [f]


# The data-parallel wrappers a trace names (their forward's record_function ranges).
DDP_RANGE = r"^DistributedDataParallel\.forward$"
FSDP_RANGE = r"^FullyShardedDataParallel\.|^FSDP::"


def overlap_advice(m, more: bool = False) -> str:
    """How to overlap more, for the wrapper the program uses (a review: FSDP prefetch advised to DDP programs,
    HTA's a100 rank and TraceLens' MI300 ResNet); both where the trace names neither."""
    ddp, fsdp = bool(m.cpu_match(DDP_RANGE).any()), bool(m.cpu_match(FSDP_RANGE).any())
    both = ddp == fsdp
    out = []
    if ddp or both:
        out.append("smaller DDP buckets (bucket_cap_mb)" if more else
                   "let DDP start all-reduces during backward (smaller bucket_cap_mb, gradient_as_bucket_view=True, "
                   "no sync points inside backward)")
    if fsdp or both:
        out.append("FSDP prefetch (forward_prefetch / backward_prefetch)" if more else
                   "prefetch FSDP all-gathers (forward_prefetch / backward_prefetch)")
    return " or ".join(out) if more else ", ".join(out)


def _unprofiled_held(ctx: Context, lost: float, held: float) -> float:
    """The exposed time compute waited for, without the profiler. Its CPU runs faster there, launching earlier:
    of the exposure that waited on the CPU here, no more than the un-profiled step's idle can still have (a DDP
    rank 40% idle profiled, about 0% un-profiled, had its all-reduce before the optimizer read as waiting on a
    CPU whose launches the profiler had made late; the measured fix saved 1.4 ms of it)."""
    unprof = unprofiled_step_us(ctx.model, ctx.full_steps)
    if unprof is None or lost <= held:
        return held
    steps = ctx.model.steps
    busy = float(np.median(steps.loc[steps["step"].isin(ctx.full_steps), "gpu_busy"].to_numpy()))
    return lost - min(lost - held, max(0.0, unprof - busy))


def _same_stream(ctx: Context) -> bool:
    """Most collective kernel time runs on streams that also run compute kernels."""
    g = ctx.model.gpu
    coll = is_collective(ctx.model)
    kern = (g["kind"] == "kernel").to_numpy()
    compute_streams = set(map(tuple, g.loc[kern & ~coll, ["device", "stream"]].drop_duplicates().to_numpy()))
    c = g[coll]
    on = np.array([(d, s) in compute_streams for d, s in zip(c["device"], c["stream"])], dtype=bool)
    return bool(len(c)) and float(c["dur"].to_numpy()[on].sum()) > 0.5 * float(c["dur"].sum())
