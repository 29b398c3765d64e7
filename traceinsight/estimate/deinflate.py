"""The un-profiled program: take the profiler's own CPU cost (trace/profiler_cost.py) out of the replay.

Each CPU edge of the replay (the time between two runtime calls on a thread) loses the cost of the
events that started in it, dispatch first, then host work; each runtime call loses its own recording
cost (the replay applies the cuts: replay.apply(..., cuts=profiler_cuts(...))).
"""
from __future__ import annotations

import math

import numpy as np

from ..trace.model import TraceModel
from ..trace.profiler_cost import (PY_CALL_FLOOR_US, cost_model, event_classes, graph_node_cost_us,
                                   measured_unprofiled_us, memory_event_us, memory_starts, profiler_options,
                                   profile_setting)
from . import replay


def profiler_cuts(model: TraceModel, c: replay.Compiled, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Per replay node: the profiler cost in the CPU edge that ends at it, and in the call itself (us)."""
    n = len(c.nodes)
    edge, call = np.zeros(n), np.zeros(n)
    cpu = model.cpu
    if cpu.empty or not n:
        return edge, call
    classes = event_classes(model)
    nodes = graph_node_cost_us(model)
    coef = {k: us for k, _rows, us in classes}
    starts = {}
    ts = cpu["ts"].to_numpy()
    for th, rows in model.thread_rows().items():
        starts[th] = {k: np.sort(ts[rows[sel[rows]]]) for k, sel, _us in classes}
    # profile_memory's allocation events, in the edges of their threads as any recorded event's cost
    coef["memory"] = memory_event_us(model)
    for th, v in memory_starts(model).items():
        starts.setdefault(th, {})["memory"] = v
    idx = np.array([i for i in c.cpu_idx if c.rkind[i] not in ("marker", "") or c.nodes[i][0] == "step"],
                   dtype=np.int64)
    for i in idx:
        if c.nodes[i][0] == "cpu":
            call[i] = (coef["runtime"] + nodes[c.nodes[i][1]]) * scale
    # Each edge at once (node i's CPU edge runs from its thread predecessor's end to i's start).
    idx = idx[c.cpred[idx] >= 0]
    idx = idx[c.ts[idx] > c.end[c.cpred[idx]]]           # (an edge of no length holds nothing)
    prev = c.cpred[idx]
    a, b = c.end[prev], c.ts[idx]
    thread = np.asarray(c.thread, dtype=object)
    th_i, th_p = thread[idx], thread[prev]
    # An edge across threads (the loop waking a helper, or resuming after its last call) holds every
    # thread's events.
    across = th_i != th_p
    total, calls = np.zeros(len(idx)), np.zeros(len(idx))
    for th, per in starts.items():
        on = (th_i == th) | across
        own = (th_i == th) | (th_p == th)
        for k, v in per.items():
            # (the edge's own threads' calls are cut in `call`)
            sel = on & ~own if k == "runtime" else on
            if not sel.any():
                continue
            n_k = np.searchsorted(v, b[sel], "right") - np.searchsorted(v, a[sel], "right")
            total[sel] += coef[k] * n_k
            if k in ("python", "python_c"):
                calls[sel] += n_k
    edge[idx] = np.minimum(scale * total, np.maximum(0.0, b - a - PY_CALL_FLOOR_US * calls))
    # Between two ProfilerStep ranges the loop thread is inside the profiler's own step(): measured in
    # the trace, it goes whole (a per-step cost the per-event model does not hold: 10-40 us).
    st = model.steps.set_index("step")
    for k, m in c.markers.items():
        nxt = c.csucc[m]
        if k + 1 not in st.index or nxt < 0:
            continue
        a, b = float(st.at[k, "cpu_end"]), float(st.at[k + 1, "cpu_start"])
        if a < b <= c.ts[nxt] + 1e-6:
            edge[nxt] += b - a
    return edge, call


# How far the measured un-profiled step lay from this estimate on our own recordings, in shares of the
# profiler time the estimate took out (profiled step - estimate): the 10th and 90th percentile over the
# validation matrix's traces that were de-inflated by more than 5% (87 with default options, 97 with
# stacks or shapes; H100 and H200 machines, 15 recording runs; sample_traces/matrix/validation.json,
# 2026-11-24). The error grows with what was taken out: a GPU-bound step hardly moves (measured/estimate
# 0.94-1.02 on the other 76 traces: SMALL_BAND). Most of the spread is the host, not the model: the same
# program's estimate moved 30-60% between runs.
UNPROFILED_SPREAD = {"default": (0.78, 0.55), "stack": (0.68, 0.34)}
SMALL_BAND = (0.94, 1.03)
# Host work outside any recorded event (numpy, Python; the host's reading of a copied result) costs the
# profiler nothing, but varies from run to run on its own: on the 89 matrix traces where it was >= 30% of
# the estimate (not fed by DataLoader workers), measured - estimate lay between -0.16 and +0.25 times it
# (10th-90th percentile, 2026-11-25); the band above held only 42 of them.
HOST_SPREAD = (0.16, 0.25)


def unprofiled_range_us(model: TraceModel, unprofiled_us: float, busy_us: float,
                        profiled_us: float, host_us: float = 0.0) -> tuple[float, float] | None:
    """The 80% band of the un-profiled step around an estimate (None when `record` measured it); never
    below the GPU's own work in the trace (a review, 2026-11-28, read a band reaching 3% under it as a step
    shorter than its GPU work; the kernels may still run a little long under the profiler: one bf16 MLP's
    32.08 ms of profiled GPU work took 29.35 ms a step without it). `host_us`: the step's host
    work outside any recorded event, which widens it (HOST_SPREAD)."""
    if measured_unprofiled_us(model) is not None:
        return None
    below, above = UNPROFILED_SPREAD[profile_setting(model)]
    removed = max(0.0, profiled_us - unprofiled_us)
    lo = min(SMALL_BAND[0] * unprofiled_us, unprofiled_us - below * removed, unprofiled_us - HOST_SPREAD[0] * host_us)
    hi = max(SMALL_BAND[1] * unprofiled_us, unprofiled_us + above * removed, unprofiled_us + HOST_SPREAD[1] * host_us)
    return max(busy_us, lo), hi


def unprofiled_method(model: TraceModel) -> str:
    if measured_unprofiled_us(model) is not None:
        return "measured by traceinsight record (steps outside the profiler's window)"
    _, machine = cost_model(model)
    where = f"{machine} machines" if machine != "any" else "H100 and H200 machines, pooled"
    return (f"estimate: the profiled step less the profiler's per-event CPU cost ({profiler_options(model)}; "
            f"calibrated on {where}), as much as taking it out shortens the replay")


def calibration_scale(model: TraceModel, c: replay.Compiled, profiled: replay.Replay, measured_step: float,
                      target: float | None, host_us: float = 0.0) -> float:
    """The factor on the per-event cuts for a step `record` measured un-profiled (1 without one): what the
    cost model's own replay misses the step by is the profiler's cost only in proportion to how far that
    cost is known to stray (UNPROFILED_SPREAD x the profiler time taken out), against how far the host's own
    work does (HOST_SPREAD x `host_us`, the step's host work); rank.py spreads the rest over the step. The
    cuts used to take it all: a host-heavy step that ran 4% faster un-profiled had every cut tripled (the
    clamp), its launches kept their inflation, and the fix that removes its host work read up to 4x the
    measured speed-up (holdout6_eval_topk_numpy, 2026-11-27)."""
    if target is None or not profiled.step_us:
        return 1.0
    raw = replay.simulate(replay.apply(c, (), cuts=profiler_cuts(model, c))).median_us
    shrink = profiled.median_us - raw
    if shrink <= 0:
        return 1.0
    miss = replay_target(profiled, measured_step, target) - raw   # > 0: slower than the cost model says
    below, above = UNPROFILED_SPREAD[profile_setting(model)]
    wp = (above if miss > 0 else below) * shrink
    wh = HOST_SPREAD[1 if miss > 0 else 0] * max(0.0, host_us)
    # Never more than the profiler's own spread (its 10th-90th percentile, wp): a measured step far from the
    # replay (a disturbed window, a stall among the timed steps) is not the profiler's cost (a review,
    # 2026-11-27: a 3 ms miss against 1.1 ms of cost taken out had undone three quarters of the cuts).
    part = min(wp, wp / (wp + wh) * abs(miss))
    return float(1.0 - math.copysign(part, miss) / shrink)


def replay_target(profiled: replay.Replay, measured_step: float, target: float) -> float:
    """The measured un-profiled step in the replay's terms: the profiled replay misses the profiled step by
    its own error, which stays a constant per step (it cancels out of every saving), not a factor."""
    return target + (profiled.median_us - measured_step)


TIME_SCALE = (0.5, 2.0)     # the host's pace stretching the replayed step beyond this: the report says the
                            # window is unlike the program's steps (rank.py)
