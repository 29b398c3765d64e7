"""graph_break: a sync inside torch.compile'd code, which breaks its graph (for sync_stall's estimate).

Dynamo cannot trace a value read on the host (`.item()`, `if tensor:`, `.tolist()`): it ends the graph
there, runs the read eagerly, and goes on in a new frame of its own. In the trace that is a blocking call
inside compiled code but outside its graph calls (`## Call CompiledFxGraph`), with two compiled regions or more
where the break split one: inside a `Torch-Compiled Region` (the caller's frame compiled up to the break), or,
recorded with stacks, inside a compiled callable's frame (`eval_frame.py: compile_wrapper`) where Dynamo gave up
on the frame (a break inside a loop) and compiled each callee apart. The thirty-first held-out set's guard after
the third of six blocks ran eight forward regions and seven backward nodes a step where the fixed model ran one
of each; the thirty-second's finite check after each of eight blocks ran the blocks as eight regions.

Each region costs the CPU its own guards, wrapper, graph call and autograd node, and the eager Python between
regions runs too; with the value kept on the GPU the regions merge into one. What goes, per step: the CPU time of
the breaking frame from its first graph call to the end of its last, outside the graph calls (which launch the
kernels: they stay), the setup inside each of those graph calls but the first (its inputs' checks before its first
launch: the merged forward makes one call), and in the backward the compiled backward nodes but the first, outside
their graph calls, where every compiled forward of the step ran inside a breaking frame. Without stacks a frame
Dynamo gave up on leaves no frame of its own, but its number: Dynamo numbers frames as it first compiles them, so
where every region is of a frame above 0 and a sync links them, frame 0 was the caller it gave up on (the
thirty-second set's finite checks; the thirty-fifth's per-block `.item()` logging, which regional compilation, each
block compiled apart, ran as regions of frame 0 and measured no merge). Otherwise the finding says what stacks would
settle. Either way sync_stall gives no advice to graph only the sequence repeated between the syncs (a generate
loop's): here the eager ops between the regions are part of that sequence, and a graph of the compiled regions would
leave them out (an expert review, 2026-11-30).
"""
from __future__ import annotations

import numpy as np

from ..trace.compiles import REGION, compiled_versions
from ..trace.facts import COMPILE_REGION, COMPILE_WRAPPER, COMPILED_CALL, program_facts, program_kind
from ..trace.profiler_cost import event_cost_us
from ..trace.steps import interval_of, merged_intervals
from .base import Context, calls_in
from .fixes import MergeRegions

COMPILED_FORWARD = r"^CompiledFunction$"
# The Python frame of a torch.compile'd callable (recorded with with_stack): its compile_wrapper (_fn before torch 2.6).
COMPILED_ENTRY = r"torch/_dynamo/eval_frame\.py\(\d+\): (?:compile_wrapper|_fn)$"
COMPILED_BACKWARD = r"^autograd::engine::evaluate_function: CompiledFunctionBackward"


def merge(ctx: Context, blockers: list[int], ev: dict) -> tuple[tuple, str, float]:
    """What the sync's fix adds where its calls break a compiled graph (sync_stall): (fixes, advice, the extra
    regions' wrapper time per step: a cost of the sync beside its idle), the evidence put into ev; ((), "", 0)
    where they do not. (The wrappers' cost keeps a break above the ranking's bar where its stall is short: the
    thirty-second set's finite checks stalled 0.03 ms a step and their regions' wrappers cost about 0.3.)"""
    found = merge_spans(ctx, blockers)
    if found:
        spans, setups, found_ev = found
        profiled, unprofiled = _wrapper_in(ctx, spans)
        # (The graph calls' setups are not the wrapper's, and what they launch stays.)
        fx = MergeRegions(spans + setups, calls=calls_in(ctx.model.cpu, spans), wrapper_us=unprofiled)
        ev["breaks_the_compiled_graph"] = {**found_ev, "wrapper_ms_per_step_profiled": round(profiled / 1000, 3)}
        ev["measured_cost_is"] = ((ev.get("measured_cost_is") or "the stalls' GPU idle (median per full step)")
                                  + "; plus the extra compiled regions' wrapper time (mean per full step, profiled)")
        return (fx,), advice(found_ev), profiled
    regions = unseen_break(ctx, blockers)
    if regions:
        ev["between_compiled_regions"] = regions
        return (), unseen_advice(regions, one_function(ctx)), 0.0
    return (), "", 0.0


