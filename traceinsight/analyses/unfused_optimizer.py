"""unfused_optimizer: an optimizer step made of many small per-parameter kernels.

torch.optim's for-loop implementation launches several kernels per parameter tensor; foreach=True
batches them (multi_tensor_apply) and fused=True does the whole update in a kernel or two.
Cost = the optimizer region's time on the critical path, minus what a fused update would take
(estimated at a fifth of its GPU time: one pass over the state instead of several).
"""
from __future__ import annotations

import numpy as np

from .base import KERNELS_GO, Context, Finding, KindSpec
from .fixes import FusedOptimizer

SPEC = KindSpec("unfused_optimizer", "optimizer-bound",
                cost_basis="the optimizer's profiled time (its CPU time, or its GPU time where longer) less what a "
                           "fused optimizer is modelled to take", beyond_cost=KERNELS_GO)

FUSED = r"multi_tensor_apply|fused_adam|FusedAdam|fused_sgd|_fused_|foreach"
FUSED_GPU_SHARE = 0.2
FOR_LOOP_KERNELS = 40   # kernels per optimizer step (median) from which it is a for-loop one


def for_loop_steps(ctx: Context):
    """(regions, per region (step, CPU us, kernels, GPU us)) of a for-loop optimizer: one whose steps
    launch FOR_LOOP_KERNELS or more kernels (median) and no multi-tensor one; None otherwise. Read by
    this analysis and by launch_overhead's graph estimate: computed once per trace."""
    return ctx.model.memo("for_loop_optimizer", lambda: _for_loop_steps(ctx))


def _for_loop_steps(ctx: Context):
    cpu, gpu = ctx.model.cpu, ctx.model.gpu
    regions = cpu[(cpu["kind"] == "annotation").to_numpy() & ctx.model.cpu_match(r"^Optimizer\.step#")]
    if regions.empty or gpu.empty:
        return None
    regions = regions.assign(step=ctx.cpu_step_of(regions["ts"].to_numpy()))
    regions = regions[np.isin(regions["step"], ctx.full_steps)].sort_values("ts")
    if regions.empty:
        return None
    # Each launched GPU activity -> the optimizer region (same thread) its launch call fell in.
    launched = gpu[gpu["launcher"] >= 0]
    lrow = launched["launcher"].to_numpy()
    lts, lth = cpu["ts"].to_numpy()[lrow], cpu["thread"].to_numpy()[lrow]
    fused = ctx.model.gpu_match(FUSED)[launched.index.to_numpy()]
    rows = []
    for th, regs in regions.groupby("thread"):
        on = lth == th
        r0, r1 = regs["ts"].to_numpy(), regs["end"].to_numpy()
        k = np.searchsorted(r0, lts[on], side="right") - 1
        inside = (k >= 0) & (lts[on] < r1[np.maximum(k, 0)])
        dur = launched["dur"].to_numpy()[on][inside]
        kk = k[inside]
        for i, r in enumerate(regs.itertuples()):
            sel = kk == i
            rows.append((r.step, r.dur, int(sel.sum()), float(dur[sel].sum()),
                         bool(fused[on][inside][sel].any())))
    if any(r[4] for r in rows) or np.median([r[2] for r in rows]) < FOR_LOOP_KERNELS:
        return None
    return regions, [r[:4] for r in rows]


def analyze(ctx: Context) -> list[Finding]:
    got = for_loop_steps(ctx)
    if got is None:
        return []
    regions, rows = got
    n_kernels = np.median([r[2] for r in rows])
    region_us = np.median([r[1] for r in rows])
    gpu_us = np.median([r[3] for r in rows])
    lost = max(0.0, max(region_us, gpu_us) - FUSED_GPU_SHARE * gpu_us)
    name = regions["name"].iloc[0].split("#")[-1]
    ev = {"optimizer": name, "kernels_per_step": int(n_kernels),
          "optimizer_cpu_ms_per_step": round(region_us / 1000, 3),
          "optimizer_gpu_ms_per_step": round(gpu_us / 1000, 3)}
    return [Finding(
        kind=SPEC.kind,
        title=f"{name} launches {int(n_kernels)} small kernels per step (for-loop implementation)",
        lost_per_step_us=lost, lost_total_us=lost * ctx.n_full,
        fix=f"Use the fused or foreach implementation: torch.optim.{name.split('.')[0]}(..., fused=True) "
            "(or foreach=True); it updates all parameters in a few kernels.",
        confidence="medium", evidence=ev,
        fixes=(FusedOptimizer(tuple([(float(r.ts), float(r.end), r.thread) for r in regions.itertuples()]), FUSED_GPU_SHARE),))]
