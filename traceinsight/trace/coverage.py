"""What a trace covers and what it does not: start-up in the window (runtime calls that run long while the
GPU idles, a kernel's first launch that loads its module), stretches cut out of the file, GPU work the CPU
drove that the profiler did not record. The report's limits, the verdict and the analyses read them.
"""
from __future__ import annotations

import re

import numpy as np

from .compiles import compile_us_in
from .capture import capture_spans
from .facts import COMPILED_RANGE, waiting_calls
from .model import TraceModel
from .steps import STEP_SOURCES, USER_RANGES, merged_intervals, step_at


# CPU ops that only a GPU program runs: NCCL collectives, cuDNN / cuBLAS ops, the GPU-only fused optimizers.
GPU_ONLY_OPS = r"^nccl:|cudnn|cublas|^aten::_?cuda|Fused(Adam|LAMB|SGD|Lamb)\b"


def gpu_work_without_gpu_events(model: TraceModel) -> list[str]:
    """A trace with no GPU activity whose CPU still drove a GPU: the names that show it (launch calls, or
    ops only a GPU program runs, up to 4), [] otherwise. HTA's rank_non_gpu trace: nccl:all_to_all and
    FusedAdam under DDP, no runtime call or kernel recorded, had been called a CPU-only program."""
    cpu = model.cpu
    if model.has_gpu or cpu.empty:
        return []
    hit = ((cpu["kind"] == "runtime") & (cpu["rkind"] == "launch")).to_numpy() | (
        cpu["kind"].isin(("op", "annotation")).to_numpy() & model.cpu_match(GPU_ONLY_OPS))
    return list(dict.fromkeys(str(n) for n in cpu.loc[hit, "name"]))[:4]


def gpu_events_cut_off(model: TraceModel) -> str | None:
    """The GPU a cut-off file's header names where the part read holds no GPU activity: Kineto writes the
    CPU's events first, so a file cut short loses its GPU side (a user's truncated H200 trace was called a
    CPU-only run); None otherwise."""
    if model.has_gpu or not model.meta.get("cut_off") or not model.devices:
        return None
    return model.device_name() or "a GPU"


# Consecutive runtime calls (any thread) whose correlation ids jump by this much, with this long between
# them, had runtime calls between them that the file no longer holds: it was filtered or cut. Kineto's own
# filtering skips at most ~110 ids (our 4,000 traces); HTA's a100_cuda_event_sync_multi_stream skips 1,323
# over an 18.5 ms stretch with nothing recorded, which had been read as untraced Python.
MISSING_IDS = 500
MISSING_MIN_US = 1_000.0


def missing_event_spans(model: TraceModel) -> list[tuple[float, float, int]]:
    """(start, end, correlation ids skipped) of each stretch where the file lacks the runtime calls the
    program made (see MISSING_IDS)."""
    return model.memo("missing_event_spans", lambda: _missing_event_spans(model))


def _missing_event_spans(model: TraceModel) -> list[tuple[float, float, int]]:
    cpu = model.cpu
    rt = cpu[(cpu["kind"] == "runtime").to_numpy() & (cpu["correlation"].to_numpy() > 0)]
    if len(rt) < 2:
        return []
    rt = rt.sort_values("ts", kind="stable")
    c, ts, end = rt["correlation"].to_numpy(), rt["ts"].to_numpy(), rt["end"].to_numpy()
    jump = c[1:] - c[:-1]
    quiet = ts[1:] - np.maximum.accumulate(end)[:-1]
    k = np.flatnonzero((jump >= MISSING_IDS) & (quiet >= MISSING_MIN_US))
    a, b = np.maximum.accumulate(end)[k], ts[k + 1]
    inside = _compiling(model, a, b)
    return [(float(x), float(y), int(jump[i])) for x, y, i, c in zip(a, b, k, inside) if not c]


