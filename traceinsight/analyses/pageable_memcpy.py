"""pageable_memcpy: copies from/to pageable host memory (the memcpy name says `Pageable`).

A pageable copy is staged through a driver bounce buffer: it runs below pinned bandwidth, blocks the
CPU for its duration, and cannot overlap compute. Cost = the GPU idle it caused (the CPU blocked in it,
queue drained) + its own time on the GPU where nothing else ran (it serialized with compute).
"""
from __future__ import annotations

import numpy as np

from ..trace.facts import PAGEABLE_MIN_BYTES
from ..trace.host_built import copy_ops
from ..trace.steps import merged_intervals
from .fixes import PinCopies
from .base import Context, Finding, KindSpec, top_op, user_frame

SPEC = KindSpec("pageable_memcpy", "copy-bound", idle_cause=True, color="#d6a21e",
                beyond_cost="the copy leaves the compute stream's critical path, so the kernels behind it start "
                            "sooner")

MIN_BYTES = PAGEABLE_MIN_BYTES
# A pageable copy is staged by the CPU (a memcpy through a pinned bounce buffer). With 16-50 MB staged per
# step the rest of the step's dispatch measured 1.0-1.5x slower than in the pinned program (the
# matrix's pageable_h2d and blocking_pageable_d2h on H100 and H200: the same ops, launches and even
# cudaDeviceGetAttribute calls, before against after). A held-out run (holdout2_*) showed it on the H100
# host and not on the H200 one, so the point first assumed none; on the later hosts that left every
# CPU-bound fixed step it applied to under-predicted (blocking_pageable_d2h, holdout2_d2h_features,
# holdout15_pageable_logits_slice: -4..-69% on 62 of 64 rows), while holdout2_pageable_conv's H200 rows
# read -3..+15% (+12..+40% at 1.25x). The point is the range's middle (2026-11-27, after seeing those rows:
# their held-out runs are no longer held out for this constant).
STAGED_MB = 8.0
STAGED_DISPATCH_SPEEDUP = 1.25
STAGED_DISPATCH_BOUNDS = (1.0, 1.5)
# The fastest the host reads a copied result: a contiguous numpy reduction or memcpy on one core (10-20
# GB/s). The host's time between a copy to the host returning and its thread's next runtime call, at this
# pace, bounds how much of the copy the step itself can have read: an eval loop that copies all its logits
# to sum 8 columns (holdout15_pageable_logits_slice: 33.5 MB, a 10x faster step once the sum ran on the
# GPU) can have read 14-20% of it. A loop that keeps every batch's copy for later reads as little in the
# step: the trace cannot tell the two apart, so the copy not made is an option with its own estimate beside
# the advice, never the advice's point.
FAST_READ_GBPS = 20.0


