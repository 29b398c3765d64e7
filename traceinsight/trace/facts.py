"""Derived facts about a trace that several layers read: which calls block the CPU on the GPU,
the typical launch latency, which kernels are collectives. Computed once per model (TraceModel.memo).

The sync causality lives here once: a blocking call "explains" GPU work that ended within
BLOCK_TOL_US of the call's end (attribution uses it to blame gaps, the graph to draw sync edges).
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .capture import capture_ranges as capture_rows
from .kernel_names import COLLECTIVE
from .model import TraceModel
from .profiler_cost import GRAPH_LAUNCH, event_cost_us
from .steps import STEP_SOURCES, interval_of, merged_intervals, starts_inside, step_at

BLOCK_TOL_US = 50.0
# Copies from pageable memory at least this large are a bandwidth problem, smaller ones a sync.
PAGEABLE_MIN_BYTES = 64 * 1024


def is_collective(model: TraceModel) -> np.ndarray:
    """Boolean per gpu row: a collective (NCCL / RCCL) kernel."""
    return model.gpu_match(COLLECTIVE, re.I)


def host_copies(model: TraceModel) -> np.ndarray:
    """Boolean per gpu row: a copy to or from the host. A device-to-device copy is the GPU's own work, like a
    kernel (fusion_candidates, dependency_wait)."""
    return (model.gpu["kind"] == "memcpy").to_numpy() & ~model.gpu_match("DtoD|Device -> Device")


def launch_latency_us(model: TraceModel) -> float:
    """Typical launch call -> GPU start delay, from activities whose stream was idle at launch.

    Queued work (stream still busy with anything, linked or not) says nothing about launch latency.
    Bounded to [20, 100] us: beyond that a delay is a dependency, not the cost of a launch.
    """
    return model.memo("launch_latency_us", lambda: _launch_latency_us(model))


def _launch_latency_us(model: TraceModel) -> float:
    g = model.gpu
    if g.empty:
        return 20.0
    prev_end = g.sort_values("ts", kind="stable").groupby(["device", "stream"])["end"].shift(1)
    prev_end = prev_end.reindex(g.index).to_numpy()
    linked = g["launcher"].to_numpy() >= 0
    if model.cpu.empty or not linked.any():     # (GPU events alone: nothing launched them in the trace)
        return 20.0
    lt = np.where(linked, model.cpu["ts"].to_numpy()[np.maximum(g["launcher"].to_numpy(), 0)], np.nan)
    delay = g["ts"].to_numpy() - lt
    idle = linked & (prev_end < lt) & (delay >= 0)
    med = float(np.median(delay[idle])) if idle.any() else 10.0
    return float(min(100.0, max(20.0, 2.0 * med)))


# Pageable device-to-host copies are a copy problem when they take at least this share of the run.
DTOH_COPY_SHARE = 0.1


def _dtoh_pageable_share(model: TraceModel, copies: pd.DataFrame, which: np.ndarray) -> float:
    """GPU time of the given device-to-host copies over the steps' time (the trace's span without steps)."""
    t = float(copies["dur"].fillna(0.0).to_numpy()[which].sum())
    if not t:
        return 0.0
    st = model.steps
    span = float(st["dur"].sum()) if len(st) else float(model.gpu["end"].max() - model.gpu["ts"].min())
    return t / span if span > 0 else 1.0


def blocking_calls(model: TraceModel) -> pd.DataFrame:
    """Runtime calls that block the CPU until GPU work finishes, with what kind of block it was.

    Attribution, sync_stall and the graph all read it: computed once per model, treat as read-only.
    """
    return model.memo("blocking_calls", lambda: _blocking_calls(model))


def _blocking_calls(model: TraceModel) -> pd.DataFrame:
    cpu, gpu = model.cpu, model.gpu
    rt = cpu[cpu["kind"] == "runtime"]
    kind = pd.Series("", index=rt.index, dtype=object)
    kind[rt["rkind"] == "sync"] = "sync"
    # Copies: what the correlated GPU memcpy says about direction and host memory.
    copies = gpu[(gpu["kind"] == "memcpy") & (gpu["launcher"] >= 0)]
    by_launcher = copies.drop_duplicates("launcher").set_index("launcher")
    mc = rt[rt["rkind"] == "memcpy"]
    if len(mc):
        d = by_launcher.reindex(mc.index)
        dtoh = (d["copy_dir"] == "DtoH").to_numpy()
        pageable = d["pageable"].fillna(False).to_numpy().astype(bool)
        plain = ~mc["name"].str.contains("Async").to_numpy()  # cudaMemcpy: synchronous by definition
        # A device-to-host copy waits for the GPU queue whatever the host memory: that is a sync
        # (.item(), .cpu()). Host-to-device pageable copies block while staging: pageable_memcpy.
        big = d["bytes"].fillna(0.0).to_numpy() >= PAGEABLE_MIN_BYTES
        # Device-to-host copies that take a small share of the run (.cpu() of a batch's outputs right
        # after the forward) are syncs with a copy at their end: the wait for the queue is the cost.
        copying = ~dtoh | (_dtoh_pageable_share(model, d, pageable & big & dtoh) >= DTOH_COPY_SHARE)
        # One cause per span: a large pageable copy is pageable_memcpy's (pinning it is the fix), a
        # small device-to-host one (.item(), .cpu() of a scalar) is a sync like any other.
        k = np.where(pageable & big & copying, "pageable",
                     np.where(dtoh | plain, "copy_sync", np.where(pageable, "pageable", "")))
        kind[mc.index] = k
    out = rt.loc[kind[kind != ""].index, ["thread", "ts", "end", "name", "parent"]].copy()
    out["block_kind"] = kind[kind != ""]
    return out.sort_values("end")


def waiting_calls(model: TraceModel) -> np.ndarray:
    """Per cpu row: a runtime call in which its thread may wait for the GPU (a sync, a copy). Coarser than
    blocking_calls (which asks whether it did): time spent in one is no CPU work of the caller's."""
    cpu = model.cpu
    return (cpu["kind"] == "runtime").to_numpy() & ((cpu["rkind"] == "sync") | (cpu["rkind"] == "memcpy")).to_numpy()


