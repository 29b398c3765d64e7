"""unfused_optimizer: parameter updates made of many small per-tensor kernels.

torch.optim's for-loop implementation launches several kernels per parameter tensor; foreach=True
batches them (multi_tensor_apply) and fused=True does the whole update in a kernel or two. The same holds
for a per-tensor update loop after the optimizer step: a weight EMA walked tensor by tensor (timm's
ModelEmaV2: ``ema_v.copy_(decay * ema_v + (1 - decay) * model_v)`` over both state_dicts), which
``torch._foreach_lerp_`` does in a few multi-tensor kernels, and for one between the backward and the optimizer
step (gradients clipped or scaled tensor by tensor: ``clip_grad_norm_(foreach=False)``, ``p.grad.div_(k)``).
Cost = the region's time on the critical path, minus what a fused update would take (estimated at a fifth
of its GPU time: one pass over the state instead of several).
"""
from __future__ import annotations

import re
from collections import Counter

import numpy as np

from ..trace.steps import OPTIMIZER_STEP
from ..trace.facts import blocking_calls
from ..trace.precision import CONV
from .attention import GEMM
from .base import KERNELS_GO, Context, Finding, KindSpec, user_frame
from .fixes import FusedOptimizer

SPEC = KindSpec("unfused_optimizer", "optimizer-bound",
                cost_basis="the optimizer's (or a per-tensor update loop's) profiled time, its CPU time or its GPU "
                           "time where longer, less what a fused update is modelled to take", beyond_cost=KERNELS_GO)

FUSED = r"multi_tensor_apply|fused_adam|FusedAdam|fused_sgd|_fused_|foreach"
FUSED_GPU_SHARE = 0.2
FOR_LOOP_KERNELS = 40   # kernels per optimizer step (median) from which it is a for-loop one
# Between the last backward and the optimizer step, or after that step, an op made at least once per parameter
# tensor (AccumulateGrad's count in one backward) per step is a loop over the tensors: the forward makes its
# top-level ops once per layer, fewer than its tensors.
ACCUMULATE = "torch::autograd::AccumulateGrad"
LOOP_OPS_PER_TENSOR = 0.9
MIN_TENSORS = 8
# An update does arithmetic on each tensor (a loop of zero_ / fill_ / norms is something else); a loop that
# syncs (per-tensor .item() logging) is sync_stall's, one with GEMMs or convolutions is a model's.
UPDATE_OP = r"^aten::(?:mul|add|sub|div|lerp|addcmul|addcdiv)_?$"


def for_loop_steps(ctx: Context):
    """(regions, per region (step, CPU us, kernels, GPU us)) of a for-loop optimizer: one whose steps
    launch FOR_LOOP_KERNELS or more kernels (median) and no multi-tensor one; None otherwise. Read by
    this analysis and by launch_overhead's graph estimate: computed once per trace."""
    return ctx.model.memo("for_loop_optimizer", lambda: _for_loop_steps(ctx))


def _optimizer_regions(ctx: Context):
    cpu = ctx.model.cpu
    regions = cpu[(cpu["kind"] == "annotation").to_numpy() & ctx.model.cpu_match(OPTIMIZER_STEP)]
    if regions.empty or ctx.model.gpu.empty:
        return regions
    regions = regions.assign(step=ctx.cpu_step_of(regions["ts"].to_numpy()))
    return regions[np.isin(regions["step"], ctx.full_steps)].sort_values("ts")


def _launches(ctx: Context, rows=None):
    """(GPU activities with a launch call, that call's time and thread): of all of them, or of `rows`."""
    cpu, gpu = ctx.model.cpu, ctx.model.gpu
    launched = gpu if rows is None else rows
    launched = launched[launched["launcher"] >= 0]
    lrow = launched["launcher"].to_numpy()
    return launched, cpu["ts"].to_numpy()[lrow], cpu["thread"].to_numpy()[lrow]


def _in_spans(ts: np.ndarray, thread: np.ndarray, spans) -> np.ndarray:
    """Which events (time, thread) fall in one of the spans (t0, t1, thread); spans of a thread do not overlap."""
    hit = np.zeros(len(ts), dtype=bool)
    for th in {sp[2] for sp in spans}:
        on = np.flatnonzero(thread == th)
        t0, t1 = np.array(sorted((a, b) for a, b, t in spans if t == th)).T
        k = np.searchsorted(t0, ts[on], side="right") - 1
        hit[on] = (k >= 0) & (ts[on] < t1[np.maximum(k, 0)])
    return hit


