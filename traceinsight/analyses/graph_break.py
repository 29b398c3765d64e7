"""graph_break: a sync inside torch.compile'd code, which breaks its graph (for sync_stall's estimate).

Dynamo cannot trace a value read on the host (`.item()`, `if tensor:`, `.tolist()`): it ends the graph
there, runs the read eagerly, and goes on in a new frame of its own. In the trace that is a blocking call
inside a `Torch-Compiled Region` but outside the compiled graph calls (`## Call CompiledFxGraph`), with
further regions nested in it. Inside a loop (a model's blocks) Dynamo falls back to running the rest of the
caller eagerly and compiles each callee apart: the thirty-first held-out set's guard after the third of six
blocks ran eight forward regions and seven backward nodes a step where the fixed model ran one of each.

Each region costs the CPU its own guards, AOTAutograd wrapper and autograd node, and the eager Python between
regions runs too; with the value kept on the GPU the regions merge into one. What goes, per step: the CPU time
from the end of the first region nested in the breaking one to the end of the last, outside the graph calls
(which launch the kernels: they stay), and in the backward the compiled backward nodes but the first, outside
their graph calls, where every compiled forward of the step ran inside a breaking region.
"""
from __future__ import annotations

import numpy as np

from ..trace.facts import COMPILE_REGION, COMPILED_CALL
from ..trace.steps import interval_of, merged_intervals
from .base import Context

COMPILED_FORWARD = r"^CompiledFunction$"
COMPILED_BACKWARD = r"^autograd::engine::evaluate_function: CompiledFunctionBackward"


def merge_spans(ctx: Context, blockers: list[int]) -> tuple[tuple[tuple[str, float, float], ...], dict] | None:
    """(spans (thread, start, end) of CPU time the merged graph does not spend, evidence), or None when no
    blocking call breaks a compiled graph."""
    m = ctx.model
    cpu = m.cpu
    if cpu.empty or not blockers:
        return None
    ranges = cpu["kind"].isin(("op", "annotation")).to_numpy()
    region = ranges & m.cpu_match(COMPILE_REGION)
    call = ranges & m.cpu_match(COMPILED_CALL)
    if not region.any() or not call.any():
        return None
    ts, end = cpu["ts"].to_numpy(), cpu["end"].to_numpy()
    thread = cpu["thread"].to_numpy()
    rows = np.asarray(blockers, dtype=np.int64)
    spans: list[tuple[str, float, float]] = []
    outers: list[tuple[str, float, float]] = []      # the breaking regions, outermost
    for th in np.unique(thread[rows]):
        on = thread == th
        r = np.flatnonzero(region & on)
        c = np.flatnonzero(call & on)
        if not len(r):
            continue
        cs, ce = merged_intervals(ts[c], end[c])
        t = ts[rows[thread[rows] == th]]
        t = t[interval_of(t, cs, ce) < 0]               # outside every graph call
        # The outermost region each such call runs in (regions nest: a resumed frame inside its caller's).
        outer_s, outer_e = merged_intervals(ts[r], end[r])
        for k in np.unique(interval_of(t, outer_s, outer_e)):
            if k < 0 or ctx.cpu_step_of(np.array([outer_s[k]]))[0] not in ctx.full_steps:
                continue
            inner = r[(ts[r] > outer_s[k]) & (end[r] <= outer_e[k])]
            if not len(inner):
                continue
            inner = inner[np.argsort(ts[inner], kind="stable")]
            # (The first nested region's wrapper stays: the merged graph has one.)
            spans += _outside(str(th), float(end[inner[0]]), float(end[inner].max()), cs, ce)
            outers.append((str(th), float(outer_s[k]), float(outer_e[k])))
    if not spans:
        return None
    # The compiled backward nodes merge in a step whose compiled forwards all ran inside breaking regions (then no
    # other compiled code owns one of them).
    forward = np.flatnonzero(ranges & m.cpu_match(COMPILED_FORWARD))
    inside = np.zeros(len(forward), dtype=bool)
    for th, lo, hi in outers:
        inside |= (thread[forward] == th) & (ts[forward] >= lo) & (ts[forward] < hi)
    fwd_steps = ctx.cpu_step_of(ts[forward])
    backward = np.flatnonzero(ranges & m.cpu_match(COMPILED_BACKWARD))
    bwd_steps = ctx.cpu_step_of(ts[backward])
    merged_backward = 0
    for s in ctx.full_steps:
        sel = fwd_steps == s
        if not sel.any() or not inside[sel].all():
            continue
        b = backward[bwd_steps == s]
        for i in b[np.argsort(ts[b], kind="stable")][1:]:
            on = np.flatnonzero(call & (thread == thread[i]))
            cs, ce = merged_intervals(ts[on], end[on])
            spans += _outside(str(thread[i]), float(ts[i]), float(end[i]), cs, ce)
            merged_backward += 1
    n = ctx.n_full
    steps = ctx.cpu_step_of(ts[region])
    ev = {"compiled_regions_per_step": float(np.median([int((steps == s).sum()) for s in ctx.full_steps])),
          "compiled_backward_nodes_merged_per_step": round(merged_backward / n, 1),
          # (profiled: the replay takes the profiler's cost out of it)
          "profiled_cpu_ms_per_step_the_merge_removes": round(sum(b - a for _t, a, b in spans) / n / 1000, 3)}
    return tuple(spans), ev


def advice(ev: dict) -> str:
    """What the sync's fix says of the break (ev: merge_spans' evidence)."""
    return (f" The sync is inside torch.compile'd code, where it breaks the graph: the step runs "
            f"{ev['compiled_regions_per_step']:g} compiled regions, each with its own guards, wrapper and autograd "
            "node, and the Python between them runs eagerly; with the value kept on the GPU (torch.where instead of a "
            "Python `if`) they merge into one graph (counted in the estimate; torch._dynamo.explain lists the breaks).")


def _outside(thread: str, lo: float, hi: float, cs: np.ndarray, ce: np.ndarray) -> list[tuple[str, float, float]]:
    """[lo, hi) less the graph calls (sorted disjoint intervals cs, ce)."""
    out = []
    at = lo
    for a, b in zip(cs[(ce > lo) & (cs < hi)], ce[(ce > lo) & (cs < hi)]):
        if a > at:
            out.append((thread, at, float(a)))
        at = max(at, float(b))
    if hi > at:
        out.append((thread, at, hi))
    return out