def unwritten_records(model: TraceModel) -> int | None:
    """CUPTI records the profiler read and did not write, by its own log (trace/load.py's kineto_log): what it
    processed, less the runtime calls it skips as noise, less the runtime calls and GPU activities in the file.
    None where the file has no such log. Kineto reads driver-API records and writes only kernel launches of them;
    HTA's a100_cuda_event_sync_multi_stream says 1,510 processed and 55 skipped, and holds 47: ~1,400 dropped,
    which covers the 1,323 ids of its one quiet stretch between ops."""
    log = model.meta.get("kineto_log") or {}
    if "records_processed" not in log:
        return None
    written = int((model.cpu["kind"] == "runtime").sum()) + len(model.gpu)
    return max(0, int(log["records_processed"]) - int(log.get("blocklisted_runtime", 0)) - written)


def after_startup(model: TraceModel, a: float) -> bool:
    """A stretch that opens as a start-up call returns: the driver still loading (a cold conv net's first
    launches of 2-11 ms were each followed by 1.5-17 ms with ~570 ids used and nothing written, on an H200)."""
    return any(abs(e - a) <= 5.0 for _n, _s, e in startup_spans(model))


def enclosing_op(model: TraceModel, a: float, b: float) -> str | None:
    """The innermost recorded op that spans [a, b], if one does: inside it, the ids went to its library's own
    calls (CUPTI numbers driver-API calls too, and Kineto writes only the runtime's), not to a cut in the file.
    a100_alexnet's four stretches, 494 ms and 4,791 ids, all inside aten::cudnn_convolution's first run (cuDNN
    loading its kernels), had been called a filtered or cut file."""
    cpu = model.cpu
    op = cpu[(cpu["kind"] == "op").to_numpy() & (cpu["ts"].to_numpy() <= a) & (cpu["end"].to_numpy() >= b)]
    return None if op.empty else str(op["name"].iloc[int(np.argmax(op["depth"].to_numpy()))])


