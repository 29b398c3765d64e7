"""The profiler's own cost: per recorded event, by profiler setting and machine type, fitted on our
recordings (sample_traces/matrix/calibration.json: the matrix's workloads profiled and un-profiled on
H100 and H200 machines, three recording runs each (three leases, so three hosts per GPU), torch 2.11,
model "loop+autograd"). Kernels are measured by CUPTI and cost nothing here.
Read by the profiler_overhead note and by the replay's de-inflation (estimate/deinflate.py).
"""
from __future__ import annotations

import numpy as np

from .model import TraceModel
from .pycalls import BUILTIN_CALL

# us per recorded event, by profiler setting ("stack": with_stack and/or record_shapes; "shapes", below) and by the
# machine it was fitted on (the host CPU sets the cost); "any" (both pooled) for a trace from elsewhere.
# Fitted (calibrate.py, weighted least squares) on the clean runs h100_cleanA/B and h200_cleanA/B: the
# whole matrix timed with CUPTI torn down after each profiler session. The runs before them timed all but
# their first variant with CUPTI still attached (slow where launch-bound), and the costs fitted to them
# were too low per op and too high per launch. One exception to the fit: with_stack on H100, whose fit
# (op 2.22, python 0.60, runtime 7.62) was pulled by the tiny compiled and fused steps (1/U weights) and
# left 106 of 164 clean traces' un-profiled steps within 15%; op 1.8, python 0.7, runtime 4.8 (a coarse
# grid around it, judged by that count) leave 128. "python" is a Python frame's cost; a C built-in's call
# costs BUILTIN_CALL_SHARE of it (the two were one class at 0.72, 0.70 and 0.83 until 2026-11-27).
PROFILER_COST_US = {
    "default": {"any": {"op": 2.32, "annotation": 2.32, "python": 0.00, "runtime": 3.05},
                "H100": {"op": 2.12, "annotation": 2.12, "python": 0.00, "runtime": 3.23},
                "H200": {"op": 2.56, "annotation": 2.56, "python": 0.00, "runtime": 2.81}},
    "stack": {"any": {"op": 2.22, "annotation": 2.22, "python": 1.08, "runtime": 5.94},
              "H100": {"op": 1.80, "annotation": 1.80, "python": 1.05, "runtime": 4.80},
              "H200": {"op": 2.13, "annotation": 2.13, "python": 1.25, "runtime": 4.45}},
}
# record_shapes without with_stack ("shapes": no Python frames recorded) sits between the two: per machine, each
# class at the default cost plus SHAPES_BLEND of the way to the stack cost. Chosen on one H200 host's fit set
# (sample_traces/matrix/h200_shapes1A; the README's "record_shapes alone" section) by the count of traces whose
# un-profiled step fell within 15%, over 0, 0.5 and 1 for each.
SHAPES_BLEND = {"op": 0.0, "runtime": 1.0}
PROFILER_COST_US["shapes"] = {
    m: {k: 0.0 if k == "python" else round(d[k] + SHAPES_BLEND["runtime" if k == "runtime" else "op"]
                                           * (PROFILER_COST_US["stack"][m][k] - d[k]), 3) for k in d}
    for m, d in PROFILER_COST_US["default"].items()}


# The fast end (10th percentile) of the cudaLaunchKernel calls in the traces those costs were fitted on
# (the calibration runs' traces with >= 20 launches; the profiler's callbacks are inside the call). A
# host whose profiled launches take longer is slower at the profiler's own work too: the per-event costs
# scale with this trace's figure over it (host_factor). The fast end, not the median: a launch with a
# large argument block (a multi-tensor apply) takes longer on any host, and how many of those a step
# makes is the program's, not the host's. On the first matrix runs (408 traces; the median and the 25th
# percentile were tried too, and did within 2% of it) the un-profiled estimate held 296 within 15% (275
# without the factor). The figures are the clean runs' (median over traces of each trace's 10th
# percentile): their hosts' launches were faster than the earlier runs' (H100 6.88 -> 4.10 us).
FIT_LAUNCH_US = {"default": {"any": 4.16, "H100": 4.10, "H200": 4.25},
                 "stack": {"any": 4.21, "H100": 4.17, "H200": 4.25}}