def launched_before_window(model: TraceModel) -> np.ndarray:
    """Per GPU row: work with no launch call in a trace that records launches, starting before the first
    step ends: launched before the profiling window (warm-up steps still draining into the first step)."""
    g, st = model.gpu, model.steps
    if g.empty or st.empty or not (model.cpu["kind"] == "runtime").any():
        return np.zeros(len(g), dtype=bool)
    return (g["launcher"] < 0).to_numpy() & (g["ts"] < st.iloc[0]["end"]).to_numpy()


def model_has_cpu_ops(model: TraceModel) -> bool:
    """Whether the trace recorded what the CPU did (ops, annotations other than steps, Python), not
    only runtime calls: without them host-side causes cannot be told apart."""
    return model.memo("has_cpu_ops", lambda: _has_cpu_ops(model))


def _has_cpu_ops(model: TraceModel) -> bool:
    cpu = model.cpu
    if cpu.empty:
        return False
    ops = ((cpu["kind"] == "op") | (cpu["kind"] == "python")).to_numpy() | (
        (cpu["kind"] == "annotation").to_numpy() & ~cpu["is_step"].to_numpy())
    return bool(ops.any())


# cudaThreadExchangeStreamCaptureMode is not here: the caching allocator calls it in every eager run.
_CAPTURE_CALL = re.compile(r"StreamBeginCapture|StreamEndCapture|GraphInstantiate", re.I)
TRITON_KERNEL = re.compile(r"^triton_|triton_poi|triton_red|triton_per|triton_tem")


GRAPHED = 0.5      # share of kernel time already replayed from graphs: the step is graphed
COMPILED = 0.2     # share of kernels that are Triton's: the step is compiled


