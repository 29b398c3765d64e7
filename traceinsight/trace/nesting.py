"""nesting: parent and depth of every CPU range on its thread, and the op a runtime call belongs to.

The rule is a stack walk over start-sorted ranges (thread, start, longer first, runtime calls last,
External id, name): a range's parent is the innermost earlier range on its thread still open at its
start (EPS of slack for clock jitter). A range that overruns its parent's end stays its child, so
the walk cannot be replaced by counting ends (ProfilerStep ranges and Python frames overlap that way
once a step); it runs in plain Python over lists, about 0.15 us a range, and gives the depths;
the parents follow from them, vectorised.
"""
from __future__ import annotations

import math

import numpy as np

EPS = 0.001


def nesting_order(thread_rank: np.ndarray, ts: np.ndarray, dur: np.ndarray, is_runtime: np.ndarray,
                  ext_id: np.ndarray, names_of) -> np.ndarray:
    """Row order for the walk: thread, start, longer first, runtime calls last, External id, name.

    names_of(rows) gives the names of those rows (only asked for rows that tie on everything else).
    Equal ranges (aten::detach and detach): the outer op has the smaller External id, so the order, and
    the tree, do not depend on the order of events in the file. The later keys, and then the name,
    are only looked at on the rows that tie on the earlier ones.
    """
    keys = [thread_rank, ts, -dur, is_runtime.astype(np.int8), ext_id]
    # Thread and start decide almost every pair: two stable argsorts, then the other keys only on
    # runs of rows with the same thread and start.
    order = np.argsort(ts, kind="stable")
    order = order[np.argsort(thread_rank[order], kind="stable")]
    if len(order) < 2:
        return order
    same = (thread_rank[order][1:] == thread_rank[order][:-1]) & (ts[order][1:] == ts[order][:-1])
    if same.any():
        tied = np.zeros(len(order), dtype=bool)
        tied[1:] |= same
        tied[:-1] |= same
        idx = np.flatnonzero(tied)
        run = np.cumsum(~np.concatenate([[False], same]))[idx]
        rows = order[idx]
        sub = np.lexsort([k[rows] for k in keys[::-1][:3]] + [run])
        order = order.copy()
        order[idx] = rows[sub]
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
    names = dict(zip(idx.tolist(), names_of(order[idx])))
    resorted = sorted(idx.tolist(), key=lambda i: (run[i], names[i]))
    order = order.copy()
    order[idx] = order[np.array(resorted)]
    return order


def nest(thread: np.ndarray, ts: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """parent (row, -1 at top level) and depth of rows already in nesting order."""
    n = len(ts)
    depth = np.zeros(n, dtype=np.int32)
    if n:
        bounds = np.flatnonzero(thread[1:] != thread[:-1]) + 1
        for a, b in zip([0, *bounds.tolist()], [*bounds.tolist(), n]):
            _walk(ts, end, a, b, depth)
    return _parents(depth), depth


_WALK_CHUNK = 1 << 18


def _walk(ts_a: np.ndarray, end_a: np.ndarray, a: int, b: int, depth_a: np.ndarray) -> None:
    """Depth of the rows a..b-1 of one thread: how many ranges are still open at each start. The
    stack walk itself, on plain Python lists (numpy scalars would triple its cost), a chunk of rows at
    a time (the lists of a few million rows would cost more memory than the tables). Only the open
    ranges' ends are kept: the parents follow from the depths (_parents)."""
    stack = [math.inf]       # the open ranges' ends, on a floor that never closes
    pop, push = stack.pop, stack.append
    for c0 in range(a, b, _WALK_CHUNK):
        c1 = min(b, c0 + _WALK_CHUNK)
        depth: list[int] = []
        out = depth.append
        for t, e in zip((ts_a[c0:c1] + EPS).tolist(), end_a[c0:c1].tolist()):
            while stack[-1] <= t:
                pop()
            out(len(stack) - 1)
            push(e)
        depth_a[c0:c1] = depth


def _parents(depth: np.ndarray) -> np.ndarray:
    """Each row's parent from the depths of rows in nesting order: the last earlier row one level up
    (-1 at depth 0). The walk's stack holds the parent on top, and every row pushed after the parent
    is deeper than it, so no later row sits at the parent's level. Threads are contiguous and start at
    depth 0, so the search never crosses into another thread."""
    n = len(depth)
    # Rows in (depth, row) order, keyed so: the parent of row i at depth d is the row of the largest
    # key below (d - 1, i). The keys are looked up in their sorted order (a search that walks forward).
    by = _by_depth(depth)
    key = depth[by].astype(np.int64)
    key *= n
    key += by
    pos = np.searchsorted(key, key - n)
    del key
    pos -= 1
    np.maximum(pos, 0, out=pos)
    parent = np.empty(n, dtype=np.int64)
    parent[by] = by[pos]
    del by, pos
    parent[depth == 0] = -1
    return parent


def depth_levels(depth: np.ndarray) -> list[np.ndarray]:
    """The rows at each depth, ascending, depth 0 first: one sort instead of a pass over every row per
    level (traces nest some 70 levels deep)."""
    if not len(depth):
        return []
    top = int(depth.max())
    by_depth = _by_depth(depth)
    cuts = np.searchsorted(depth[by_depth], np.arange(top + 2))
    return [by_depth[cuts[d]:cuts[d + 1]] for d in range(top + 1)]


def _by_depth(depth: np.ndarray) -> np.ndarray:
    """Rows sorted by depth, ascending rows within a depth. Depths fit 16 bits in any real trace:
    numpy sorts those by radix, in one linear pass."""
    if not len(depth):
        return np.zeros(0, dtype=np.intp)
    key = depth.astype(np.int16) if int(depth.max()) < 2 ** 15 else depth
    return np.argsort(key, kind="stable")


def top_ops(parent: np.ndarray, depth: np.ndarray, is_op: np.ndarray) -> np.ndarray:
    """Row of the outermost op in the unbroken chain of ops above-or-at each row (-1 if none).

    For a runtime call under aten::item -> aten::_local_scalar_dense this is aten::item: the op a
    user wrote, not the internal one that made the call. Filled top-down, one depth level at a time.
    """
    top = np.where(is_op, np.arange(len(parent)), -1)
    for rows in depth_levels(depth)[1:]:
        p = parent[rows]
        inherit = (p >= 0) & is_op[np.maximum(p, 0)]
        top[rows[inherit]] = top[p[inherit]]
    return top


def innermost_marked(parent: np.ndarray, depth: np.ndarray, mark: np.ndarray) -> np.ndarray:
    """Per row: the innermost marked row at or above it on its thread (-1: none). Filled top-down, one depth level
    at a time (`>= 0`: the row is, or is inside, a marked range)."""
    out = np.where(mark, np.arange(len(parent)), -1)
    for rows in depth_levels(depth)[1:]:
        p = parent[rows]
        inherit = (p >= 0) & ~mark[rows]
        out[rows[inherit]] = out[p[inherit]]
    return out