# (record_shapes leaves the launches alone: in one process, shapes-only traces' fast end was 0.96x the default
# traces', median over the fit set's 12 workloads)
FIT_LAUNCH_US["shapes"] = dict(FIT_LAUNCH_US["default"])
FIT_LAUNCH_QUANTILE = 10
# The same for the driver's cuLaunchKernel, which Inductor's Triton kernels launch through: a compiled
# step may make too few cudaLaunchKernel calls to tell (the fitted clean runs' compiled traces: 3.5-4.0 us,
# median 3.66; the slower hosts of *_clean2A 4.1-6.5).
FIT_CU_LAUNCH_US = 3.66
HOST_FACTOR_LIMITS = (0.5, 2.0)
HOST_FACTOR_MIN_LAUNCHES = 20
# The launch calls time CUPTI's callbacks; the ops' cost is the profiler's own enter/exit around each op
# (RecordFunction, and with with_stack the stack capture), which a host can pay more for without slower
# launches (a held-out H100 host: launches 1.2x, ops 1.9x the fitted hosts'). Its fast end shows where an
# op opens its first nested op: the 10th percentile of (first child's start - parent's start) over the
# trace (op_factor), against the fitted clean runs' median of it (here). With the op, annotation, Python
# and Inductor costs scaled by it and the runtime calls' by the launches, 529 of the fitted runs' 656
# traces and 461 of the held-out runs' 656 were within 15% of the measured un-profiled step (the launch
# ratio for every class: 515 and 449; 2026-11-26).
FIT_NESTED_US = {"default": {"any": 0.460, "H100": 0.452, "H200": 0.479},
                 "stack": {"any": 0.700, "H100": 0.681, "H200": 0.732}}
# Recording an op's input shapes delays its first nested op: 1.34x the default traces' offset in the same process
# (median over h200_shapes1A's fit set), so a shapes-only trace is read against the default reference times that.
SHAPES_NESTED_RATIO = 1.34
FIT_NESTED_US["shapes"] = {m: round(v * SHAPES_NESTED_RATIO, 3) for m, v in FIT_NESTED_US["default"].items()}
# The same for Python frames under with_stack (the fitted runs' median, H100 0.194, H200 0.189): used where a
# trace has too few nested ops (compiled steps). With it, 217 of the *_clean2 runs' 328 with_stack traces had
# their un-profiled step within 15% (206 without).
FIT_PY_NESTED_US = 0.192

# What a recorded Python call costs at the least un-profiled: pure-Python feature hashing (helpers, dict
# and string built-ins; sample_traces/matrix/workloads/calib_python_features.py) ran 7715 calls in 505 us
# (0.065 us a call, an Intel Xeon, CPython 3.11). A stretch's cut never leaves less than this per Python
# event that started in it: a with_stack trace of such code is 85-90% profiler, so a per-event cost a
# little high took the whole stretch out (the hashing, 0.6-1.5 ms un-profiled on the H100 hosts, went
# to nothing, and a CUDA graph looked like it removed it).
PY_CALL_FLOOR_US = 0.065


def host_factor(model: TraceModel) -> float:
    """How much more (or less) this trace's host pays per profiled event than the hosts the costs were
    fitted on: the fast end of its cudaLaunchKernel calls over theirs; 1 with fewer than 20 launches (a
    graph replay, a ROCm trace)."""
    return model.memo("host_factor", lambda: _host_factor(model))