def program_facts(model: TraceModel) -> dict:
    """What the program already does, read from the trace: graph capture, graph replay, compilation."""
    return model.memo("program_facts", lambda: _program_facts(model))


def program_kind(p: dict) -> str:
    """"capture", "graphed", "compiled" or "eager", from program_facts: what the advice on launches and
    fusion, and the report's program note, start from."""
    if p["capture_calls"] or p["capture_ranges"]:
        return "capture"
    if p["graphed_share"] >= GRAPHED:
        return "graphed"
    if p["kernels"] and p["triton_kernels"] / p["kernels"] >= COMPILED:
        return "compiled"
    return "eager"


def _program_facts(model: TraceModel) -> dict:
    cpu, gpu = model.cpu, model.gpu
    rt = (cpu["kind"] == "runtime").to_numpy()
    capture_calls = int((rt & model.cpu_match(_CAPTURE_CALL.pattern, re.I)).sum()) if len(cpu) else 0
    ranges = ((cpu["kind"] == "op") | (cpu["kind"] == "annotation")).to_numpy() if len(cpu) else np.zeros(0, dtype=bool)
    capture_ranges = int(capture_rows(model).sum()) if len(cpu) else 0
    graph_launch = rt & model.cpu_match(GRAPH_LAUNCH) if len(cpu) else np.zeros(0, dtype=bool)
    launch_rows = (cpu["rkind"] == "launch").to_numpy() if len(cpu) else np.zeros(0, dtype=bool)
    launches = int(launch_rows.sum())
    kernels = gpu[gpu["kind"] == "kernel"] if len(gpu) else gpu
    # Launches no GPU activity came from: made while a graph was being captured (or lost by the profiler).
    ran = np.zeros(len(cpu), dtype=bool)
    if len(gpu):
        lr = gpu["launcher"].to_numpy()
        ran[lr[lr >= 0]] = True
    silent = int((launch_rows & ~ran).sum())
    busy = float(kernels["dur"].sum()) if len(kernels) else 0.0
    graphed_us, from_graph = 0.0, np.zeros(0, dtype=bool)
    if len(kernels) and graph_launch.any():
        launcher = kernels["launcher"].to_numpy()
        from_graph = graph_launched(model)[(gpu["kind"] == "kernel").to_numpy()]
        graphed_us = float(kernels["dur"].to_numpy()[from_graph].sum())
        # A share of the kernels launched in the trace: a replay launched before the window (no launch call
        # here) is not eager work (a DDP step replayed whole read 86% graphed for 100%).
        busy = float(kernels["dur"].to_numpy()[launcher >= 0].sum()) or busy
    triton = int(model.gpu_match(TRITON_KERNEL.pattern).sum()) if len(gpu) else 0
    # torch.compile(mode="reduce-overhead")'s CUDA-graph tree looks up its graphs on every call.
    trees = int((ranges & model.cpu_match(GRAPH_TREE_CALL)).sum()) if len(cpu) else 0
    return {
        "capture_calls": capture_calls,
        "capture_ranges": capture_ranges,
        "graph_launches": int(graph_launch.sum()) if len(cpu) else 0,
        "launch_calls": launches,
        "launches_that_ran_nothing": silent,
        "kernels": int(len(kernels)),
        "graph_kernels": int(from_graph.sum()),
        "graphed_share": busy and graphed_us / busy,
        "triton_kernels": triton,
        "graph_tree_calls": trees,
    }


GRAPH_TREE_CALL = r"^cudagraphify\.get_container$"


def graph_launched(model: TraceModel) -> np.ndarray:
    """Per GPU row: launched by a graph launch call (work of a graph replay)."""
    cpu, lr = model.cpu, model.gpu["launcher"].to_numpy()
    if cpu.empty:
        return np.zeros(len(lr), dtype=bool)
    graph = (cpu["kind"] == "runtime").to_numpy() & model.cpu_match(GRAPH_LAUNCH)
    return (lr >= 0) & graph[np.maximum(lr, 0)]