def _launched(ctx: Context, spans) -> list[tuple[int, float, bool]]:
    """Per span (t0, t1, thread): the GPU activities launched from its thread inside it (count, GPU us, any
    multi-tensor kernel). Sorted launch times per thread and cumulative sums: a trace has thousands of spans."""
    launched, lts, lth = _launches(ctx)
    dur = launched["dur"].to_numpy()
    fused = ctx.model.gpu_match(FUSED)[launched.index.to_numpy()].astype(np.int64)
    by_thread = {}
    for th in {sp[2] for sp in spans}:
        sel = np.flatnonzero(lth == th)
        o = sel[np.argsort(lts[sel], kind="stable")]
        by_thread[th] = (lts[o], np.concatenate(([0.0], np.cumsum(dur[o]))), np.concatenate(([0], np.cumsum(fused[o]))))
    out = []
    for t0, t1, th in spans:
        ts, cdur, cfused = by_thread[th]
        i0, i1 = np.searchsorted(ts, t0, "left"), np.searchsorted(ts, t1, "left")
        out.append((int(i1 - i0), float(cdur[i1] - cdur[i0]), bool(cfused[i1] > cfused[i0])))
    return out


def _for_loop_steps(ctx: Context):
    regions = _optimizer_regions(ctx)
    if regions.empty:
        return None
    got = _launched(ctx, [(r.ts, r.end, r.thread) for r in regions.itertuples()])
    rows = [(r.step, r.dur, n, us, f) for r, (n, us, f) in zip(regions.itertuples(), got)]
    if any(r[4] for r in rows) or np.median([r[2] for r in rows]) < FOR_LOOP_KERNELS:
        return None
    return regions, [r[:4] for r in rows]


def update_loops(ctx: Context):
    """(spans (t0, t1, thread), per step (step, CPU us, launches, GPU us), the loops' op names, the cpu row of the
    first op, where they run: "before" and/or "after" the optimizer step) of per-tensor update loops between each
    step's last backward and its optimizer step or after that step, or None."""
    return ctx.model.memo("update_loops", lambda: _update_loops(ctx))


def _update_loops(ctx: Context):
    regions = _optimizer_regions(ctx)
    if regions.empty:
        return None
    cpu, gpu = ctx.model.cpu, ctx.model.gpu
    # Top-level ops that launched GPU work (state_dict()'s detaches launch none: they neither start nor
    # stretch the loop, and the fixed program keeps them).
    launcher = gpu["launcher"].to_numpy()
    launching = np.unique(cpu["top_op"].to_numpy()[launcher[launcher >= 0]])
    top = cpu.iloc[launching[launching >= 0]]
    top = top[(top["kind"] == "op").to_numpy()].sort_values("ts", kind="stable")
    t_ts, t_end, t_th = top["ts"].to_numpy(), top["end"].to_numpy(), top["thread"].to_numpy()
    t_name, t_row = top["name"].to_numpy(), top.index.to_numpy()
    step_end = dict(zip(ctx.model.steps["step"].tolist(), ctx.model.steps["cpu_end"].tolist()))
    tensors, backward_end = _tensors(ctx, regions)
    if tensors < MIN_TENSORS:
        return None
    spans, steps, names, where, first = [], [], set(), [], -1
    r_ts, r_end, r_th = regions["ts"].to_numpy(), regions["end"].to_numpy(), regions["thread"].to_numpy()
    for step, pos in _by_step(regions):
        last_end, last_thread = float(r_end[pos[-1]]), r_th[pos[-1]]
        # Two places an update loop runs: after the last backward, before the optimizer (per-tensor gradient
        # clipping or scaling), and after the optimizer step (a weight EMA).
        for side, t0, t1 in (("before", backward_end.get(step), r_ts[pos[0]]),
                             ("after", last_end, step_end[step])):
            if t0 is None:
                continue
            i0, i1 = np.searchsorted(t_ts, t0, "left"), np.searchsorted(t_ts, t1, "left")
            on = np.arange(i0, i1)[t_th[i0:i1] == last_thread]
            counts = Counter(t_name[on].tolist())
            loop = {n for n, k in counts.items() if k >= LOOP_OPS_PER_TENSOR * tensors}
            if not any(re.match(UPDATE_OP, n) for n in loop):
                continue
            mask = np.isin(t_name[on], list(loop))
            first = int(t_row[on[mask][0]]) if first < 0 else first
            # Runs of consecutive loop ops: what launches between two runs is not the loop's and the fixed
            # program keeps it (clip_grad_norm_'s .to() of each norm, total norm and coefficient between its norms
            # and its scaling: 0.7 of the 4.3 ms a step its loop had spanned, profiled, holdout29_clip_per_tensor;
            # an expert review of the twenty-ninth set).
            edges = np.flatnonzero(np.diff(np.concatenate(([0], mask.astype(np.int8), [0]))))
            for a, b in zip(edges[::2], edges[1::2]):
                spans.append((float(t_ts[on[a]]), float(t_end[on[a:b]].max()), last_thread))
                steps.append(step)
                where.append(side)
            names |= loop
    if not spans or len(set(steps)) * 2 < ctx.n_full or _syncs_or_gemms(ctx, spans):
        return None
    got = _launched(ctx, spans)
    # Per step: the CPU time, launches and GPU time of its loops (one or two).
    per = {}
    for s, (a, b, _), (n, g, f) in zip(steps, spans, got):
        if f:
            return None
        us, n0, g0 = per.get(s, (0.0, 0, 0.0))
        per[s] = (us + b - a, n0 + n, g0 + g)
    if np.median([n for _, n, _ in per.values()]) < FOR_LOOP_KERNELS:
        return None
    sides = tuple(sorted(set(where), key=("before", "after").index))
    return spans, [(s, *v) for s, v in per.items()], sorted(names), first, sides, tensors


