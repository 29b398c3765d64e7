"""A kernel launch's grid and block (Kineto's raw JSON args, interned by trace/events.py) as numbers for the GPU table:
the grid's rank (equal launches compare equal) and the launch's threads (how much of the GPU one kernel fills)."""
from __future__ import annotations

import json

import numpy as np


def grid_ranks(c, rows: np.ndarray) -> np.ndarray:
    """Each row's launch grid as its rank among the trace's distinct grids (by their text): the same whatever
    the order of the file's events (codes are first-seen order)."""
    vals = c.values("grid")
    rank = np.full(len(vals) + 1, -1, dtype=np.int64)
    rank[sorted(range(len(vals)), key=lambda i: bytes(vals[i]))] = np.arange(len(vals))
    codes = c["grid"][rows]
    return rank[np.where(codes >= 0, codes, len(vals))]


def launch_threads(c, rows: np.ndarray) -> np.ndarray:
    """Each row's launch's threads (its grid's x * y * z times its block's; -1: either missing or unreadable), each
    distinct grid and block parsed once."""
    out = np.full(len(rows), -1, dtype=np.int64)
    grid, block = c["grid"][rows], c["block"][rows]
    has = (grid >= 0) & (block >= 0)
    if has.any():
        g = np.array([_dims_product(bytes(v)) for v in c.values("grid")], dtype=np.int64)
        b = np.array([_dims_product(bytes(v)) for v in c.values("block")], dtype=np.int64)
        n = g[grid[has]] * b[block[has]]
        out[has] = np.where((g[grid[has]] > 0) & (b[block[has]] > 0), n, -1)
    return out


def _dims_product(text: bytes) -> int:
    try:
        dims = json.loads(text)
        n = 1
        for d in dims:
            n *= int(d)
        return n if n > 0 else -1
    except (ValueError, TypeError, OverflowError):
        return -1