def merge_spans(ctx: Context, blockers: list[int]) -> tuple[tuple, tuple, dict] | None:
    """(spans (thread, start, end) of CPU time the merged graph does not spend outside its graph calls, the setups of
    the graph calls it does not make (_setups), evidence), or None when no blocking call breaks a compiled graph."""
    m = ctx.model
    cpu = m.cpu
    if cpu.empty or not blockers:
        return None
    ranges = cpu["kind"].isin(("op", "annotation")).to_numpy()
    region = ranges & m.cpu_match(COMPILE_REGION)
    call = ranges & m.cpu_match(COMPILED_CALL)
    if not region.any() or not call.any():
        return None
    # Where compiled code was entered: a region, or (with stacks) the compiled callable's own frame, which holds the
    # regions where Dynamo gave up on the caller's frame and compiled its callees apart.
    entry = region | ((cpu["kind"] == "python").to_numpy() & m.cpu_match(COMPILED_ENTRY))
    ts, end = cpu["ts"].to_numpy(), cpu["end"].to_numpy()
    thread = cpu["thread"].to_numpy()
    rows = np.asarray(blockers, dtype=np.int64)
    hulls = _given_up_callers(ctx, rows, region)
    spans: list[tuple[str, float, float]] = []
    setups: list[tuple[str, float, float]] = []
    outers: list[tuple[str, float, float]] = []      # the breaking entries, outermost
    inner = (cpu["kind"] == "op").to_numpy() & ~call & ~region      # ops inside the graph calls (for _setups)
    for th in np.unique(thread[rows]):
        on = thread == th
        op_ts = np.sort(ts[inner & on])
        r, e, c = (np.flatnonzero(x & on) for x in (region, entry, call))
        cs, ce = merged_intervals(ts[c], end[c])
        t = ts[rows[thread[rows] == th]]
        t = t[interval_of(t, cs, ce) < 0]               # outside every graph call
        hs, he = (np.array([h[k] for h in hulls if h[0] == th], dtype=float) for k in (1, 2))
        outer_s, outer_e = merged_intervals(np.concatenate([ts[e], hs]), np.concatenate([end[e], he]))
        for k in np.unique(interval_of(t, outer_s, outer_e)):
            lo, hi = (float(outer_s[k]), float(outer_e[k])) if k >= 0 else (0.0, 0.0)
            in_r = (ts[r] >= lo) & (end[r] <= hi)
            in_c = (cs >= lo) & (ce <= hi)
            # A break leaves at least two regions; one unbroken region with a sync in its Python is not one.
            if k < 0 or in_r.sum() < 2 or not in_c.any() or ctx.cpu_step_of(np.array([lo]))[0] not in ctx.full_steps:
                continue
            # The merged frame keeps its entry up to its first graph call and its exit after its last one, and
            # one graph call's setup.
            spans += _outside(str(th), float(cs[in_c].min()), float(ce[in_c].max()), cs, ce)
            setups += _setups(str(th), cs[in_c][1:], ce[in_c][1:], op_ts)
            outers.append((str(th), lo, hi))
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
    ev = {"compiled_regions_per_step": regions_per_step(ctx),
          **({"seen_by": "compile ids: the regions are of Dynamo's frame " + ", ".join(map(str, _frames(m)))
              + " and no frame numbered lower ran in the trace (most likely the caller, "
              "which Dynamo compiled first and gave up on); with_stack=True would show its frame"} if hulls else {}),
          "compiled_backward_nodes_merged_per_step": round(merged_backward / n, 1),
          # (profiled: the replay takes the profiler's cost out of it)
          "profiled_cpu_ms_per_step_the_merge_removes": round(sum(b - a for _t, a, b in spans + setups) / n / 1000, 3),
          "of_which_graph_call_setups_ms": round(sum(b - a for _t, a, b in setups) / n / 1000, 3)}
    return tuple(spans), tuple(setups), ev


def _frames(m) -> dict[int, list[int]]:
    """Dynamo's frames -> compiled versions of the trace's regions (trace.compiles.compiled_versions), {} where a region
    has no id to read (a compiled autograd graph's own "!0"): then the ids say nothing."""
    everyone = m.cpu_match(COMPILE_REGION).sum() == m.cpu_match(REGION.pattern).sum()
    return compiled_versions(m) if everyone else {}


