"""nesting: parent and depth of every CPU range on its thread, and the op a runtime call belongs to.

The rule is a stack walk over start-sorted ranges (thread, start, longer first, runtime calls last,
External id, name): a range's parent is the innermost earlier range on its thread still open at its
start (EPS of slack for clock jitter). A range that overruns its parent's end stays its child.

The walk is done with numpy where it can be: when every child ends within its parent (ranges nest
properly: the usual case), the ranges open at a start are exactly the earlier ones that end after it,
so depth is a count of ends and the parent is the last earlier range one level up. A thread where
some child overruns its parent is walked in Python (exactly the same rule), so both paths agree.
"""
from __future__ import annotations

import numpy as np

EPS = 0.001
_SMALL = 64              # threads with fewer ranges than this are simply walked


def nesting_order(thread_rank: np.ndarray, ts: np.ndarray, dur: np.ndarray, is_runtime: np.ndarray,
                  ext_id: np.ndarray, names: np.ndarray) -> np.ndarray:
    """Row order for the walk: thread, start, longer first, runtime calls last, External id, name.

    Equal ranges (aten::detach and detach): the outer op has the smaller External id, so the order, and
    the tree, do not depend on the order of events in the file. Numeric keys go through one lexsort;
    the name only breaks the rare exact ties, on those rows alone.
    """
    keys = [thread_rank, ts, -dur, is_runtime.astype(np.int8), ext_id]
    order = np.lexsort(keys[::-1])
    if len(order) < 2:
        return order
    same = np.ones(len(order) - 1, dtype=bool)
    for k in keys:
        v = k[order]
        same &= v[1:] == v[:-1]
    if not same.any():
        return order
    run = np.concatenate([[0], np.cumsum(~same)])
    tied = np.zeros(len(order), dtype=bool)
    tied[1:] |= same
    tied[:-1] |= same
    idx = np.flatnonzero(tied)
    # Within each run of exact ties, order by name; runs stay where they are.
    resorted = sorted(idx, key=lambda i: (run[i], names[order[i]]))
    order = order.copy()
    order[idx] = order[np.array(resorted)]
    return order


def nest(thread: np.ndarray, ts: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """parent (row, -1 at top level) and depth of rows already in nesting order."""
    n = len(ts)
    parent = np.full(n, -1, dtype=np.int64)
    depth = np.zeros(n, dtype=np.int32)
    if n == 0:
        return parent, depth
    bounds = np.flatnonzero(thread[1:] != thread[:-1]) + 1
    starts = np.concatenate([[0], bounds])
    stops = np.concatenate([bounds, [n]])
    walk: list[tuple[int, int]] = []
    for a, b in zip(starts.tolist(), stops.tolist()):
        if b - a < _SMALL or not _nest_vectorised(ts[a:b], end[a:b], parent[a:b], depth[a:b], a):
            walk.append((a, b))
    if walk:
        _walk(walk, ts, end, parent, depth)
    return parent, depth


def _nest_vectorised(ts, end, parent_out, depth_out, offset: int) -> bool:
    """One thread; False (outputs untouched) when some child overruns its parent."""
    n = len(ts)
    t = ts + EPS
    if not (np.isfinite(t).all() and np.isfinite(end).all()):
        return False
    # Ranges j < i still open at i's start: all j < i minus those that ended by then. Ends by then
    # of rows at or after i (zero-length ranges starting within EPS) are counted and taken back.
    ended = np.searchsorted(np.sort(end), t, side="right")
    hi = np.searchsorted(ts, t, side="right")
    span = hi - np.arange(n)
    if span.sum() > 4 * n:
        return False
    extra = np.zeros(n, dtype=np.int64)
    multi = np.flatnonzero(span > 1)
    own = end <= t
    extra += own
    if len(multi):
        reps = span[multi] - 1
        q = np.repeat(multi, reps)
        j = q + 1 + (np.arange(reps.sum()) - np.repeat(np.cumsum(reps) - reps, reps))
        np.add.at(extra, q[end[j] <= t[q]], 1)
    depth = np.arange(n) - (ended - extra)
    if (depth < 0).any():
        return False
    # Parent: the last earlier row one level up.
    key = depth.astype(np.int64) * (n + 1) + np.arange(n)
    order = np.sort(key)
    kids = np.flatnonzero(depth > 0)
    pos = np.searchsorted(order, (depth[kids] - 1).astype(np.int64) * (n + 1) + kids) - 1
    if len(kids) and (pos < 0).any():
        return False
    par = order[pos] % (n + 1) if len(kids) else np.zeros(0, dtype=np.int64)
    ok = (depth[par] == depth[kids] - 1) & (par < kids) & (end[par] > t[kids]) & (end[kids] <= end[par])
    if not ok.all():
        return False
    parent_out[kids] = par + offset
    depth_out[:] = depth
    return True


def _walk(segments, ts_a: np.ndarray, end_a: np.ndarray, parent_a: np.ndarray, depth_a: np.ndarray) -> None:
    """The stack walk itself, on plain Python lists (numpy scalars would triple its cost)."""
    for a, b in segments:
        ts = ts_a[a:b].tolist()
        end = end_a[a:b].tolist()
        parent = [-1] * (b - a)
        depth = [0] * (b - a)
        stack: list[int] = []
        for i in range(b - a):
            t = ts[i] + EPS
            while stack and end[stack[-1]] <= t:
                stack.pop()
            if stack:
                p = stack[-1]
                parent[i] = p + a
                depth[i] = depth[p] + 1
            stack.append(i)
        parent_a[a:b] = parent
        depth_a[a:b] = depth


def top_ops(parent: np.ndarray, depth: np.ndarray, is_op: np.ndarray) -> np.ndarray:
    """Row of the outermost op in the unbroken chain of ops above-or-at each row (-1 if none).

    For a runtime call under aten::item -> aten::_local_scalar_dense this is aten::item: the op a
    user wrote, not the internal one that made the call. Filled top-down, one depth level at a time.
    """
    top = np.where(is_op, np.arange(len(parent)), -1)
    if not len(depth):
        return top
    by_depth = np.argsort(depth, kind="stable")
    cuts = np.searchsorted(depth[by_depth], np.arange(int(depth.max()) + 2))
    for d in range(1, int(depth.max()) + 1):
        rows = by_depth[cuts[d]:cuts[d + 1]]
        p = parent[rows]
        inherit = (p >= 0) & is_op[np.maximum(p, 0)]
        top[rows[inherit]] = top[p[inherit]]
    return top