def _tensors(ctx: Context, regions) -> tuple[float, dict]:
    """(parameter tensors, per step the end of its last backward): AccumulateGrad calls of the last backward before
    each step's optimizer (median), and the last one's time. Under gradient accumulation a step runs k backwards,
    each accumulating every tensor once: a step's whole count would be k times the tensors, and an EMA loop over
    them would not reach it."""
    cpu = ctx.model.cpu
    is_acc = ctx.model.cpu_match(f"^{re.escape(ACCUMULATE)}$")
    acc = np.sort(cpu["ts"].to_numpy()[is_acc])
    if not len(acc):
        return 0.0, {}
    # The calling thread's top-level ops that are not the backward's own (a CPU backward runs its nodes on the
    # calling thread as autograd::engine ops): the forward, the loss and what follows the backward.
    thread = regions["thread"].iloc[0]
    own = (cpu["top_op"].to_numpy() == np.arange(len(cpu))) & (cpu["kind"] == "op").to_numpy() \
        & (cpu["thread"] == thread).to_numpy() & ~ctx.model.cpu_match(r"^autograd::") & ~is_acc
    calls = np.sort(cpu["ts"].to_numpy()[own])
    counts, ends = [], {}
    r_ts = regions["ts"].to_numpy()
    for step, pos in _by_step(regions):
        t_opt = r_ts[pos[0]]
        k = np.searchsorted(acc, t_opt, "left") - 1
        if k < 0:
            continue
        # The last backward began after the last call before its last AccumulateGrad.
        j = np.searchsorted(calls, acc[k], "left") - 1
        t_fwd = calls[j] if j >= 0 else -np.inf
        counts.append(k + 1 - np.searchsorted(acc, t_fwd, "right"))
        ends[step] = float(acc[k])
    return (float(np.median(counts)) if counts else 0.0), ends


def _by_step(regions):
    """(step, positions of its rows in table order), by step: what groupby("step") iterates, without building a
    frame per step (720 steps had spent 0.3 s in pandas' row indexing)."""
    return sorted(regions.reset_index(drop=True).groupby("step").indices.items())


def update_loop_rows(ctx: Context) -> set:
    """The GPU rows an update loop launched (none without one): torch.compile(model) does not fuse them, and
    this finding's fix already claims their time (fusion_candidates leaves their chains out)."""
    loops = update_loops(ctx)
    if loops is None:
        return set()
    launched, lts, lth = _launches(ctx)
    return set(launched.index[_in_spans(lts, lth, loops[0])].tolist())


def _syncs_or_gemms(ctx: Context, spans) -> bool:
    """Whether any span holds a blocking call or launches a GEMM or a convolution."""
    blk = ctx.model.cpu.loc[blocking_calls(ctx.model).index]
    _, hts, hth = _launches(ctx, ctx.model.gpu[ctx.model.gpu_match(GEMM) | ctx.model.gpu_match(CONV)])
    return bool(_in_spans(blk["ts"].to_numpy(), blk["thread"].to_numpy(), spans).any()
                or _in_spans(hts, hth, spans).any())