def analyze(ctx: Context) -> list[Finding]:
    gpu = ctx.model.gpu
    # Small pageable copies (a scalar for .item()) are syncs, not bandwidth problems: sync_stall has them.
    cp = gpu[gpu["pageable"] & (gpu["bytes"] >= MIN_BYTES)]
    # Tensors the step builds on the host each time are host_built_tensors' (made on the device or once, not pinned).
    built = copy_ops(ctx.model, ctx.full_steps)
    if len(built) and len(cp):
        lr = cp["launcher"].to_numpy()
        cp = cp[~np.isin(np.where(lr >= 0, ctx.model.cpu["top_op"].to_numpy()[np.maximum(lr, 0)], -1), built)]
    if cp.empty:
        return []
    idle = ctx.per_step["pageable_memcpy"]
    # Copy time during which no other GPU activity ran (serialized with compute).
    others = gpu[~gpu["pageable"]]
    os_, oe = merged_intervals(others["ts"].to_numpy(), others["end"].to_numpy())
    alone = np.zeros(len(cp))
    for i, (a, b) in enumerate(zip(cp["ts"].to_numpy(), cp["end"].to_numpy())):
        lo, hi = np.searchsorted(oe, a, "right"), np.searchsorted(os_, b, "left")
        cov = sum(max(0.0, min(b, oe[k]) - max(a, os_[k])) for k in range(lo, hi))
        alone[i] = (b - a) - cov
    cp = cp.assign(alone=alone, step=ctx.step_of(cp["ts"].to_numpy()))
    serial = cp.groupby("step")["alone"].sum()
    per_step = idle.add(serial, fill_value=0.0)
    lost = ctx.per_step_median(per_step)
    full = cp[np.isin(cp["step"], ctx.full_steps)]
    n = ctx.n_full
    # The median copy's rate: one copy stalled behind something else would drag a pooled rate down.
    rate = full["bytes"].to_numpy() / np.maximum(full["dur"].to_numpy(), 1e-9) / 1e3
    bw = float(np.median(rate)) if len(full) else 0.0
    compute_streams = set(gpu.loc[gpu["kind"] == "kernel", "stream"])
    ev = {
        "copies_per_step": round(len(full) / n, 2),
        "mb_per_step": round(full["bytes"].sum() / n / 1e6, 2),
        "copy_ms_per_step": round(full["dur"].sum() / n / 1000, 3),
        "achieved_gb_per_s": round(bw, 2),
        "directions": full["copy_dir"].value_counts().to_dict(),
        "on_compute_stream": bool(set(full["stream"]) & compute_streams),
        "serialized_ms_per_step": round(full["alone"].sum() / n / 1000, 3),
        "idle_ms_per_step_cpu_blocked": round(ctx.per_step_median(idle) / 1000, 3),
    }
    sites = _sites(ctx, full)
    if sites:
        ev["copy_sites"] = sites
    to_host = ev["directions"].get("DtoH", 0) > ev["directions"].get("HtoD", 0)
    read = _read_share(ctx, full) if to_host else 1.0
    if to_host:
        title = (f"{ev['mb_per_step']:.1f} MB per step copied to pageable host memory at {bw:.1f} GB/s (the median "
                 "copy's), the CPU blocked while it runs")
        # The replay lets the copy run without the CPU waiting in it: that needs the result read later,
        # and the wait for it placed after the next step's launches. Waiting first (at the top of the next
        # step) serialises copy and compute again: holdout2_d2h_features measured 2.4-3.0x that way and
        # 3.9-5.1x with the wait after the launches.
        fix = ("Copy into a pinned host buffer (torch.empty(..., pin_memory=True)) with "
               "copy_(out, non_blocking=True) on a side torch.cuda.Stream after a CUDA event, and read it "
               "one step later (two buffers): wait for that copy's event only after the next step's work is "
               "launched, or copy and compute run one after the other again; or keep the result on the GPU "
               "and move it to the host once at the end.")
        if read < 1.0:
            ev["host_reads_at_most_pct_of_the_copy"] = round(100 * read, 1)
            fix = (f"Within the step the host has time to read at most {100 * read:.1f}% of what it copies "
                   f"(at {FAST_READ_GBPS:g} GB/s): if it needs only part of it (a slice, a statistic, an argmax), "
                   "compute that on the GPU and copy only the result, and the copy goes (its own estimate "
                   "below). If it needs all of it: " + fix[0].lower() + fix[1:])
    else:
        title = (f"{ev['mb_per_step']:.1f} MB per step copied from pageable host memory at {bw:.1f} GB/s (the median "
                 "copy's), the CPU blocked while it runs")
        fix = ("Pin the host memory and copy asynchronously: DataLoader(pin_memory=True), or host buffers "
               "allocated once with torch.empty(..., pin_memory=True) and filled in place (tensor.pin_memory() "
               "on each batch copies it once more on the CPU), then .to('cuda', non_blocking=True); prefetch "
               "the next batch on a side torch.cuda.Stream so the copy overlaps compute.")
    if sites:
        # (a held-out ResNet-18 fed from host memory: the report said how much, not where)
        s0 = sites[0]
        title += f"; {'mostly ' if s0['mb_per_step'] < 0.9 * ev['mb_per_step'] else ''}in {s0['op']}" + (
            f" ({s0['source']})" if s0.get("source") else "")
    if ev["serialized_ms_per_step"] >= 0.1:
        # (a review could not reconcile "idle 9%" with a 3 ms saving: the copy is GPU time compute waits behind)
        title += (f"; the copies' own {ev['serialized_ms_per_step']:.2f} ms a step run while no compute does, "
                  "GPU time that pinned, overlapped copies give back")
    return [Finding(
        kind=SPEC.kind, title=title,
        lost_per_step_us=lost, lost_total_us=float(per_step.sum()), fix=fix,
        confidence="high", evidence=ev, fixes=(_pin(ev),),
        alternatives=_alternatives(ev, to_host, read))]


