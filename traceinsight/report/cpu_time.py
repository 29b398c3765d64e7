"""Where the CPU time of a step goes: the ops by self and total CPU time, and on the step's thread the
split between time inside torch ops (dispatch and CPU kernels) and time outside any op (Python and
other host code). The picture of a CPU-only run, and of the host side of a GPU run.

`cpu_time(analysis)` returns the document's `cpu_time` block (None when the trace has no CPU ops):

    {"scope": "...", "steps": 3, "thread": "pid/tid", "step_ms": 52.1,
     "in_ops_ms": 40.2, "in_ops_pct": 77.2, "outside_ops_ms": 11.9, "outside_ops_pct": 22.8,
     "waiting_for_gpu_ms": 0.4 (of the outside time: runtime calls waiting for the GPU),
     "waiting_for_backward_ms": 3.1 (of the outside time: autograd's thread running the backward),
     "loading_ms": 30.2, "loading_pct": 58.0 (the loop fetching batches: a DataLoader's __next__, in and out of ops),
     "python_frames": false,
     "top_ops": [{"op", "calls_per_step", "self_ms_per_step", "total_ms_per_step", "self_pct"}, ...]}

Per-step numbers are medians over the full steps (the split) or means (the op table, like the kernel
table). `self` is an op's time minus the time of the ranges nested in it; `total` includes them.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace.coverage import gpu_work_without_gpu_events
from ..trace.dims import dims_text
from ..trace.facts import waiting_calls
from ..trace.steps import cum_lengths, merged_intervals, overlap_many, step_at
from .numbers import num

TOP_OPS = 15
BACKWARD_OP = r"^autograd::engine::evaluate_function"   # an op autograd's engine thread runs
BACKWARD_RANGE = r"(?i)\bbackward\b"                     # a user's range around loss.backward()
LOADER = r"^enumerate\(DataLoader\)"                      # the loop fetching a batch (DataLoader.__next__)
HOST_COLLECTIVE = r"^(gloo|mpi|ucc):"                     # a collective the host itself runs


def _step_windows(a) -> pd.DataFrame:
    """The steps as the CPU ran them (their ProfilerStep ranges), not as the report times them: where the GPU
    lags, a step's window follows the GPU (trace/steps.py) and can land on another step's CPU work, or on
    one final synchronize (a straggler's waiting rank: 0 ms inside ops, all of it 'waiting')."""
    fs = a.full_steps if len(a.full_steps) else a.per_step
    if "cpu_start" in fs:
        fs = fs.assign(start=fs["cpu_start"], end=fs["cpu_end"], dur=fs["cpu_end"] - fs["cpu_start"])
    return fs


def cpu_time(a, limit: int = TOP_OPS) -> dict | None:
    return a.model.memo(f"cpu_time:{limit}", lambda: _cpu_time(a, limit))


def _cpu_time(a, limit: int) -> dict | None:
    cpu = a.model.cpu
    steps = _step_windows(a).sort_values("start")
    host_coll = a.model.cpu_match(HOST_COLLECTIVE) if len(cpu) else np.zeros(0, dtype=bool)
    if cpu.empty or steps.empty or not ((cpu["kind"] == "op").any() or host_coll.any()):
        return None
    n = len(steps)
    ts, dur = cpu["ts"].to_numpy(), cpu["dur"].to_numpy()
    is_op = (cpu["kind"] == "op").to_numpy()
    step_of = step_at(steps, ts)
    inside = step_of >= 0
    # Self time: an op's duration less the ranges nested directly in it.
    parent = cpu["parent"].to_numpy()
    child = np.zeros(len(cpu))
    has = (parent >= 0) & inside
    np.add.at(child, parent[has], dur[has])
    self_t = np.clip(dur - child, 0.0, None)
    ops = inside & is_op
    if not ops.any() and not (host_coll & inside).any():
        return None
    rank, names = a.model.name_ranks("cpu")
    # An op called inside another call of itself (aten::copy_ in aten::copy_) is in its total once: the
    # outer call's total already holds it (summed twice, a 474 ms step showed 926 ms of copy_).
    nested = np.zeros(len(cpu), dtype=bool)
    # (only the ops the table counts walk up; the walk goes on only for the rows still climbing and not yet
    # found nested: traces nest some 70 levels deep, and most rows stop after a few)
    idx = np.flatnonzero(inside & is_op & (parent >= 0))
    anc = parent[idx]
    while len(idx):
        hit = rank[anc] == rank[idx]
        nested[idx[hit]] = True
        anc = parent[anc]
        go = ~hit & (anc >= 0)
        idx, anc = idx[go], anc[go]
    df = pd.DataFrame({"op": rank[ops], "total": np.where(nested[ops], 0.0, dur[ops]), "own": self_t[ops]})
    agg = df.groupby("op").agg(calls=("total", "size"), total=("total", "sum"), own=("own", "sum"))
    wall = float(steps["dur"].sum()) or 1.0
    agg = agg.sort_values(["own", "total"], ascending=False).head(limit)
    shapes = _main_shapes(cpu, np.flatnonzero(ops), rank[ops], self_t[ops], set(agg.index))
    top = [{"op": str(names[op])[:300], "calls_per_step": round(r["calls"] / n, 2),
            "self_ms_per_step": round(r["own"] / n / 1000, 4), "total_ms_per_step": round(r["total"] / n / 1000, 4),
            "self_pct": round(100 * r["own"] / wall, 1)} | ({"input_dims": shapes[op]} if shapes.get(op) else {})
           for op, r in agg.iterrows()]

    # The step's thread: the one with the step annotations, else the one with the most op time.
    thread = cpu["thread"].to_numpy()
    marks = cpu.loc[cpu["is_step"].to_numpy() & inside, "thread"]
    main = marks.mode().iloc[0] if len(marks) else \
        pd.Series(dur[ops], index=thread[ops]).groupby(level=0).sum().idxmax()
    # Time inside ops per step: the union of the thread's op ranges within the step's window (an op under an
    # annotation inside another op is no new time: a compiled region's Triton ops).
    on = np.flatnonzero(ops & (thread == main))
    a_, b_ = steps["start"].to_numpy(), steps["end"].to_numpy()
    in_ops = _covered(merged_intervals(ts[on], ts[on] + dur[on]), a_, b_)
    step_med = float(steps["dur"].median())
    in_med = float(np.median(in_ops))
    out_med = max(step_med - in_med, 0.0)
    # Of the time outside ops, the runtime calls in which the thread waits for the GPU (a synchronize, a
    # blocking copy) are not host code: said apart (a compiled step's whole outside is one
    # hipDeviceSynchronize). What the waits add to the ops' union is their part outside any op.
    waits = np.flatnonzero((thread == main) & waiting_calls(a.model))
    both = np.concatenate([on, waits])
    held = _covered(merged_intervals(ts[both], ts[both] + dur[both]), a_, b_)
    waiting = min(float(np.median(held - in_ops)), out_med)
    # Waits nested in ops (a blocking copy in aten::copy_): inside ops, said apart (a review read SGLang's 463 ms
    # blocked in hipMemcpyWithStream as "inside torch ops" beside "0.0 ms waiting for the GPU").
    # (|ops & waits| = |ops| + |waits| - |ops | waits|)
    in_waits = in_ops + _covered(merged_intervals(ts[waits], ts[waits] + dur[waits]), a_, b_) - held
    waiting_in_ops = min(max(float(np.median(in_waits)), 0.0), in_med)
    # Where the thread records nothing (before its first event, after its last) the window's time is untraced,
    # not Python: vLLM's replay window ran 16.7 ms past the thread's last event, read as host code.
    # (its step markers are no events of its own: a CPU-only gloo rank's step thread recorded nothing inside its
    # 210 ms step, read as "100% outside any op (Python ...)" while two gloo threads ran its all_reduce)
    mine = np.flatnonzero((thread == main) & ~cpu["is_step"].to_numpy())
    if len(mine):
        first, last = float(ts[mine].min()), float((ts[mine] + dur[mine]).max())
        untraced = np.minimum(np.clip(first - a_, 0.0, None) + np.clip(b_ - np.maximum(last, a_), 0.0, None), b_ - a_)
    else:
        untraced = b_ - a_
    untraced = min(float(np.median(untraced)), max(0.0, out_med - waiting))
    # While loss.backward() runs, the step's thread waits for autograd's engine thread, outside any op of its
    # own: that is the backward's time, not the loop's Python (a review read "71% outside any op (Python and
    # other host code)" on a step whose backward ran 980 ops on the other thread).
    engine = np.flatnonzero(inside & is_op & (thread != main) & a.model.cpu_match(BACKWARD_OP))
    # Where a GPU program's autograd thread is not in the trace, the step thread's own backward range (a
    # record_function named so) holds the wait: HTA's rank_non_gpu spent 33 of its 47 ms "outside any op"
    # inside '## backward ##', with one thread recorded. (A CPU-only program runs its backward on this thread.)
    unrecorded = not len(engine) and (a.model.has_gpu or bool(gpu_work_without_gpu_events(a.model)))
    if unrecorded:
        engine = np.flatnonzero(inside & (thread == main) & (cpu["kind"] == "annotation").to_numpy()
                                & a.model.cpu_match(BACKWARD_RANGE))
    every = np.concatenate([both, engine])
    backward = _covered(merged_intervals(ts[every], ts[every] + dur[every]), a_, b_) - held
    backward = min(float(np.median(backward)), max(0.0, out_med - waiting - untraced))
    # Collectives the host runs (gloo's on its own threads, a CPU-only job's): a review found 173 of a 210 ms
    # step in gloo:all_reduce on two other threads, which the split above, of the step's thread, cannot show.
    coll = np.flatnonzero(inside & host_coll)
    coll_ms = float(np.median(_covered(merged_intervals(ts[coll], ts[coll] + dur[coll]), a_, b_))) if len(coll) else 0.0
    coll_names = list(dict.fromkeys(str(x) for x in cpu["name"].to_numpy()[coll]))[:3]
    # The loop fetching its batches (a DataLoader's __next__, with num_workers=0 the loading itself): ops and
    # Python alike, so said apart from the split (a review's CPU-only run spent 6.5 of 6.9 ms there, and the
    # report had said only "98% outside ops").
    fetch = np.flatnonzero(inside & (thread == main) & a.model.cpu_match(LOADER))
    load = float(np.median(_covered(merged_intervals(ts[fetch], ts[fetch] + dur[fetch]), a_, b_))) if len(fetch) else 0.0
    return {
        "scope": f"the CPU ranges of {n} full step(s)" if len(a.full_steps) else f"the CPU ranges of {n} step(s)",
        "steps": n,
        "thread": str(main),
        "step_ms": num(step_med / 1000),
        "in_ops_ms": num(in_med / 1000),
        "in_ops_pct": num(100 * in_med / step_med, 1) if step_med else None,
        "outside_ops_ms": num(out_med / 1000),
        "outside_ops_pct": num(100 * out_med / step_med, 1) if step_med else None,
        "waiting_for_gpu_ms": num(waiting / 1000),
        "waiting_for_gpu_in_ops_ms": num(waiting_in_ops / 1000),
        "untraced_ms": num(untraced / 1000),
        "waiting_for_backward_ms": num(backward / 1000),
        "backward_thread_recorded": not (unrecorded and backward > 0),
        "loading_ms": num(load / 1000),
        "loading_pct": num(100 * load / step_med, 1) if step_med else None,
        "python_frames": bool((cpu["kind"] == "python").any()),
        "collectives_ms": num(coll_ms / 1000),
        "collectives": coll_names,
        "collectives_on_other_threads": bool(len(coll)) and not (thread[coll] == main).any(),
        "top_ops": top,
    }


def _main_shapes(cpu: pd.DataFrame, rows: np.ndarray, op: np.ndarray, own: np.ndarray, wanted: set) -> dict:
    """Per op (name rank) of the table, the input shapes it spent most of its self time on (record_shapes): what
    diff compares where a CPU-only run has no GPU op table (a user's batch 32 -> 512 had read "like for like")."""
    if "input_dims" not in cpu or not len(rows):
        return {}
    keep = np.isin(op, list(wanted))
    codes, raw = pd.factorize(cpu["input_dims"].to_numpy()[rows[keep]])      # (each distinct shape read once)
    text = np.array([dims_text(x) for x in raw] + [""], dtype=object)
    df = pd.DataFrame({"op": op[keep], "dims": text[codes], "own": own[keep]})
    df = df[df["dims"] != ""]
    best = df.groupby(["op", "dims"])["own"].sum().reset_index().sort_values("own").drop_duplicates("op", keep="last")
    return {o: d[:200] for o, d in zip(best["op"], best["dims"])}


def _covered(union: tuple[np.ndarray, np.ndarray], a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """How much of each window [a, b) the disjoint sorted intervals cover."""
    s, e = union
    return overlap_many(s, e, cum_lengths(s, e), a, b)