def analyze(ctx: Context) -> list[Finding]:
    got, loops = for_loop_steps(ctx), update_loops(ctx)
    if got is None and loops is None:
        return []
    ev, regions, extra, title, fix = {}, (), (), [], []
    region_us = gpu_us = 0.0
    if got is not None:
        optimizer, rows = got
        name = optimizer["name"].iloc[0].split("#")[-1]
        regions = tuple((float(r.ts), float(r.end), r.thread) for r in optimizer.itertuples())
        n, region_us, gpu_us = (float(np.median([r[k] for r in rows])) for k in (2, 1, 3))
        ev.update({"optimizer": name, "kernels_per_step": int(n),
                   "optimizer_cpu_ms_per_step": round(region_us / 1000, 3),
                   "optimizer_gpu_ms_per_step": round(gpu_us / 1000, 3)})
        title.append(f"{name} launches {int(n)} small kernels per step (for-loop implementation)")
        fix.append(f"Use the fused or foreach implementation: torch.optim.{name.split('.')[0]}(..., fused=True) "
                   "(or foreach=True); it updates all parameters in a few kernels.")
    if loops is not None:
        extra, rows, names, first, sides, tensors = loops
        where = user_frame(ctx.model.cpu, first)     # with_stack: the user's function that runs the loop
        n = np.median([r[2] for r in rows])
        loop_us, loop_gpu = np.median([r[1] for r in rows]), np.median([r[3] for r in rows])
        kinds = set(ctx.model.gpu.loc[sorted(update_loop_rows(ctx)), "kind"])
        # (what it launches besides kernels: clip_grad_norm_'s norms zero their outputs with memsets, 14 of the 121
        # launches a step in the thirty-seventh set's GPT; an expert review)
        also = [w for k, w in (("memcpy", "copies"), ("memset", "memsets")) if k in kinds]
        ev.update({"update_loop_ops": names, "update_loop_launches_per_step": int(n),
                   # (the tensors: AccumulateGrad calls of one backward; launches per tensor = the two divided)
                   "update_loop_tensors": int(tensors),
                   "update_loop_cpu_ms_per_step": round(loop_us / 1000, 3),
                   "update_loop_gpu_ms_per_step": round(loop_gpu / 1000, 3)})
        if where:
            ev["update_loop_source"] = where
        region_us, gpu_us = region_us + loop_us, gpu_us + loop_gpu
        side = " and ".join(sides)
        title.append(f"a per-tensor loop {side} the optimizer step ({', '.join(names[:4])}) launches {int(n)} small "
                     + ("kernels and " + " and ".join(also) if also else "kernels")
                     + f" per step, {n / tensors:.1f} for each of {int(tensors)} parameter tensors (an update one "
                     "tensor at a time"
                     + (", e.g. gradient clipping or scaling" if "before" in sides else "")
                     + (", e.g. a weight EMA" if "after" in sides else "") + ")"
                     + (f", {where}" if where else ""))
        if "before" in sides:
            fix.append("Scale or clip the gradients in multi-tensor calls: torch.nn.utils.clip_grad_norm_(params, "
                       "max_norm, foreach=True), or torch._foreach_mul_(grads, scale) / torch._foreach_div_ for a "
                       "per-tensor scaling loop.")
        if "after" in sides:
            fix.append("Update every tensor in one multi-tensor call: torch._foreach_lerp_(ema_tensors, model_tensors, "
                       "1 - decay) for an EMA (timm's ModelEmaV3; torch.optim.swa_utils.AveragedModel with "
                       "multi_avg_fn=get_ema_multi_avg_fn(decay)), or the torch._foreach_* op of the update. Build the "
                       "two tensor lists once rather than calling state_dict() each step, floating-point tensors only "
                       "(an integer buffer such as num_batches_tracked is copied on its own).")
    lost = max(0.0, max(region_us, gpu_us) - FUSED_GPU_SHARE * gpu_us)
    text = "; ".join(title)
    return [Finding(
        kind=SPEC.kind, title=text[0].upper() + text[1:], lost_per_step_us=lost, lost_total_us=lost * ctx.n_full,
        fix=" ".join(fix), confidence="medium", evidence=ev,
        fixes=(FusedOptimizer(regions, FUSED_GPU_SHARE, extra=tuple(extra)),))]
