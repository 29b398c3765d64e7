"""The de-inflated baseline: the trace's steps replayed with the profiler's own CPU cost taken out (deinflate.py),
calibrated to the step `record` measured where there is one; from it the un-profiled step, its band and the
sentence that says how it was found. Every estimate is made on this baseline (rank.py)."""
from __future__ import annotations

import numpy as np

from ..analyses.base import Context
from ..analyses.reads import host_work_us
from ..trace.facts import is_collective, mean_step_us
from ..trace.profiler_cost import profile_setting, profiler_options
from . import replay
from .bounds import kernel_busy_us, pinned_copy_us
from .deinflate import (TIME_SCALE, calibration_scale, profiler_cuts, replay_target, unprofiled_method,
                        unprofiled_range_us)

# Beyond this replay error on the unchanged trace, a replayed estimate is not trusted (rank.py).
RELIABLE_REPLAY_PCT = 15.0
DISTURBED_LOW = 0.5       # the un-profiled band's low end, as a share of the estimate, on a disturbed host


def baseline(ctx: Context, compiled: replay.Compiled, info: dict, actual, bw: float, wait: float,
             target: float | None, erratic: dict | None):
    """(the de-inflated replay, the profiler cuts it applied), or (None, None) where nothing replays; fills
    `info` with the un-profiled step and what the replay measured."""
    # The profiled replay checks the replay against the trace; every estimate is made on the
    # de-inflated one (the profiler's own CPU cost taken out): what the un-profiled program saves.
    profiled = replay.simulate(replay.apply(compiled))
    if not profiled.step_us:
        return None, None
    act = float(np.median([actual[s] for s in profiled.step_us]))
    info["baseline_replay_ms"] = round(profiled.median_us / 1000, 3)
    info["measured_ms_same_steps"] = round(act / 1000, 3)
    info["replay_error_pct"] = round(100 * (profiled.median_us - act) / act, 1) if act else None
    info["replayed_steps"] = sorted(profiled.step_us)
    busy = float(np.median([ctx.model.steps.set_index("step")["gpu_busy"][s] for s in profiled.step_us]))
    host = host_work_us(ctx)
    # (A loop fed by DataLoader workers runs at their pace un-profiled: the wait, not the profiler's
    # cost or the loop's own work, is what differs; `absorbed` below is its share.)
    cuts = profiler_cuts(ctx.model, compiled, 1.0 if wait else calibration_scale(
        ctx.model, compiled, profiled, act, target, host))
    base = replay.simulate(replay.apply(compiled, (), bw, cuts))
    calibrated = ""
    if target is not None and base.step_us and not wait:
        # What the cuts do not explain of the measured step runs at the host's own pace: spread over
        # the whole step (every replayed step time scaled), so a fix keeps its replayed share of it.
        lo, hi = TIME_SCALE
        compiled.time_scale = replay_target(profiled, act, target) / base.median_us
        base = replay.simulate(replay.apply(compiled, (), bw, cuts))
        # (Even far off, scaling keeps each fix's share of the step: left a constant, a 10x gap between
        # a disturbed window and the measured step had a sync fix save more than the step.)
        calibrated = ("; the replay is scaled to it: the profiler's per-event cost takes the part of the "
                      "difference its own spread allows, the host's pace the rest"
                      + ("" if lo <= compiled.time_scale <= hi else
                         f", though the trace's steps and the measured step differ by more than "
                         f"{hi:.0f}x (a window unlike the program's steps, or a disturbed host): each fix "
                         "keeps its share of the step, and the estimates are less certain"))
    # The measured step less what the profiler's cost took in the replay (a replay that misses
    # the step, e.g. an unmodelled cross-stream wait, still moves it by the right amount), or the
    # cost model's own figure; no step shorter than its GPU work.
    if wait:
        act = max(act, mean_step_us(ctx.model))
    moved = act - max(0.0, profiled.median_us - base.median_us - wait)
    unprof = max(target if target is not None else moved, busy)
    info["unprofiled_step_ms"] = round(unprof / 1000, 3)
    err = info["replay_error_pct"]
    # (A replay that misses the step still moves it by the cost's amount: only that difference is used.)
    missed = (f"; the replay itself misses the profiled step by {err:+.0f}%, so only that difference is used"
              if err is not None and abs(err) > RELIABLE_REPLAY_PCT and target is None else "")
    info["unprofiled_step_method"] = unprofiled_method(ctx.model) + calibrated + missed + (
        f"; the loop waits {wait / 1000:.2f} ms per step for DataLoader workers, which the profiler does "
        "not slow: the wait absorbs the profiler's cost on the loop" if wait and target is None else
        f"; the loop waits {wait / 1000:.2f} ms per step for DataLoader workers: the difference is their "
        "pace, and the replay keeps the cost model's cuts" if wait else "")
    band = unprofiled_range_us(ctx.model, unprof, busy, act, 0.0 if wait else host)
    if band and erratic:
        # Even the quiet steps of a disturbed host may run long: the band reaches down to half the
        # estimate (a host measured at 4.5 ms un-profiled gave quiet steps of 10.7-12.9 ms).
        band = (max(busy, min(band[0], DISTURBED_LOW * unprof)), band[1])
        info["unprofiled_step_method"] += ("; the host was disturbed in the profiled window (steps "
                                           f"{erratic['span']}): only its quiet steps are used, and the "
                                           "band reaches down to half the estimate")
    compiling = bool(band) and ctx.per_step_median(ctx.per_step["recompile"]) >= 0.5 * ctx.median_step_us
    if compiling:
        # A step that is mostly torch.compile compiling lasts what the compile does, which varies from step to
        # step (2.6-4.3 s over static's six): the band is the window's own spread (the cost model's, fitted on
        # steady steps, held 3.16-3.47 s there against 2.99-3.03 s measured).
        d = ctx.model.steps
        d = d.loc[d["step"].isin(ctx.full_steps), "dur"]
        band = (max(busy, min(band[0], unprof * float(d.min() / d.median()))),
                max(band[1], unprof * float(d.max() / d.median())))
        info["unprofiled_step_method"] += ("; the step is mostly torch.compile compiling, whose time varies from "
                                           "step to step: the band is widened to the window's own spread of steps")
    info["unprofiled_step_range_basis"] = None if not band else "window" if compiling else "validation"
    info["unprofiled_step_range_ms"] = [round(x / 1000, 3) for x in band] if band else None
    # "stack": with_stack and/or record_shapes (the validation's two settings, by which its bands are kept; the
    # per-event costs also tell record_shapes alone apart: profiler_cost.cost_model); the options themselves:
    info["profiler_setting"] = profile_setting(ctx.model)
    info["profiler_options"] = profiler_options(ctx.model)
    info["gpu_busy_ms"] = round(busy / 1000, 3)
    info["kernel_busy_ms"] = round(kernel_busy_us(ctx, profiled.step_us) / 1000, 3)
    coll = is_collective(ctx.model) if len(ctx.model.gpu) else None
    info["collective_busy_ms"] = round(kernel_busy_us(ctx, profiled.step_us, coll) / 1000, 3) \
        if coll is not None and coll.any() else 0.0
    info["pinned_copy_ms"] = round(pinned_copy_us(ctx, profiled.step_us, bw) / 1000, 3)
    info["pinned_copy_ms_by_direction"] = {d: round(pinned_copy_us(ctx, profiled.step_us, bw, (d,)) / 1000, 3)
                                           for d in ("HtoD", "DtoH")}
    return base, cuts