def _host_factor(model: TraceModel) -> float:
    cpu = model.cpu
    if cpu.empty:
        return 1.0
    runtime = (cpu["kind"] == "runtime").to_numpy()
    setting, machine = cost_model(model)
    for name, fit in (("cudaLaunchKernel", FIT_LAUNCH_US[setting][machine]), ("cuLaunchKernel", FIT_CU_LAUNCH_US)):
        launch = runtime & model.cpu_names_where(lambda n, name=name: n == name)     # (per distinct name, not per row)
        if launch.sum() >= HOST_FACTOR_MIN_LAUNCHES:
            fast = float(np.percentile(cpu["dur"].to_numpy()[launch], FIT_LAUNCH_QUANTILE))
            return _clipped(fast / fit)
    return 1.0


def _clipped(ratio: float) -> float:
    lo, hi = HOST_FACTOR_LIMITS
    return float(min(hi, max(lo, ratio)))


def op_factor(model: TraceModel) -> float:
    """How much more (or less) this trace's host pays per recorded op than the fitted hosts: the fast end
    of the profiled op-to-first-nested-op offsets over theirs; 1 with fewer than NESTED_MIN of them."""
    return model.memo("op_factor", lambda: _op_factor(model))


def _op_factor(model: TraceModel) -> float:
    setting, machine = cost_model(model)
    fast, fit = nested_fast_us(model), FIT_NESTED_US[setting][machine]
    if fast is None:
        # Too few nested ops (a compiled step): with stacks, the Python frames' own nesting tells.
        fast, fit = nested_fast_us(model, "python"), FIT_PY_NESTED_US
    return 1.0 if fast is None else _clipped(fast / fit)


# Fewer nested ops are a few kinds of op (a compiled step's convolutions), whose own work sets the offset.
NESTED_MIN = 200
COMPILE_RANGES = r"Torch-Compiled Region|CompiledFxGraph|TorchDynamo|Pregraph bytecode|AOTDispatcher|CompiledFunction|^triton_"


def nested_fast_us(model: TraceModel, kind: str = "op") -> float | None:
    """The fast end (FIT_LAUNCH_QUANTILE) of `kind` events' offsets to their first nested event of that
    kind (us); None with fewer than NESTED_MIN of them."""
    cpu = model.cpu
    if cpu.empty:
        return None
    op = (cpu["kind"] == kind).to_numpy()
    # Not under torch.compile's ranges: they open their first child after Python of the program's own.
    opener = op & ~model.cpu_match(COMPILE_RANGES)
    parent = cpu["parent"].to_numpy()
    child = op & (parent >= 0)
    ts = cpu["ts"].to_numpy()
    par = parent[child]
    pos = cpu.index.get_indexer(par)
    ok = pos >= 0
    ok[ok] = opener[pos[ok]]
    if ok.sum() < NESTED_MIN:
        return None
    cts, par, pos = ts[child][ok], par[ok], pos[ok]
    order = np.argsort(cts, kind="stable")
    _, first = np.unique(par[order], return_index=True)     # each parent's earliest child
    k = order[first]
    return float(np.percentile(cts[k] - ts[pos[k]], FIT_LAUNCH_QUANTILE))


def cost_model(model: TraceModel) -> tuple[str, str]:
    """(setting, machine) of the per-event costs that fit this trace: "default", "stack" (Python frames
    recorded) or "shapes" (record_shapes alone)."""
    name = model.device_name() or ""
    machine = next((m for m in ("H100", "H200") if m in name), "any")
    return model.memo("cost_setting", lambda: _cost_setting(model)), machine


def profiler_options(model: TraceModel) -> str:
    """The recording options the trace shows, in words."""
    cpu = model.cpu
    on = []
    if len(cpu) and (cpu["kind"] == "python").any():
        on.append("with_stack")
    if model.meta.get("record_shapes") or _has_shapes(cpu):
        on.append("record_shapes")
    # (a review found vLLM's profile_memory and with_flops, in the file's header, left unnamed)
    if len(model.memory) or model.meta.get("profile_memory"):
        on.append("profile_memory")
    if model.meta.get("with_flops"):
        on.append("with_flops")
    return " + ".join(on) if on else "default options"