# DistributedDataParallel's range around each forward (its buffer broadcast and timing syncs run inside it).
DDP_FORWARD = "DistributedDataParallel.forward"
# torch.compile's profiler ranges, named once. A Dynamo frame (graph breaks split a step into several):
COMPILE_REGION = r"^Torch-Compiled Region"
# The wrapper around each compiled graph call: Dynamo's cache lookup (the guards) and the region's own
# Python (pregraph bytecode, AOTAutograd's runtime wrapper), outside the call of the graph itself.
COMPILE_WRAPPER = r"^(TorchDynamo Cache Lookup|Torch-Compiled Region)"
COMPILED_CALL = r"^## Call CompiledFxGraph"
# The ranges a compiled graph runs in: the forward's region and AOTAutograd's compiled backward.
COMPILED_RANGE = r"^(Torch-Compiled Region|CompiledFunction)"
# All of torch.compile's machinery: the wrapper and the ranges the graphs run in.
COMPILE_MACHINERY = r"^(TorchDynamo Cache Lookup|Torch-Compiled Region|CompiledFunction)"


def in_compiled_region(model: TraceModel) -> np.ndarray:
    """Per cpu row: it starts inside a torch.compile region (forward or compiled backward) on its
    thread. mode="reduce-overhead" graphs what runs there; eager work outside stays eager."""
    return model.memo("in_compiled_region", lambda: _in_compiled_region(model))


def _in_compiled_region(model: TraceModel) -> np.ndarray:
    cpu = model.cpu
    out = np.zeros(len(cpu), dtype=bool)
    if cpu.empty:
        return out
    ranges = ((cpu["kind"] == "op") | (cpu["kind"] == "annotation")).to_numpy() & model.cpu_match(COMPILED_RANGE)
    if not ranges.any():
        return out
    return starts_inside(cpu["ts"].to_numpy(), cpu["end"].to_numpy(), ranges, model.thread_rows().values())


def compiled_wrapper_us(model: TraceModel, steps) -> float | None:
    """CPU per step in torch.compile's wrappers outside the compiled graph calls, less the profiler's
    own cost of the events recorded there (median over `steps`). mode="reduce-overhead" keeps this
    Python: only the graph call becomes a graph replay. None when the trace does not mark the graph
    calls (older torch), so the wrapper cannot be told from the graph."""
    cpu = model.cpu
    if cpu.empty:
        return None
    ranges = ((cpu["kind"] == "op") | (cpu["kind"] == "annotation")).to_numpy()
    wrap = ranges & model.cpu_match(COMPILE_WRAPPER)
    call = ranges & model.cpu_match(COMPILED_CALL)
    if not wrap.any() or not call.any():
        return None
    st = model.steps[model.steps["step"].isin(list(steps))] if len(steps) else model.steps
    if st.empty:
        return None
    ts, end = cpu["ts"].to_numpy(), cpu["end"].to_numpy()
    cost = event_cost_us(model)
    per_step = np.zeros(len(st))
    lo, hi = st["cpu_start"].to_numpy(), st["cpu_end"].to_numpy()
    for rows in model.thread_rows().values():
        w, c = rows[wrap[rows]], rows[call[rows]]
        if not len(w):
            continue
        ws, we = merged_intervals(ts[w], end[w])
        cs, ce = merged_intervals(ts[c], end[c])
        t = ts[rows]
        in_w = (interval_of(t, ws, we) >= 0) & (interval_of(t, cs, ce) < 0)
        for k in range(len(st)):
            sel_w = (ws >= lo[k]) & (ws < hi[k])
            sel_c = (cs >= lo[k]) & (cs < hi[k])
            sel_e = in_w & (t >= lo[k]) & (t < hi[k])
            per_step[k] += ((we - ws)[sel_w].sum() - (ce - cs)[sel_c].sum()
                            - cost[rows][sel_e].sum())
    return float(max(0.0, np.median(per_step)))


