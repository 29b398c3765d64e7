"""Put every rank on one clock.

1. Epoch time: each rank's origin in Unix time comes from baseTimeNanoseconds (ranks.epoch_ns).
2. Check happens-before on blocking collectives (allreduce, allgather, reduce-scatter, all-to-all,
   barrier): no rank can finish one before the last rank started it. Broadcast and reduce are left out:
   their root may finish before the others arrive, when the message fits in the transport's buffers.
3. Only when that is violated (or a rank has no epoch time), correct, one offset per host: ranks of one
   host share its clock, so they never get offsets of their own. Hosts are named by the trace's
   host_name; without one, ranks whose collective end times agree within SAME_HOST_US count as one host.
   The offsets start from the end-time estimate (a blocking collective ends at about the same moment
   on every rank), and Bellman-Ford on the difference constraints
       o_a - o_b <= min over collectives (first end on a - last start on b)
   moves them the least that satisfies every constraint. A host whose end-time gap to the reference
   host changes over the trace is reported as drifting.
Offsets are in microseconds, to subtract from a rank's epoch-aligned times; the host of the lowest rank
is the reference (offset 0).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import warnings as _warnings

import numpy as np

BLOCKING = {"allreduce", "allgather", "reducescatter", "alltoall", "barrier"}
TOL_US = 2.0            # happens-before slack: CPU/GPU clock jitter within one host
SAME_HOST_US = 100.0    # unnamed ranks whose end-time offsets agree this well share a clock
DRIFT_US = 100.0        # change of a host's offset over the trace worth a warning


@dataclass
class Clock:
    method: str
    offsets: np.ndarray                 # per row, us
    violations: int = 0                 # blocking collectives that broke happens-before, before correcting
    max_violation_us: float = 0.0
    hosts: int = 1
    warnings: list = field(default_factory=list)


def _nanmedian(a, axis=None):
    with _warnings.catch_warnings():
        _warnings.simplefilter("ignore", RuntimeWarning)    # all-NaN slices give NaN, as they should
        return np.nanmedian(a, axis=axis)


def _reduce_groups(ufunc, a: np.ndarray, group: np.ndarray, G: int, fill: float) -> np.ndarray:
    """ufunc.reduceat over the rows of each group: [G, columns]. NaN counts as fill."""
    order = np.argsort(group, kind="stable")
    bounds = np.searchsorted(group[order], np.arange(G))
    return ufunc.reduceat(np.where(np.isfinite(a), a, fill)[order], bounds, axis=0)


def align(start: np.ndarray, end: np.ndarray, blocking: np.ndarray, epoch_known: np.ndarray,
          hosts: list) -> Clock:
    """start / end: [rows, columns] epoch-aligned times (us); blocking: which columns to trust."""
    R = start.shape[0]
    S, E = start[:, blocking], end[:, blocking]
    zero = np.zeros(R)
    if R < 2 or S.shape[1] == 0:
        method = "baseTimeNanoseconds" if epoch_known.all() else "none"
        note = [] if R < 2 or epoch_known.all() else ["no epoch time and no blocking collective to align by: "
                                                      "ranks are compared as if their clocks agreed"]
        return Clock(method, zero, warnings=note)
    with np.errstate(all="ignore"):
        gap = np.nanmax(S, axis=0) - np.nanmin(E, axis=0)
    broken = gap > TOL_US
    n_bad, worst = int(broken.sum()), float(np.nanmax(gap)) if broken.any() else 0.0
    if not broken.any() and epoch_known.all():
        return Clock("baseTimeNanoseconds", zero)
    # Each rank's offset against the median end of every collective: the end-time estimate.
    dev = E - _nanmedian(E, axis=0)[None, :]
    d = np.nan_to_num(_nanmedian(dev, axis=1))
    group, G = host_groups(d, hosts)
    ref = group[0]
    est = _group_medians(d, group, G)
    est = est - est[ref]
    warnings: list[str] = []
    emin = _reduce_groups(np.minimum, E, group, G, np.inf)
    smax = _reduce_groups(np.maximum, S, group, G, -np.inf)
    x = _bellman_ford(emin, smax, est, warnings)
    x = x - x[ref]
    warnings += _drift(dev, group, G, x, ref, E)
    if G == 1 and n_bad:
        warnings.append(f"{n_bad} blocking collective(s) end on one rank before another starts, on one host: "
                        "the trace clocks disagree; not corrected")
    method = "baseTimeNanoseconds+bellman-ford" if epoch_known.all() else "collective-end-times"
    return Clock(method, x[group], violations=n_bad, max_violation_us=worst, hosts=G, warnings=warnings)


def _group_medians(d, group, G) -> np.ndarray:
    order = np.lexsort((d, group))
    bounds = np.searchsorted(group[order], np.arange(G + 1))
    sd = d[order]
    return np.array([np.median(sd[bounds[g]:bounds[g + 1]]) for g in range(G)])


def host_groups(d: np.ndarray, hosts: list) -> tuple[np.ndarray, int]:
    """A host index per row: by host name; unnamed rows by agreeing end-time offsets d."""
    R = len(d)
    group = np.full(R, -1)
    names = {h: i for i, h in enumerate(sorted({h for h in hosts if h}))}
    for i, h in enumerate(hosts):
        if h:
            group[i] = names[h]
    unnamed = np.flatnonzero(group < 0)
    if len(unnamed):
        order = np.argsort(d[unnamed], kind="stable")
        cluster = np.concatenate([[0], np.cumsum(np.diff(d[unnamed][order]) > SAME_HOST_US)])
        group[unnamed[order]] = len(names) + cluster
    # Renumber in order of first appearance (row 0's host is host 0).
    uniq, first, inv = np.unique(group, return_index=True, return_inverse=True)
    renum = np.empty(len(uniq), dtype=np.int64)
    renum[np.argsort(first, kind="stable")] = np.arange(len(uniq))
    return renum[inv], len(uniq)


def _bellman_ford(emin, smax, est, warnings) -> np.ndarray:
    """The offsets nearest the estimate (moved only down) that satisfy every pairwise constraint."""
    G = len(est)
    if G == 1:
        return np.zeros(1)
    # W[a, b] = min over collectives of (first end on a - last start on b): o_a - o_b <= W[a, b].
    W = np.full((G, G), np.inf)
    for a in range(G):
        with np.errstate(invalid="ignore"):
            diff = emin[a][None, :] - smax
        W[a] = np.where(np.isnan(diff), np.inf, diff).min(axis=1)
    np.fill_diagonal(W, np.inf)
    # y = x - est:  y_a - y_b <= W[a, b] + tol - (est_a - est_b); edge b -> a.
    Wy = W + TOL_US - (est[:, None] - est[None, :])
    y = np.zeros(G)
    for _ in range(G):
        new = np.minimum(y, (y[None, :] + Wy).min(axis=1))
        if np.array_equal(new, y):
            return est + y
        y = new
    warnings.append("happens-before constraints contradict each other (clock drift, or collectives "
                    "that do not block): offsets from collective end times only")
    return est


def _drift(dev, group, G, x, ref, E) -> list:
    """Hosts whose end-time offset to the reference host changes along the trace (a least-squares
    slope per host, all hosts at once)."""
    ok = np.isfinite(dev)
    tot = _reduce_groups(np.add, np.where(ok, dev, 0.0), group, G, 0.0)
    cnt = _reduce_groups(np.add, ok.astype(float), group, G, 0.0)
    with np.errstate(all="ignore"):
        r = tot / cnt
        r = r - r[ref] - x[:, None]                      # [hosts, collectives]
        t = _nanmedian(E, axis=0)[None, :] + 0 * r
        good = np.isfinite(r) & np.isfinite(t)
        n = good.sum(axis=1)
        tc = np.where(good, t - np.nanmean(np.where(good, t, np.nan), axis=1)[:, None], 0.0)
        rc = np.where(good, r - np.nanmean(np.where(good, r, np.nan), axis=1)[:, None], 0.0)
        slope = (tc * rc).sum(axis=1) / (tc * tc).sum(axis=1)
        span = np.nanmax(np.where(good, t, np.nan), axis=1) - np.nanmin(np.where(good, t, np.nan), axis=1)
        drift = slope * span
    out = []
    for g in np.flatnonzero((n >= 3) & np.isfinite(drift) & (np.abs(drift) > DRIFT_US)):
        if g != ref:
            out.append(f"clock of host #{g} drifts {drift[g] / 1000:+.2f} ms over the trace against host "
                       f"#{ref}: its offset is an average")
    return out