def profile_setting(model: TraceModel) -> str:
    """"stack" when the trace was recorded with with_stack and/or record_shapes, else "default" (the validation's
    two settings; cost_model tells record_shapes alone apart)."""
    return "default" if cost_model(model)[0] == "default" else "stack"


def _cost_setting(model: TraceModel) -> str:
    cpu = model.cpu
    if len(cpu) and (cpu["kind"] == "python").any():
        return "stack"
    return "shapes" if model.meta.get("record_shapes") or _has_shapes(cpu) else "default"


def _has_shapes(cpu) -> bool:
    """Some range carries Input Dims: stops at the first (a Series.map over a million rows took 40 ms)."""
    return "input_dims" in cpu and any(map(bool, cpu["input_dims"].to_numpy()))


def unprofiled_step_us(model: TraceModel, full_steps) -> float | None:
    """The un-profiled step: measured by `record` when it did, else each full step's CPU time less the
    profiler's cost of the events recorded in it (all threads), never below its GPU busy time;
    the median over full steps. Once per model and step set (profiler_overhead and fusion_candidates
    both read it)."""
    key = "unprofiled_step_us:" + ",".join(map(str, full_steps))
    return model.memo(key, lambda: _unprofiled_step_us(model, full_steps))


def _unprofiled_step_us(model: TraceModel, full_steps) -> float | None:
    measured = measured_unprofiled_us(model)
    if measured is not None:
        return measured
    st = model.steps
    st = st[st["step"].isin(full_steps)] if len(full_steps) else st
    cpu = model.cpu
    if st.empty or cpu.empty:
        return None
    inflation, _calls = recorded_in(model, st["cpu_start"].to_numpy(), st["cpu_end"].to_numpy())
    cpu_step = (st["cpu_end"] - st["cpu_start"]).to_numpy()
    return float(np.median(np.maximum(st["gpu_busy"].to_numpy(), np.maximum(cpu_step, st["dur"].to_numpy())
                                      - inflation)))


# Inductor's generated code wraps each Triton kernel launch in a profiler range (named after the kernel,
# triton_*) only while a profiler runs, building the range's arguments in Python: the cost beyond an op's,
# per range, on a host as fast as the fitted ones; it scales with the host's launch factor (host_factor:
# this is the launcher's own CPU work, and a compiled step has too few nested ops for op_factor).
# Default options: the clean runs' un-profiled step's excess per range in the four compiled workloads'
# default traces is 7.8-9.9 us on hosts with fitted-speed launches, 14-59 on the slower *_clean2A hosts
# (cuLaunchKernel 1.1-1.8x slower). 13 us times op_factor (1 on those traces: too few nested ops) had
# left the compiled steps' un-profiled estimate 15-25% low on the fast hosts. With stacks the launcher's
# Python is traced too: 17 us, chosen on the whole matrix (13, 17, 22: 1,001, 1,004, 1,002 clean pair
# rows within 25%).
INDUCTOR_RANGE_US = {"default": 9.0, "stack": 17.0, "shapes": 9.0}   # (shapes: no launcher Python traced; not measured)
# with_stack records a C built-in's call (<built-in function len>, <built-in method get of dict object>) for
# less than a Python frame: on the clean runs' CPU-bound with_stack traces whose calls are mostly built-ins
# (a pure-Python tokenizer, 21-38 thousand calls a step; 11 H100 and 4 H200 traces), the profiled step less
# the measured un-profiled one and the other events' costs left 0.31-0.46 us per call (op_factor taken out,
# median 0.37) where one cost for both classes charged 0.70-0.83, and took the tokenizing out of the
# un-profiled step (estimated 5.3-6.9 ms, measured 8.8-10.5). A least-squares fit of the two classes over
# all 1,024 CPU-bound with_stack traces (weights 1/U) put a frame at 1.10 (H100) and 1.14 (H200) and a
# built-in at 0.31 and 0.40; on the fitted runs *_cleanA/B alone, 1.11 and 1.40 with 0.22 and 0.19. A frame at
# 1.5x the one-class cost with a built-in at 0.35 of it (0.37 us on an H100) matches the tokenizers;
# on the matrix's pair rows it put the top finding right on 14 more with_stack rows (all tokenizers, none
# lost) and the un-profiled step within 15% on 11 more traces (sample_traces/matrix/README, 2026-11-27).
BUILTIN_CALL_SHARE = 0.35
INDUCTOR_RANGE = r"^triton_"
# COMPILED_PYTHON_NOTE: on the clean runs' 67 compiled programs recorded both ways on one host, the with_stack
# step less the default one, less the modelled difference of the other classes, per Python frame (a built-in at
# BUILTIN_CALL_SHARE) over the fitted frame cost tracked the host's launch factor (correlation 0.53, median ratio
# 1.05) and not op_factor (0.11; median 1.18, 90th percentile 2.6). Scaled by the launch factor, 9 more of the
# 801 clean with_stack traces' un-profiled steps fell within 15% and 8 more pair rows within 25%; scaling every
# trace's frames so lost 3 traces and 1 row, and the compiled steps' ops too lost 4 and 2 (2026-12-01).