# The training loop waiting for a batch from DataLoader worker processes (num_workers > 0).
WORKER_WAIT = r"_MultiProcessingDataLoaderIter\.__next__"


def worker_wait_us(model: TraceModel) -> float:
    """Mean per full step of the time the step's thread waits in a multi-process DataLoader's __next__
    (0 without one). The workers run outside the profiler: while the loop waits for them, the profiler's
    cost on the loop's own work is absorbed by a longer wait, not saved. A mean, not a median: workers
    take turns, so the loop waits long in some steps and not at all in others (two workers: every other
    step), and the mean is what sets the pace."""
    return model.memo("worker_wait_us", lambda: _worker_wait_us(model))


def worker_fed(model: TraceModel) -> bool:
    """The loop takes its batches from a multi-process DataLoader (its __next__ is in the trace)."""
    return bool(_worker_waits(model).any())


def _worker_waits(model: TraceModel) -> np.ndarray:
    """Per cpu row: a multi-process DataLoader's __next__ range."""
    return (model.cpu["kind"] == "annotation").to_numpy() & model.cpu_match(WORKER_WAIT)


def _full_steps(model: TraceModel):
    """The steps that are not partial (warm-up, cut off)."""
    st = model.steps
    return st[~st["partial"]] if len(st) else st


def _worker_wait_us(model: TraceModel) -> float:
    cpu = model.cpu
    hit = _worker_waits(model)
    full = _full_steps(model)
    if not hit.any() or full.empty:
        return 0.0
    w = cpu[hit]
    per = [float((np.minimum(w["end"], s.cpu_end) - np.maximum(w["ts"], s.cpu_start)).clip(lower=0).sum())
           for s in full.itertuples()]
    return float(np.mean(per))


def mean_step_us(model: TraceModel) -> float:
    """Mean duration of the full steps (the pace a loop that waits for DataLoader workers keeps)."""
    full = _full_steps(model)
    return float(full["dur"].mean()) if len(full) else float("nan")


RISING_CORR = 0.8     # rank correlation of step time with step order
RISING_RATIO = 1.2    # last step over first
# A rise does not fall back: no step below this share of the slowest before it (3.2, 3.3, 7.6, 25.9 and
# 11.6 ms around the same GPU work is a host disturbed for a while, erratic_steps, not a program that has
# not settled).
RISING_HOLDS = 0.75


# A last step whose jump over the one before is more than this share of the whole rise is one long step, not a
# trend: the steps before it must rise by themselves (GPT-2's 59.9, 61.8, 65.0, 63.6 and 75.9 ms, the last a 27 ms
# optimizer step against 15-20 ms, read "had not reached a steady state"; its un-profiled run was steady).
LAST_JUMP_SHARE = 0.5


def rising_steps(model: TraceModel) -> str | None:
    """"13.0 -> 19.0 ms over 5 steps" when the full steps' durations climb steadily, else None."""
    d = _full_steps(model)["dur"].to_numpy()
    if not _rising(d):
        return None
    if len(d) >= 2 and d[-1] - d[-2] > LAST_JUMP_SHARE * (d[-1] - d[0]) and not _rising(d[:-1]):
        return None
    return f"{d[0] / 1000:.1f} -> {d[-1] / 1000:.1f} ms over {len(d)} steps"


def _rising(d: np.ndarray) -> bool:
    """Step durations in order that rise through the window: by RISING_RATIO first to last, never falling back below
    RISING_HOLDS of the slowest before, in order by rank (RISING_CORR)."""
    if len(d) < 4 or d[0] <= 0 or d[-1] < RISING_RATIO * d[0]:
        return False
    if (d[1:] < RISING_HOLDS * np.maximum.accumulate(d)[:-1]).any():
        return False
    r = np.argsort(np.argsort(d))
    return float(np.corrcoef(np.arange(len(d)), r)[0, 1]) >= RISING_CORR