def _given_up_callers(ctx: Context, rows: np.ndarray, region: np.ndarray) -> list[tuple[str, float, float]]:
    """Without stacks, the stretches (thread, start, end) of a caller's frame that Dynamo gave up on, read from
    compile ids: top-level regions of one step linked by blocking calls between them, where every region in the
    trace is of a frame numbered above 0 (Dynamo numbers frames as it first compiles them: the lowest, which never
    ran a graph, was the caller, which it compiled first and gave up on). Callees compiled one by one (regional
    compilation) start at frame 0. The thirty-second set's finite check after every block: eight regions of frame
    1 a step, a sync between each two. [] where stacks can tell (merge_spans reads the caller's frame) or the ids
    do not say so."""
    m = ctx.model
    cpu = m.cpu
    if (cpu["kind"] == "python").any():
        return []
    frames = _frames(m)
    if not region.any() or not frames or min(frames) <= 0:
        return []
    ts, end, thread = cpu["ts"].to_numpy(), cpu["end"].to_numpy(), cpu["thread"].to_numpy()
    hulls = []
    for th in np.unique(thread[rows]):
        r = np.flatnonzero(region & (thread == th))
        s_, e_ = merged_intervals(ts[r], end[r])        # top-level regions, in order
        b = np.sort(ts[rows[thread[rows] == th]])
        step = ctx.cpu_step_of(s_)
        lo = 0
        for k in range(1, len(s_) + 1):
            linked = (k < len(s_) and step[k] == step[k - 1]
                      and ((b >= e_[k - 1]) & (b < s_[k])).any())
            if not linked:
                if k - lo >= 2:
                    hulls.append((str(th), float(s_[lo]), float(e_[k - 1])))
                lo = k
    return hulls


def graphed_apart(ctx: Context, blockers: list[int]) -> bool:
    """Whether the launch fix of a compiled program (mode="reduce-overhead") leaves these blocking calls in place: CUDA
    graph trees replay each compiled graph as its own CUDA graph, so a sync outside the graph calls (between regions,
    or in the eager code around them) does not stop it, and is no prerequisite. Measured with the syncs kept: the
    thirty-first set's guard, 1.07-1.71x; the thirty-fifth's blocks compiled one by one, 1.71-1.90x (the syncs' own
    fix 0.93-1.21x there). A sync inside a graph call (an op the compiler left to eager code) still is one."""
    m = ctx.model
    if not blockers or program_kind(program_facts(m)) != "compiled":
        return False
    cpu = m.cpu
    call = cpu["kind"].isin(("op", "annotation")).to_numpy() & m.cpu_match(COMPILED_CALL)
    ts, end, thread = cpu["ts"].to_numpy(), cpu["end"].to_numpy(), cpu["thread"].to_numpy()
    rows = np.asarray(blockers, dtype=np.int64)
    for th in np.unique(thread[rows]):
        c = np.flatnonzero(call & (thread == th))
        if (interval_of(ts[rows[thread[rows] == th]], *merged_intervals(ts[c], end[c])) >= 0).any():
            return False
    return True


def one_function(ctx: Context) -> str:
    """The compile ids ("0/0, 0/1") where every compiled region is of Dynamo's frame 0: one function (recompiled
    perhaps) called several times, as regional compilation calls each block; a graph break would have left regions of
    later frames. "" otherwise."""
    frames = _frames(ctx.model)
    return ", ".join(f"0/{v}" for v in frames[0]) if list(frames) == [0] else ""


def regions_per_step(ctx: Context) -> float:
    """Compiled regions (Dynamo frames: graph breaks split a step into several) per full step, median."""
    rows = ctx.model.cpu_match(COMPILE_REGION)
    if not rows.any():
        return 0.0
    steps = ctx.cpu_step_of(ctx.model.cpu["ts"].to_numpy()[rows])
    return float(np.median([int((steps == s).sum()) for s in ctx.full_steps])) if len(ctx.full_steps) else 0.0


def unseen_break(ctx: Context, blockers: list[int]) -> float:
    """Compiled regions per step where, in a trace without Python stacks, a blocking call runs between two of them
    on one thread in one step (outside both): a break in a frame Dynamo gave up on looks so, and so do callees
    compiled one by one with a sync between their calls; 0 where there is none or stacks can tell."""
    m = ctx.model
    cpu = m.cpu
    if cpu.empty or not blockers or (cpu["kind"] == "python").any():
        return 0.0
    region = cpu["kind"].isin(("op", "annotation")).to_numpy() & m.cpu_match(COMPILE_REGION)
    if region.sum() < 2:
        return 0.0
    ts, end, thread = cpu["ts"].to_numpy(), cpu["end"].to_numpy(), cpu["thread"].to_numpy()
    for b in blockers:
        r = np.flatnonzero(region & (thread == thread[b]))
        if not len(r) or ((ts[r] <= ts[b]) & (end[r] > ts[b])).any():
            continue
        step = ctx.cpu_step_of(np.array([ts[b]]))[0]
        before, after = r[end[r] <= ts[b]], r[ts[r] > ts[b]]
        if (step in ctx.full_steps and len(before) and len(after)
                and ctx.cpu_step_of(end[before[-1:]])[0] == step == ctx.cpu_step_of(ts[after[:1]])[0]):
            return regions_per_step(ctx)
    return 0.0


