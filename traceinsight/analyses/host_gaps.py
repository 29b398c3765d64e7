"""What the CPU did during host-bound GPU gaps: the ops, the Python calls, and the time no op covers (bare
stretches, named by the ops either side). host_bound reads its evidence and its naming from these."""
from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np

from ..trace.coverage import one_time_spans
from ..trace.gil import side_threads
from ..trace.host import subtract_intervals
from ..trace.pycalls import calls_in
from .base import Context

# The backward pass's ops, as the autograd engine's thread records them (the prefix says nothing).
AUTOGRAD = re.compile(r"^autograd::engine::evaluate_function: ")

ENDS = ("the step's start", "the next op")


class Place(NamedTuple):
    """Bare time between two ops (`us`), and the recorded range (record_function, Optimizer.zero_grad#...) that
    holds most of it (`range_us` of it), when it holds at least ANNOTATED_SHARE of it (else None, 0)."""
    before: str
    after: str
    us: float
    range: str | None
    range_us: float


class Bare(NamedTuple):
    """What no recorded op or runtime call covers on the CPU thread over the longest host-bound gaps: `total` us;
    `before`, `after`: the ops either side of the stretches that add up to most of it, `n` how many stretches;
    `places`: the three largest places."""
    total: float
    before: str
    after: str
    n: int
    places: list[Place]


ANNOTATED_SHARE = 0.3


def bare_stretch(ctx: Context, gaps, pieces: dict) -> Bare | None:
    """The bare CPU time of the largest host-bound gaps (Bare; pieces: pieces() of each), or None when nothing is
    uncovered.
    Stretches are summed per (before, after) pair: a loop of many short Python stretches between the same two
    ops outweighs one longer stretch elsewhere."""
    if gaps.empty:
        return None
    m = ctx.model
    kind = m.cpu["kind"]           # (categorical: compared on its codes, not as a million strings)
    frames = m.thread_frames(((kind == "op") | (kind == "runtime")).to_numpy(), ["ts", "end", "top_op"])
    # A recorded range with no op in it (Optimizer.zero_grad's loop setting grads to None) names the Python
    # that ran there: the step markers are the window, not a place.
    ranges = {th: (r["ts"].to_numpy(), r["end"].to_numpy(), r["name"].to_numpy()) for th, r in
              m.thread_frames((kind == "annotation").to_numpy() & ~m.cpu["is_step"].to_numpy(), ["ts", "end", "name"]).items()}
    names = m.cpu["name"]

    def name(g, k: int) -> str:
        """A call's outermost op (the one the user wrote): aten::item, not its cudaMemcpyAsync."""
        top = int(g["top_op"].iat[k])
        return AUTOGRAD.sub("", str(names.iat[top]) if top >= 0 else str(names.loc[g.index[k]]))

    def inside(thread, a: float, b: float) -> tuple[str, float] | None:
        """The innermost recorded range of the thread over [a, b) (of those overlapping it, the latest to open),
        and how much of [a, b) it covers."""
        if thread not in ranges:
            return None
        rs, re_, rn = ranges[thread]
        hit = np.flatnonzero((rs < b) & (re_ > a))
        if not len(hit):
            return None
        j = hit[np.argmax(rs[hit])]      # (argmax takes the first of equal starts, as the stable sort did)
        return str(rn[j]), min(b, re_[j]) - max(a, rs[j])
    total, pairs, op_step = 0.0, {}, {}        # pairs: (before, after) -> [us, stretches, {range: us}]
    for row in gaps.itertuples():
        g = frames.get(row.thread)
        if g is None:
            continue
        if row.thread not in op_step:
            op_step[row.thread] = ctx.cpu_step_of(g["ts"].to_numpy())
        gap_step = ctx.cpu_step_of(np.array([row.start]))[0]
        parts, w = pieces[row.Index]      # (counted as the ops and calls are)
        for start, stop in parts:
            total += walk_bare(g, name, inside, pairs, op_step, gap_step, row.thread, start, stop, w)
    if total <= 0:
        return None
    ranked = sorted(pairs.items(), key=lambda kv: -kv[1][0])
    places = []
    for (before, after), (us, _n, held) in ranked[:3]:
        rname, rus = max(held.items(), key=lambda kv: kv[1]) if held else (None, 0.0)
        places.append(Place(before, after, us, *((rname, rus) if rus >= ANNOTATED_SHARE * us else (None, 0.0))))
    (before, after), (_, n, _held) = ranked[0]
    return Bare(total, before, after, n, places)


def walk_bare(g, name, inside, pairs: dict, op_step: dict, gap_step, thread, start: float, stop: float,
               w: float) -> float:
    """The time no op of the thread (g: its ops in start order) covers in [start, stop), at weight w; each
    stretch of it is added to pairs under the ops before and after it."""
    ts, end = g["ts"].to_numpy(), g["end"].to_numpy()
    inside_gap = np.flatnonzero((end > start) & (ts < stop))
    total = 0.0
    # Walk the ops overlapping the stretch in start order; what no op covers is bare.
    cur, prev = start, int(np.searchsorted(ts, start) - 1)
    for i in (*inside_gap, None):
        nxt = stop if i is None else max(ts[i], start)
        if nxt > cur:
            total += (nxt - cur) * w
            # An op of the previous step (its optimizer) is not where this step's Python runs.
            same = prev >= 0 and op_step[thread][prev] == gap_step
            before = name(g, prev) if same else "the step's start"
            k = i if i is not None else (inside_gap[-1] + 1 if len(inside_gap) else int(np.searchsorted(ts, stop)))
            after = name(g, k) if k < len(g) else "the next op"
            p = pairs.setdefault((before, after), [0.0, 0, {}])
            p[0] += (nxt - cur) * w
            p[1] += 1
            held = inside(thread, cur, nxt)
            if held is not None:
                p[2][held[0]] = p[2].get(held[0], 0.0) + held[1]
        if i is not None and end[i] > cur:
            cur, prev = end[i], i
    return total