ERRATIC_RATIO = 1.5   # the second-slowest full step over the fastest (one slow step leaves the median alone)
BUSY_STABLE = 1.1     # the GPU's work per step, most over least...
BUSY_JITTER_US = 50.0  # ...give or take this much (97 and 107 us of kernels are the same work)
QUIET_OF_FASTEST = 1.25
# A disturbed host slows everything it runs, the runtime's own calls too; a step with more Python work does
# not (its launches take what they take): the slow steps' median launch call must be this much slower.
DISTURBED_LAUNCH = 1.3


def _launches_slowed(model: TraceModel, full, quiet: set) -> bool:
    """Whether the slow full steps' launch calls ran DISTURBED_LAUNCH slower (median) than the quiet ones';
    True when the trace has too few launches to tell."""
    cpu = model.cpu
    launch = cpu[((cpu["kind"] == "runtime") & (cpu["rkind"] == "launch")).to_numpy()]
    if len(launch) < 20:
        return True
    of = step_at(full.sort_values("cpu_start"), launch["ts"].to_numpy(), "cpu_start", "cpu_end")
    ok = of >= 0
    dur = launch["dur"].to_numpy()
    q = np.isin(of, list(quiet))
    slow = ok & ~q
    if q.sum() < 5 or slow.sum() < 5:
        return True
    return float(np.median(dur[slow])) >= DISTURBED_LAUNCH * float(np.median(dur[q]))


def erratic_steps(model: TraceModel) -> dict | None:
    """When at least two full steps run far slower than the fastest though the GPU's work per step is the
    same, the host was disturbed in the profiled window (a disturbance only adds time): {"span": "10.7-64.5 ms
    over 5 steps", "quiet": the full steps within QUIET_OF_FASTEST of the fastest}. None for steadily rising
    steps and for loops that wait for DataLoader workers (their steps vary for reasons of their own)."""
    return model.memo("erratic_steps", lambda: _erratic_steps(model))


def _erratic_steps(model: TraceModel) -> dict | None:
    full = _full_steps(model)
    d = full["dur"].to_numpy()
    busy = full["gpu_busy"].to_numpy()
    s = np.sort(d)
    # Without GPU work there is no constant work to hold the steps against, and no estimate to protect.
    if len(s) < 4 or s[0] <= 0 or busy.max() <= 0 or s[-2] < ERRATIC_RATIO * s[0] or busy.max() > BUSY_STABLE * max(busy.min(), 1.0) + BUSY_JITTER_US:
        return None
    if rising_steps(model) or worker_wait_us(model):
        return None
    quiet = full["step"].to_numpy()[d <= QUIET_OF_FASTEST * s[0]]
    if not _launches_slowed(model, full, set(quiet.tolist())):
        return None
    return {"span": f"{s[0] / 1000:.1f}-{s[-1] / 1000:.1f} ms over {len(s)} steps", "quiet": [int(x) for x in quiet]}


def no_complete_step(model: TraceModel) -> bool:
    """Step markers, but every step partial or warm-up (a step cut at the last event): no steady state."""
    return model.step_source in STEP_SOURCES and len(model.steps) > 0 and bool(model.steps["partial"].all())


QUEUE_TOL_US = 5.0   # GPU work ending this close after a blocking call starts was not waited for


def queued_until(model, ts: np.ndarray) -> np.ndarray:
    """Per time: when the GPU work launched before it ends (the queue a blocking call starting then
    waits for; -inf when nothing was launched)."""
    g = model.gpu[model.gpu["launcher"] >= 0]
    if g.empty:
        return np.full(len(ts), -np.inf)
    lts = model.cpu["ts"].to_numpy()[g["launcher"].to_numpy()]
    order = np.argsort(lts, kind="stable")
    ends = np.maximum.accumulate(g["end"].to_numpy()[order])
    k = np.searchsorted(lts[order], ts, side="left")
    return np.where(k > 0, ends[np.maximum(k - 1, 0)], -np.inf)