# CUPTI records an activity for every kernel node of a replayed CUDA graph, inside cudaGraphLaunch: 1-3 us
# per node in the matrix's graph traces (reduce-overhead and torch.cuda.graph steps of 28-59 kernels on
# H100 and H200), on top of the call's own cost.
GRAPH_NODE_US = 2.0
GRAPH_LAUNCH = r"GraphLaunch"


def graph_node_cost_us(model: TraceModel) -> np.ndarray:
    """Per cpu row: the profiler's cost of the kernel nodes a graph launch replayed (0 elsewhere)."""
    return model.memo("graph_node_cost_us", lambda: _graph_node_cost_us(model))


def _graph_node_cost_us(model: TraceModel) -> np.ndarray:
    cpu, gpu = model.cpu, model.gpu
    out = np.zeros(len(cpu))
    if cpu.empty or gpu.empty:
        return out
    launches = (cpu["kind"] == "runtime").to_numpy() & model.cpu_match(GRAPH_LAUNCH)
    if not launches.any():
        return out
    lr = gpu["launcher"].to_numpy()
    lr = lr[(lr >= 0) & (gpu["kind"] == "kernel").to_numpy()]
    nodes = np.bincount(lr, minlength=len(cpu))
    return np.where(launches, GRAPH_NODE_US * nodes, 0.0)


def event_classes(model: TraceModel) -> list[tuple[str, np.ndarray, float]]:
    """(class, cpu rows in it, us per event) for every event class the profiler costs the CPU; step
    markers are in none (they are the windows costs are summed over). Inductor's ranges are ops too:
    their class is the extra on top of the op's cost. Read by the de-inflation and the un-profiled step:
    computed once per trace."""
    return model.memo("event_classes", lambda: _event_classes(model))


def _event_classes(model: TraceModel) -> list[tuple[str, np.ndarray, float]]:
    cpu = model.cpu
    setting, machine = cost_model(model)
    coef = PROFILER_COST_US[setting][machine]
    f = {"runtime": host_factor(model)}
    g = op_factor(model)
    step = cpu["is_step"].to_numpy()
    out = [(k, (cpu["kind"] == k).to_numpy() & ~step, f.get(k, g) * coef[k]) for k in ("op", "annotation", "runtime")]
    # A call of a C built-in (len, dict.get, list.append) costs the tracer less than a Python frame.
    py = (cpu["kind"] == "python").to_numpy() & ~step
    builtin = py & model.cpu_match(BUILTIN_CALL)
    inductor = (cpu["kind"] == "op").to_numpy() & model.cpu_match(INDUCTOR_RANGE)
    compiled = bool(inductor.any())
    # In a compiled step the Python frames scale with the host's launches, not with op_factor: the ops left
    # outside torch.compile's ranges are a few kinds (the optimizer's, the loss's) whose own work sets the offsets
    # op_factor reads (COMPILED_PYTHON_NOTE).
    gp = f["runtime"] if compiled else g
    out += [("python", py & ~builtin, gp * coef["python"]),
            ("python_c", builtin, gp * coef["python"] * BUILTIN_CALL_SHARE)]
    if compiled:
        out.append(("inductor", inductor, f["runtime"] * INDUCTOR_RANGE_US[setting]))
    return out


