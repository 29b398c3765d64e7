"""Interval arithmetic on one rank's timeline, vectorised: unions and how much of a window they cover.

A union is kept as (starts, ends, cum): sorted disjoint intervals and the running total of their
lengths, so "how much of [a, b) is covered" is two binary searches, for any number of windows at once.
"""
from __future__ import annotations

import numpy as np

from ..trace.steps import merged_intervals


def union(starts, ends) -> tuple[np.ndarray, np.ndarray]:
    """Union of [start, end) intervals as sorted disjoint (starts, ends); empty and non-finite ones dropped."""
    starts = np.asarray(starts, dtype=float)
    ends = np.asarray(ends, dtype=float)
    ok = np.isfinite(starts) & np.isfinite(ends) & (ends > starts)
    if not ok.any():
        return starts[ok], ends[ok]
    return merged_intervals(starts[ok], ends[ok])


class Cover:
    """A union of intervals that answers "covered length inside [a, b)" for arrays of windows."""

    def __init__(self, starts, ends):
        self.s, self.e = union(starts, ends)
        self.cum = np.concatenate([[0.0], np.cumsum(self.e - self.s)])

    def upto(self, t) -> np.ndarray:
        """Covered length in (-inf, t)."""
        t = np.asarray(t, dtype=float)
        k = np.searchsorted(self.s, t, side="right")
        prev = np.maximum(k - 1, 0)
        if len(self.s) == 0:
            return np.zeros(t.shape)
        part = np.clip(t - self.s[prev], 0.0, self.e[prev] - self.s[prev])
        return np.where(k > 0, self.cum[prev] + part, 0.0)

    def within(self, a, b) -> np.ndarray:
        """Covered length of each window [a_i, b_i) (0 where b <= a or either is NaN)."""
        a = np.asarray(a, dtype=float)
        b = np.asarray(b, dtype=float)
        ok = np.isfinite(a) & np.isfinite(b) & (b > a)
        a2, b2 = np.where(ok, a, 0.0), np.where(ok, b, 0.0)
        return np.where(ok, self.upto(b2) - self.upto(a2), 0.0)

    @property
    def total(self) -> float:
        return float(self.cum[-1])


def both_within(a: Cover, b: Cover, w0, w1) -> np.ndarray:
    """Length of (a AND b) inside each window: |a| + |b| - |a OR b|."""
    either = Cover(np.concatenate([a.s, b.s]), np.concatenate([a.e, b.e]))
    return a.within(w0, w1) + b.within(w0, w1) - either.within(w0, w1)