def _compiling(model: TraceModel, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per stretch: inside torch.compile's compiler, or inside a compiled region's call that mostly compiled
    (a new graph's first run, where Inductor autotunes its kernels). Both use correlation ids they record no
    call for (the autotuner's benchmark launches): such a stretch lacks nothing. (Static shapes recompiled
    every step on an H200: 20 stretches, 15,566 ids, 7 in the compiler and 13 in first runs.)"""
    out = compile_us_in(model, a, b) >= 0.5 * (b - a)
    if out.all() or not len(a):
        return out
    cpu = model.cpu
    r = cpu[model.cpu_match(COMPILED_RANGE)]
    if r.empty:
        return out
    rs, re_ = r["ts"].to_numpy(dtype=float), r["end"].to_numpy(dtype=float)
    mostly = compile_us_in(model, rs, re_) >= 0.5 * (re_ - rs)
    rs, re_ = rs[mostly], re_[mostly]
    for j in np.flatnonzero(~out):
        out[j] = bool(((rs <= a[j]) & (re_ >= b[j])).any())
    return out


# A runtime call that does not wait on the GPU (not a synchronize or a copy: those can wait on another
# stream's event or another process; an allocation's implicit sync has nothing to wait for while the GPU
# idles) and takes this long while the GPU sits idle is the driver's own one-time work: context creation,
# lazy module loading, first large allocations. Steady steps do not have them (a100_alexnet:
# cudaDeviceGetStreamPriorityRange 29.9 s, cudaFree 6.0 s, one cudaLaunchKernel 3.1 s, four cudaMalloc
# 0.26-0.76 s, in a 43 s window of 66 ms GPU work; SGLang's 463 ms hipMemcpyWithStream behind a stream
# event is a wait, not start-up).
STARTUP_CALL_US = 100_000.0
# A kernel launch this long while the GPU idles is the first launch of its module (lazy loading: the
# runtime loads the code then), not a launch's cost: steady launches take microseconds, and one held up by
# a full launch queue has a busy GPU. (HTA's MI250 trace: one hipLaunchKernel of 6.5 ms in a 9.3 ms step,
# which had been read as launch-bound.)
STARTUP_LAUNCH_US = 1_000.0
ALLOCATION_CALLS = r"^(cuda|hip)(Free|FreeHost|Malloc\w*|HostAlloc|HostRegister)$"
STARTUP_GPU_SHARE = 0.1


def startup_calls(model: TraceModel) -> list[tuple[str, float, int]]:
    """(name, us, calls) of the runtime calls that took STARTUP_CALL_US or more while the GPU was busy under
    STARTUP_GPU_SHARE of the call, summed by name, longest first."""
    return model.memo("startup_calls", lambda: _startup_by_name(startup_spans(model)))


def startup_spans(model: TraceModel) -> list[tuple[str, float, float]]:
    """(name, start, end) of each such call."""
    return model.memo("startup_spans", lambda: _startup_spans(model))


def driver_allocates(model: TraceModel, op: str) -> bool:
    """The name is the driver's allocation call itself, or some such call (cudaMalloc, cudaFree, ...) runs under
    an op of this name."""
    if re.match(ALLOCATION_CALLS, op):
        return True
    rows = np.flatnonzero((model.cpu["kind"] == "runtime").to_numpy() & model.cpu_match(ALLOCATION_CALLS))
    top = model.cpu["top_op"].to_numpy()[rows]
    return bool(len(rows)) and op in set(model.cpu["name"].to_numpy()[top[top >= 0]].tolist())


def one_time_spans(model: TraceModel) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends), merged, of what a process pays once: start-up calls and CUDA-graph recording."""
    return model.memo("one_time_spans", lambda: _one_time_spans(model))


def _one_time_spans(model: TraceModel) -> tuple[np.ndarray, np.ndarray]:
    a, b = capture_spans(model)
    sa, sb = startup_intervals(model)
    return merged_intervals(np.concatenate([a, sa]), np.concatenate([b, sb]))


def startup_intervals(model: TraceModel) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends), merged, of start-up: the start-up calls and the lazily loaded first launches with the work
    of the op before each (cuda_startup's idle, attribution.py)."""
    start = startup_spans(model)
    fa, fb = first_load_spans(model)
    return merged_intervals(np.concatenate([[s for _n, s, _e in start], fa]),
                            np.concatenate([[e for _n, _s, e in start], fb]))


# CUPTI writes a kernel's lazy loading ("Lazy Function Loading", no thread of its own) inside the launch call
# that loads it or up to this long before it.
LAZY_TO_LAUNCH_US = 200.0


def first_load_spans(model: TraceModel) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of each first launch that CUDA loaded lazily, with the op's work before it: from where the
    op that makes the launch began (or the thread's previous launch ended, if later) to the launch's end. A library
    picking its kernel for a new shape and CUDA loading the code: paid once per process. (A B200 eager trace: four
    aten::addmm / aten::mm sat 1.4-2.4 ms each before such a launch, all read as launch overhead; steady launches
    there take 6 us.)"""
    return model.memo("first_load_spans", lambda: _first_load_spans(model))


def _first_load_spans(model: TraceModel) -> tuple[np.ndarray, np.ndarray]:
    at = np.asarray(model.meta.get("lazy_loads_us") or (), dtype=float)
    cpu = model.cpu
    rows = np.flatnonzero((cpu["kind"] == "runtime").to_numpy() & (cpu["rkind"] == "launch").to_numpy()) \
        if len(at) and len(cpu) else np.zeros(0, dtype=np.int64)
    if not len(rows):
        return np.zeros(0), np.zeros(0)
    ts, end, parent = cpu["ts"].to_numpy(), cpu["end"].to_numpy(), cpu["parent"].to_numpy()
    rows = rows[np.argsort(ts[rows], kind="stable")]
    # Each launch's previous launch on its own thread (-1: none), by one sort on (thread, time).
    code = np.unique(cpu["thread"].to_numpy()[rows], return_inverse=True)[1]
    by = np.lexsort((np.arange(len(rows)), code))
    prev = np.full(len(rows), -1)
    same = code[by[1:]] == code[by[:-1]]
    prev[by[1:][same]] = rows[by[:-1][same]]
    out_a, out_b = [], []
    for t in at.tolist():
        # The launch that holds the load, else the first one to start just after it.
        k = int(np.searchsorted(ts[rows], t, "right")) - 1
        if k < 0 or end[rows[k]] < t:
            k += 1
            if k >= len(rows) or ts[rows[k]] - t > LAZY_TO_LAUNCH_US:
                continue
        r = rows[k]
        a = max(ts[parent[r]] if parent[r] >= 0 else ts[r], end[prev[k]] if prev[k] >= 0 else -np.inf)
        out_a.append(min(a, ts[r]))
        out_b.append(end[r])
    return merged_intervals(np.array(out_a), np.array(out_b)) if out_a else (np.zeros(0), np.zeros(0))


def seconds_or_ms(us: float) -> str:
    """42.12 s, 6.5 ms: a start-up takes seconds or milliseconds (a report had said 0.01 s and 7 ms)."""
    return f"{us / 1e6:.2f} s" if us >= 1e6 else f"{us / 1000:.1f} ms"


def _startup_by_name(spans: list[tuple[str, float, float]]) -> list[tuple[str, float, int]]:
    total: dict[str, list] = {}
    for name, a, b in spans:
        t = total.setdefault(name, [0.0, 0])
        t[0] += b - a
        t[1] += 1
    return sorted(((n, us, k) for n, (us, k) in total.items()), key=lambda x: -x[1])


def _startup_spans(model: TraceModel) -> list[tuple[str, float, float]]:
    cpu = model.cpu
    if cpu.empty:
        return []
    waits = waiting_calls(model) & ~model.cpu_match(ALLOCATION_CALLS)
    dur = cpu["dur"].to_numpy()
    g = model.gpu
    long = cpu[(cpu["kind"] == "runtime").to_numpy() & ~waits
               & ((dur >= STARTUP_CALL_US) | ((dur >= STARTUP_LAUNCH_US) & _first_launches(model)))]
    if long.empty:
        return []
    starts, ends = merged_intervals(g["ts"].to_numpy(), g["end"].to_numpy()) if len(g) else (np.zeros(0), np.zeros(0))
    out = []
    # Steps that are the program's own ranges leave stretches out (its start-up, a warm-up): only calls in them count.
    st = model.steps if model.step_source == USER_RANGES else None
    for name, a, b in zip(long["name"], long["ts"].to_numpy(), long["end"].to_numpy()):
        if st is not None and not ((st["start"].to_numpy() < b) & (st["end"].to_numpy() > a)).any():
            continue
        busy = float(np.clip(np.minimum(ends, b) - np.maximum(starts, a), 0.0, None).sum())
        if busy < STARTUP_GPU_SHARE * (b - a):
            out.append((str(name), float(a), float(b)))
    return out


def _first_launches(model: TraceModel) -> np.ndarray:
    """Per CPU row: a launch call in the run's first two steps (ProfilerStep#0 or #1) whose kernel the trace
    shows no earlier launch of. Only a kernel's first launch can load its module, and only early in a run
    can that take long; a long launch elsewhere is the thread held up (a DataLoader loop's main thread,
    descheduled for 3-14 ms inside cudaLaunchKernel, first launches in the window included: 40 of our
    traces)."""
    cpu, g = model.cpu, model.gpu
    out = np.zeros(len(cpu), dtype=bool)
    linked = g[g["launcher"].to_numpy() >= 0]
    if linked.empty or model.step_source not in STEP_SOURCES or model.steps.empty:
        return out
    first = linked.sort_values("ts", kind="stable").drop_duplicates("name")["launcher"].to_numpy()
    out[first] = True
    early = step_at(model.steps, cpu["ts"].to_numpy())
    return out & (cpu["rkind"] == "launch").to_numpy() & (early >= 0) & (early <= 1)


def lazy_loads_in_full_steps(model: TraceModel) -> int:
    """How many of CUPTI's lazy-loading records fall inside the full steps (what the medians read): a window that
    is not warm."""
    at = np.asarray(model.meta.get("lazy_loads_us") or (), dtype=float)
    steps = model.steps
    if not len(at) or steps.empty:
        return 0
    full = steps[~steps["partial"]]
    return int(sum(((at >= a) & (at < b)).sum() for a, b in zip(full["start"], full["end"])))