def event_cost_us(model: TraceModel) -> np.ndarray:
    """Per cpu row: what recording it cost the CPU (us), by the cost model that fits the trace (computed
    once per trace: read-only)."""
    return model.memo("event_cost_us", lambda: _event_cost_us(model))


def _event_cost_us(model: TraceModel) -> np.ndarray:
    cost = np.zeros(len(model.cpu))
    for _k, rows, us in event_classes(model):
        cost[rows] += us
    return cost + graph_node_cost_us(model)


def recorded_in(model: TraceModel, starts: np.ndarray, ends: np.ndarray,
                thread: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per window [start, end): what recording the events that start in it cost the CPU (us,
    event_cost_us, and profile_memory's allocation events), and how many of them are Python calls; on one
    thread's events or on all."""
    cpu = model.cpu
    rows = np.arange(len(cpu)) if thread is None else model.thread_rows().get(thread, np.zeros(0, np.int64))
    ts = cpu["ts"].to_numpy()
    order = rows[np.argsort(ts[rows], kind="stable")]
    cost = np.concatenate(([0.0], np.cumsum(event_cost_us(model)[order])))
    calls = np.concatenate(([0.0], np.cumsum((cpu["kind"] == "python").to_numpy()[order].astype(float))))
    t = ts[order]
    a, b = np.searchsorted(t, starts, "left"), np.searchsorted(t, ends, "left")
    m = model.memory["ts"].to_numpy() if thread is None else memory_starts(model).get(thread, np.zeros(0))
    in_mem = np.searchsorted(m, ends, "left") - np.searchsorted(m, starts, "left")
    return cost[b] - cost[a] + memory_event_us(model) * in_mem, calls[b] - calls[a]


# profile_memory records an instant event per allocation and free, on the thread that made it, from the
# caching allocator's callback: an allocating op (aten::empty, aten::empty_strided, one event each) ran
# 0.08 us longer with it than without (median over 38 such ops' median times, default options) and 0.35 us
# with with_stack and record_shapes, in the same process on one H200 host (sample_traces/matrix/h200_mem1A,
# its fit set; the README's profile_memory section). At the step level the recording sessions' own spread
# (+-20% profiled on that host) hides a cost this small. Scaled with the host's op cost (op_factor).
MEMORY_EVENT_US = {"default": 0.08, "stack": 0.35}


def memory_event_us(model: TraceModel) -> float:
    """What one profile_memory allocation event cost the CPU on this trace's host (us)."""
    return MEMORY_EVENT_US[profile_setting(model)] * op_factor(model)


def memory_starts(model: TraceModel) -> dict[str, np.ndarray]:
    """profile_memory's allocation events' starts per thread, ascending (empty without them)."""
    def compute():
        mem = model.memory
        if mem.empty:
            return {}
        return {th: g["ts"].to_numpy() for th, g in mem.groupby("thread", sort=True)}
    return model.memo("memory_starts", compute)


def measured_unprofiled_us(model: TraceModel) -> float | None:
    """The un-profiled step time `traceinsight record` measured for this trace, when it did."""
    rec = model.meta.get("traceinsight_record") or {}
    v = rec.get("unprofiled_step_ms")
    return float(v) * 1000 if isinstance(v, (int, float)) and v > 0 else None
