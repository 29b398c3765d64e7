"""Where a thread ran Python holding the GIL (traces recorded with with_stack=True).

The GIL is one: while a thread of the process runs Python (a prefetch thread tokenising, a thread pool's
post-processing), the training loop's thread, back from each op, waits for it before it can launch the next. That
wait is covered by no op, however short, and it is host work of the other thread's, not dispatch.

A thread holds the GIL over its user-code frames' time, less what runs inside them without it: library frames (a
queue's get, threading's waits), built-ins that wait or are torch's (pycalls.holds_gil), ops and runtime calls.
A frame open from the window's first instants to its last was entered before the profiler started, and what it
called then was never recorded: it counts for nothing (pycalls.OPEN_AT_START_US).
"""
from __future__ import annotations

import numpy as np

from .model import TraceModel
from .pycalls import OPEN_AT_START_US, holds_gil, is_user_frame
from .steps import merged_intervals


def side_threads(model: TraceModel) -> list[str]:
    """The threads whose Python can keep the loop waiting: all but the loop's own (the one holding the step markers,
    else the one making most runtime calls) and the backward pass's. A prefetch thread that copies its batch to the
    GPU is one too (a review: one 30 us copy a batch on the tokenising thread had turned the finding back into
    launch overhead)."""
    cpu = model.cpu
    threads = cpu["thread"].to_numpy()
    steps = threads[cpu["is_step"].to_numpy()]
    runtime = threads[(cpu["kind"] == "runtime").to_numpy()]
    pool = steps if len(steps) else runtime
    if not len(pool):
        return []
    names, counts = np.unique(pool, return_counts=True)
    loop = names[np.argmax(counts)]
    engine = set(threads[model.cpu_match(r"^autograd::engine::evaluate_function: ")].tolist())
    return [th for th in model.thread_rows() if th != loop and th not in engine]


def gil_spans(model: TraceModel, threads) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per thread of `threads` that ran any, the merged stretches where it held the GIL running Python."""
    cpu = model.cpu
    kind = cpu["kind"].to_numpy()
    if not (kind == "python").any():
        return {}
    ts, end, names = cpu["ts"].to_numpy(), cpu["end"].to_numpy(), cpu["name"].to_numpy()
    first, last = float(ts.min()), float(end.max())
    out = {}
    rows_of = model.thread_rows()
    for th in threads:
        rows = rows_of.get(th)
        if rows is None:
            continue
        py = rows[kind[rows] == "python"]
        if not len(py):
            continue
        whole = (ts[py] <= first + OPEN_AT_START_US) & (end[py] >= last - 1.0)
        user = np.fromiter((is_user_frame(str(n)) for n in names[py]), dtype=bool, count=len(py)) & ~whole
        if not user.any():
            continue
        held = np.fromiter((holds_gil(str(n)) for n in names[py]), dtype=bool, count=len(py))
        not_py = rows[kind[rows] != "python"]
        off = np.concatenate([py[~held & ~whole], not_py])
        us, ue = merged_intervals(ts[py[user]], end[py[user]])
        os_, oe = merged_intervals(ts[off], end[off])
        s, e = _minus(us, ue, os_, oe)
        if len(s):
            out[th] = (s, e)
    return out


# A stretch inside an op with no child running (before its first, between two, after its last) this long is no
# dispatch (those take microseconds): the op stalled. Where another thread ran Python meanwhile, it waited on it:
# with stacks, the input copies' aten::to / _to_copy / copy_ of a prefetch thread's batches stalled 5-26 ms each,
# 32 ms a step, while the thread tokenised (h200_clean57A), where the trace without stacks shows one such stall.
STALL_US = 500.0


def op_stalls(model: TraceModel, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The stretches of STALL_US or more inside the ops among `rows` (one thread's) that have children, where
    none of their children (ops, runtime calls) runs: merged, sorted."""
    cpu = model.cpu
    kind, parent = cpu["kind"].to_numpy(), cpu["parent"].to_numpy()
    ts, end = cpu["ts"].to_numpy(), cpu["end"].to_numpy()
    ch = rows[(kind[rows] == "op") | (kind[rows] == "runtime")]
    p = parent[ch]
    ch = ch[p >= 0]
    ch = ch[kind[parent[ch]] == "op"]
    if not len(ch):
        return np.zeros(0), np.zeros(0)
    ch = ch[np.lexsort((ts[ch], parent[ch]))]
    p = parent[ch]
    new = np.concatenate([[True], p[1:] != p[:-1]])
    last = np.concatenate([p[1:] != p[:-1], [True]])
    # before each first child; between siblings; after each last child
    s = np.concatenate([ts[p[new]], end[ch[:-1]][~new[1:]], end[ch[last]]])
    e = np.concatenate([ts[ch[new]], ts[ch[1:]][~new[1:]], end[p[last]]])
    long = (e - s) >= STALL_US
    return merged_intervals(s[long], e[long])


def intersect(s: np.ndarray, e: np.ndarray, os_: np.ndarray, oe: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merged intervals [s, e) within merged intervals [os_, oe)."""
    if not len(s) or not len(os_):
        return np.zeros(0), np.zeros(0)
    return _minus(s, e, *_minus(s, e, os_, oe))


def _minus(s: np.ndarray, e: np.ndarray, os_: np.ndarray, oe: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merged intervals [s, e) less merged intervals [os_, oe), by a sweep over both sets' edges."""
    if not len(os_) or not len(s):
        return s, e
    edges = np.unique(np.concatenate([s, e, os_, oe]))
    lo, hi = edges[:-1], edges[1:]
    # (a point inside each piece; the host's bare stretches run from -inf and to +inf)
    mid = np.where(np.isfinite(lo) & np.isfinite(hi), (lo + hi) / 2,
                   np.where(np.isfinite(lo), lo + 1.0, np.where(np.isfinite(hi), hi - 1.0, 0.0)))
    inside = (np.searchsorted(s, mid, side="right") - 1 >= 0)
    k = np.maximum(np.searchsorted(s, mid, side="right") - 1, 0)
    inside &= e[k] > mid
    j = np.maximum(np.searchsorted(os_, mid, side="right") - 1, 0)
    cut = (np.searchsorted(os_, mid, side="right") - 1 >= 0) & (oe[j] > mid)
    keep = inside & ~cut
    return merged_intervals(edges[:-1][keep], edges[1:][keep])