def unseen_advice(regions: float, one: str) -> str:
    if one:
        return (f" The sync runs between two of the step's {regions:g} compiled regions, all calls of one compiled "
                f"function (Dynamo's first frame, compile ids {one}; as regional compilation calls each block, or a "
                "generation loop its model's forward per token): no graph break, so keeping the value on the GPU "
                "removes the wait, not the regions (the estimate counts the wait).")
    return (f" The sync runs between two of the step's {regions:g} compiled regions: if it is inside a torch.compile'd "
            "callable, it is a graph break that split one graph into them (each with its own guards, wrapper and graph "
            "call), and keeping the value on the GPU also merges them; if the regions are callees compiled one by one, "
            "it is not. The trace has no Python stacks to tell, so the estimate counts the wait only; record with "
            "with_stack=True to settle it (torch._dynamo.explain lists the breaks).")


def advice(ev: dict) -> str:
    """What the sync's fix says of the break (ev: merge_spans' evidence)."""
    return (f" The sync is inside torch.compile'd code, where it breaks the graph: the step runs "
            f"{ev['compiled_regions_per_step']:g} compiled regions, each with its own guards and wrapper (and autograd "
            "node, in training), and the Python between them runs eagerly; with the value kept on the "
            "GPU (torch.where instead of a Python `if`, torch._assert_async for a check that raises, or a check made "
            "rarely outside the compiled code) they merge "
            "into one graph (counted in the estimate; torch._dynamo.explain lists the breaks)."
            + (" The trace has no Python stacks: the break is read from the regions' compile ids, all above frame 0, "
               "none of which runs here: most likely the caller, which Dynamo compiled first and gave up on at a break "
               "inside a loop (callees compiled one by one start at 0). A function compiled earlier that does not run "
               "in these steps (an eval step) would also number them so: with_stack=True would settle it."
               if "seen_by" in ev else ""))


def _wrapper_in(ctx: Context, spans) -> tuple[float, float]:
    """torch.compile's wrapper time (cache lookups and regions outside their graph calls, as
    trace.facts.compiled_wrapper_us counts it) inside the spans, per full step (mean): (profiled, less the profiler's
    cost of the events recorded there). The second is what a CUDA graph of the merged regions no longer pays again
    (estimate/replay.py)."""
    m = ctx.model
    cpu = m.cpu
    wrap = cpu["kind"].isin(("op", "annotation")).to_numpy() & m.cpu_match(COMPILE_WRAPPER)
    ts, end, thread = cpu["ts"].to_numpy(), cpu["end"].to_numpy(), cpu["thread"].to_numpy()
    cost = event_cost_us(m)
    total = recorded = 0.0
    for th, lo, hi in spans:
        w = np.flatnonzero(wrap & (thread == th))
        ws, we = merged_intervals(ts[w], end[w])
        total += float(np.clip(np.minimum(we, hi) - np.maximum(ws, lo), 0.0, None).sum())
        inside = (thread == th) & (ts >= lo) & (ts < hi)
        inside[np.flatnonzero(inside)[interval_of(ts[inside], ws, we) < 0]] = False
        recorded += float(cost[inside].sum())
    return total / ctx.n_full, max(0.0, total - recorded) / ctx.n_full


def _setups(thread: str, cs: np.ndarray, ce: np.ndarray, op_ts: np.ndarray) -> list[tuple[str, float, float]]:
    """Each graph call's setup (cs, ce: the calls; op_ts: the thread's op starts, sorted): from its start to its
    first op, the compiled code's Python before it launches (its inputs' size and stride checks, the stream), which
    a merged forward graph runs once. Measured on the five compiled programs with a break (h200_clean35A-38D, default
    options, 20 before/after trace pairs): the split step's graph-call setups less the fixed step's came to 0.67-1.05
    times what this removes (the forward's calls but the first). A merged backward node's call keeps its setup: the
    fixed step's backward call checks the saved tensors of all of them (counted too, the setups read 1.4-1.9x)."""
    first = op_ts[np.minimum(np.searchsorted(op_ts, cs, side="right"), len(op_ts) - 1)] if len(op_ts) else ce
    return [(thread, float(a), float(f)) for a, b, f in zip(cs, ce, first) if a < f < b]


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