def _alternatives(ev: dict, to_host: bool, read: float) -> tuple:
    """The other ways users apply the fix, each estimated on its own: the copies pinned but still waited
    for; and where the host cannot have read all it copies to the host within the step, only what it read
    computed on the GPU and copied (the trace cannot tell whether the rest is kept for later, so this is
    an option beside the advice, not its point: holdout15_pageable_logits_slice measured 9-11x that way).
    Neither stages copies through the CPU any more: the same dispatch range as the advice."""
    alts = (("pin_and_wait", PIN_AND_WAIT[to_host], (_pin(ev, overlap=False),)),)
    if to_host and read < 1.0:
        alts += (("copy_result_only", COPY_RESULT_ONLY, (_pin(ev, kept=1.0 - read),)),)
    return alts


# The fix half done, as users often do it (holdout2_d2h_features' "after", measured 2.4x against 3.9-5.1x
# for the advice): the copies pinned, but the host still waits for each before it goes on.
PIN_AND_WAIT = {True: "pinned buffers, but the host waits for each copy before it launches more work",
                False: "pinned host memory, but each copy still synchronous (no non_blocking, no prefetch)"}


COPY_RESULT_ONLY = ("only what the host reads computed on the GPU and copied, not the whole result (if the "
                    "host needs only part of it)")


def _pin(ev: dict, kept: float = 0.0, overlap: bool = True) -> PinCopies:
    """The fix (or one of its other ways); where the CPU stages many MB per step, the step's dispatch also
    speeds up once it no longer does (a range)."""
    if ev["mb_per_step"] < STAGED_MB:
        return PinCopies(kept=kept, overlap=overlap)
    lo, hi = STAGED_DISPATCH_BOUNDS
    return PinCopies(STAGED_DISPATCH_SPEEDUP, ((lo, kept), (hi, kept)), kept=kept, overlap=overlap)


def _read_share(ctx: Context, copies) -> float:
    """The most of the pageable copies to the host (GPU rows, full steps) that the host can have read
    between the op that copied (aten::to, with the stream sync after the copy) and its thread's next
    runtime call, at FAST_READ_GBPS: 1.0 when it had time for all of it. The read may come after the
    step's end (prof.step() right after the copy), and bytes not read yet carry over to the thread's
    later windows (a.cpu(); b.cpu(); use(a, b))."""
    m = ctx.model
    cpu = m.cpu
    calls = copies[(copies["copy_dir"] == "DtoH").to_numpy() & (copies["launcher"] >= 0).to_numpy()]
    if calls.empty:
        return 1.0
    rt = (cpu["kind"] == "runtime").to_numpy()
    ts, end, thread, top = (cpu[k].to_numpy() for k in ("ts", "end", "thread", "top_op"))
    rows = calls["launcher"].to_numpy()
    copying = set(thread[rows].tolist())
    starts = {th: np.sort(ts[r[rt[r]]]) for th, r in m.thread_rows().items() if th in copying}
    readable, pending = 0.0, {}
    for row, nbytes in sorted(zip(rows.tolist(), calls["bytes"].to_numpy().tolist()), key=lambda rb: ts[rb[0]]):
        a = max(end[row], end[top[row]] if top[row] >= 0 else -np.inf)
        nxt = starts[thread[row]]
        k = np.searchsorted(nxt, a, "left")
        window = nxt[k] - a if k < len(nxt) else np.inf
        owed = pending.get(thread[row], 0.0) + float(nbytes)
        got = min(owed, max(0.0, window) * FAST_READ_GBPS * 1e3)
        readable += got
        pending[thread[row]] = owed - got
    total = float(calls["bytes"].sum())
    return min(1.0, readable / total) if total > 0 else 1.0


def _sites(ctx: Context, full) -> list[dict]:
    """Where the copies are made, most MB first (at most 3): the outermost op above each copy's runtime call
    (aten::to, aten::copy_) and, with Python stacks, the user's frame that called it."""
    cpu = ctx.model.cpu
    launcher = full["launcher"].to_numpy()
    by: dict[tuple, float] = {}
    for r, b in zip(launcher, full["bytes"].to_numpy()):
        if r < 0:
            continue
        key = (top_op(cpu, int(r)), user_frame(cpu, int(r)) or "")
        by[key] = by.get(key, 0.0) + float(b)
    n = ctx.n_full
    return [{"op": op, "source": src, "mb_per_step": round(b / n / 1e6, 2)}
            for (op, src), b in sorted(by.items(), key=lambda kv: -kv[1])[:3]]