def pieces(ctx: Context, row) -> tuple[list[tuple[float, float]], float]:
    """A gap less the start-up calls and graph recording in it (attribution gave those their own causes), and
    the share of what is left that is host_bound's."""
    ps, pe = subtract_intervals(np.array([row.start]), np.array([row.end]), *one_time_spans(ctx.model))
    left = float((pe - ps).sum())
    return list(zip(ps.tolist(), pe.tolist())), (min(1.0, row.host_bound / left) if left > 0 else 0.0)


def python_calls(ctx: Context, gaps, pieces: dict) -> list[tuple[str, float]]:
    """The longest host-bound gaps' time (pieces: pieces() of each) by the Python call it went to
    (trace/pycalls.py), summed over threads; empty without Python frames in the trace."""
    if gaps.empty or not (ctx.model.cpu["kind"] == "python").any():
        return []
    out: dict[str, float] = {}
    for th, g in gaps.groupby("thread", sort=False):
        spans, w = [], []
        for r in g.itertuples():
            parts, share = pieces[r.Index]
            spans += parts
            w += [share] * len(parts)
        for name, us in calls_in(ctx.model, th, spans, w).items():
            out[name] = out.get(name, 0.0) + us
    return sorted(out.items(), key=lambda kv: -kv[1])


class GilHolder(NamedTuple):
    """Another thread of the process that ran Python (holding the GIL) during the loop thread's host-bound gaps:
    `us` of the gaps' time, weighted as the gaps are, and its calls by that time."""
    thread: str
    us: float
    calls: list[tuple[str, float]]


def gil_holders(ctx: Context, gaps, pieces: dict) -> list[GilHolder]:
    """The threads other than each gap's own that ran Python in the longest host-bound gaps (pieces: pieces() of
    each), most first; empty without Python frames (with_stack) in the trace.
    The GIL is one: while another thread's Python holds it, the loop's thread, back from an op, waits for it (up to
    the 5 ms switch interval) before it can launch the next. Its time inside an op or a wait (a lock, a queue,
    sleep) holds no GIL and does not count (pycalls.calls_in, holding_gil)."""
    kind = ctx.model.cpu["kind"]
    if gaps.empty or not (kind == "python").any():
        return []
    py = set(ctx.model.cpu["thread"].to_numpy()[(kind == "python").to_numpy()].tolist())
    # Not the threads the gaps are on (the loop's), nor the backward pass's (its ops are the step's work).
    others = (py & set(side_threads(ctx.model))) - set(gaps["thread"].tolist())
    spans, w = [], []
    for r in gaps.itertuples():
        parts, share = pieces[r.Index]
        spans += parts
        w += [share] * len(parts)
    out: dict[str, dict[str, float]] = {}
    for other in sorted(others):
        mine = out.setdefault(other, {})
        for name, us in calls_in(ctx.model, other, spans, w, holding_gil=True).items():
            if "(the profiler's own)" not in name:
                mine[name] = mine.get(name, 0.0) + us
    held = [GilHolder(th, sum(c.values()), sorted(c.items(), key=lambda kv: -kv[1])) for th, c in out.items()]
    return sorted((h for h in held if h.us > 0), key=lambda h: -h.us)


def threads_with_ops(ctx: Context, gaps) -> list[tuple[str, int, list[str]]]:
    """Threads other than the gaps' own, and not the backward pass's, that recorded ops or runtime calls inside the
    gaps (outermost ones): (thread, how many, the most frequent names). Without stacks this is all a trace shows of a prefetch thread."""
    cpu = ctx.model.cpu
    if gaps.empty:
        return []
    side = set(side_threads(ctx.model)) - set(gaps["thread"].tolist())
    # (runtime calls too: a prefetch thread pinning its batches records only the driver calls pin_memory makes)
    ops = ctx.model.thread_frames(((cpu["kind"] == "op") | (cpu["kind"] == "runtime")).to_numpy()
                                  & (cpu["depth"] == 0).to_numpy(), ["ts", "end", "name"])
    order = np.argsort(gaps["end"].to_numpy())            # (gaps do not overlap: by end is by start)
    starts, ends = gaps["start"].to_numpy()[order], gaps["end"].to_numpy()[order]
    out = []
    for th, g in ops.items():
        if th not in side:
            continue
        names = g["name"].astype(str)
        ts = g["ts"].to_numpy()
        j = np.searchsorted(ends, ts, side="right")          # the first gap ending after the op starts
        hit = j < len(starts)
        hit[hit] = starts[j[hit]] < g["end"].to_numpy()[hit]
        if hit.any():
            out.append((th, int(hit.sum()), names[hit].value_counts().index[:3].tolist()))
    return sorted(out, key=lambda t: -t[1])

