"""The un-profiled program: take the profiler's own CPU cost out of the replay.

Every recorded op, annotation, Python frame and runtime call costs the profiler time on the thread
that ran it; kernels are measured by CUPTI and are not inflated. The per-event costs below were fitted
on our own recordings (sample_traces/matrix/calibration.json: the same 25 workloads profiled and
un-profiled on an H100 and an H200, torch 2.11, model "loop+autograd", both GPUs pooled). Each CPU
edge of the replay (the time between two runtime calls on a thread) loses the cost of the events that
started in it, dispatch first, then host work; each runtime call loses its own recording cost (the
replay applies the cuts: replay.apply(..., cuts=profiler_cuts(...))).
"""
from __future__ import annotations

import numpy as np

from ..trace.model import TraceModel
from . import replay

# us per recorded event, by profiler setting ("stack": with_stack and/or record_shapes) and by the
# machine it was fitted on (the host CPU sets the cost: the H100 machines' CPU is slower than the
# H200 machines'); "any" (both pooled) for a trace from elsewhere.
PROFILER_COST_US = {
    "default": {"any": {"op": 1.21, "annotation": 1.21, "python": 0.0, "runtime": 5.69},
                "H100": {"op": 1.16, "annotation": 1.16, "python": 0.0, "runtime": 9.73},
                "H200": {"op": 1.24, "annotation": 1.24, "python": 0.0, "runtime": 3.68}},
    "stack": {"any": {"op": 2.24, "annotation": 2.24, "python": 0.99, "runtime": 5.88},
              "H100": {"op": 2.95, "annotation": 2.95, "python": 2.04, "runtime": 5.56},
              "H200": {"op": 1.53, "annotation": 1.53, "python": 0.67, "runtime": 5.98}},
}


def cost_model(model: TraceModel) -> tuple[str, str]:
    """(setting, machine) of the per-event costs that fit this trace."""
    name = model.device_name() or ""
    machine = next((m for m in ("H100", "H200") if m in name), "any")
    return profile_setting(model), machine


def profile_setting(model: TraceModel) -> str:
    cpu = model.cpu
    py = bool((cpu["kind"] == "python").any()) if len(cpu) else False
    shapes = bool(model.meta.get("record_shapes")) or (
        len(cpu) and bool(cpu["input_dims"].map(bool).any()) if "input_dims" in cpu else False)
    return "stack" if py or shapes else "default"


def profiler_cuts(model: TraceModel, c: replay.Compiled, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Per replay node: the profiler cost in the CPU edge that ends at it, and in the call itself (us)."""
    setting, machine = cost_model(model)
    coef = PROFILER_COST_US[setting][machine]
    n = len(c.nodes)
    edge, call = np.zeros(n), np.zeros(n)
    cpu = model.cpu
    if cpu.empty or not n:
        return edge, call
    kinds = cpu["kind"].to_numpy()
    starts = {}
    for th, rows in cpu.groupby("thread", sort=False).indices.items():
        per = {}
        for k in ("op", "annotation", "python", "runtime"):
            sel = rows[(kinds[rows] == k) & ~cpu["is_step"].to_numpy()[rows]]
            per[k] = np.sort(cpu["ts"].to_numpy()[sel])
        starts[th] = per
    # While the loop thread waits for a helper thread (inside backward()), its wait shrinks with the
    # helper's profiler cost: the loop thread's edges count every thread's events.
    loop = {c.thread[i] for i in c.markers.values()}
    for i in c.cpu_idx:
        if c.rkind[i] in ("marker", "") and c.nodes[i][0] != "step":
            continue
        if c.nodes[i][0] == "cpu":
            call[i] = coef["runtime"] * scale
        p = c.cpred[i]
        if p < 0 or c.thread[p] != c.thread[i]:
            continue
        a, b = c.end[p], c.ts[i]
        if b <= a:
            continue
        threads = starts if c.thread[i] in loop else {c.thread[i]: starts.get(c.thread[i], {})}
        total = 0.0
        for th, per in threads.items():
            for k, v in per.items():
                if k == "runtime" and th == c.thread[i]:
                    continue  # the thread's own calls are cut in `call`
                total += coef[k] * (np.searchsorted(v, b, "right") - np.searchsorted(v, a, "right"))
        edge[i] = scale * total
    return edge, call


def unprofiled_step_us(model: TraceModel, full_steps) -> float | None:
    """The un-profiled step: measured by `record` when it did, else each full step's CPU time less the
    profiler's cost of the events recorded in it (all threads), never below its GPU busy time;
    the median over full steps."""
    measured = measured_unprofiled_us(model)
    if measured is not None:
        return measured
    st = model.steps
    st = st[st["step"].isin(full_steps)] if len(full_steps) else st
    cpu = model.cpu
    if st.empty or cpu.empty:
        return None
    setting, machine = cost_model(model)
    coef = PROFILER_COST_US[setting][machine]
    kinds = cpu["kind"].to_numpy()
    cost = np.select([kinds == "op", kinds == "annotation", kinds == "python", kinds == "runtime"],
                     [coef["op"], coef["annotation"], coef["python"], coef["runtime"]], 0.0)
    cost = np.where(cpu["is_step"].to_numpy(), 0.0, cost)
    order = np.argsort(cpu["ts"].to_numpy(), kind="stable")
    ts, csum = cpu["ts"].to_numpy()[order], np.concatenate([[0.0], np.cumsum(cost[order])])
    lo = np.searchsorted(ts, st["cpu_start"].to_numpy(), "left")
    hi = np.searchsorted(ts, st["cpu_end"].to_numpy(), "left")
    inflation = csum[hi] - csum[lo]
    cpu_step = (st["cpu_end"] - st["cpu_start"]).to_numpy()
    return float(np.median(np.maximum(st["gpu_busy"].to_numpy(), np.maximum(cpu_step, st["dur"].to_numpy())
                                      - inflation)))


def measured_unprofiled_us(model: TraceModel) -> float | None:
    """The un-profiled step time `traceinsight record` measured for this trace, when it did."""
    rec = model.meta.get("traceinsight_record") or {}
    v = rec.get("unprofiled_step_ms")
    return float(v) * 1000 if isinstance(v, (int, float)) and v > 0 else None


def unprofiled_method(model: TraceModel) -> str:
    if measured_unprofiled_us(model) is not None:
        return "measured by traceinsight record (steps outside the profiler's window); the cost model is scaled to it"
    setting, machine = cost_model(model)
    where = f"{machine} machines" if machine != "any" else "H100 and H200 machines, pooled"
    return (f"estimate: the profiler's per-event CPU cost ({setting} settings, calibrated on {where}) "
            "taken out of the replay")


def calibration_scale(model: TraceModel, c: replay.Compiled, profiled: replay.Replay, measured_step: float,
                      target: float | None) -> float:
    """The factor on the per-event cuts that makes the de-inflated replay land on the un-profiled step."""
    if target is None or not profiled.step_us:
        return 1.0
    raw = replay.simulate(replay.apply(c, (), cuts=profiler_cuts(model, c))).median_us
    shrink = profiled.median_us - raw
    want = profiled.median_us * (target / measured_step) if measured_step else target
    if shrink <= 0:
        return 1.0
    return float(min(3.0, max(0.0, (profiled.median_us - want) / shrink)))
