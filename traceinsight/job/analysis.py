"""Cross-rank figures on aligned clocks: collective wait, straggler and why, overlap, bandwidth.

All per-(rank, collective) work is numpy on [ranks, collectives] matrices; loops run over steps or
table rows only, never over ranks x collectives.
"""
from __future__ import annotations

import warnings as _warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..trace.collectives import busbw_gbps, dtype_bytes
from .match import Matched
from .summary import WORK

STRAGGLER_MIN_SHARE = 0.02      # a straggler's lag must cost at least this share of a step


def quiet(fn, *a, **k):
    with _warnings.catch_warnings():
        _warnings.simplefilter("ignore", RuntimeWarning)
        return fn(*a, **k)


@dataclass
class Aligned:
    start: np.ndarray        # [rows, cols] us on the job clock
    end: np.ndarray
    use: np.ndarray          # [cols] complete, group > 1, in the chosen steps
    steps: np.ndarray        # the chosen step numbers


def aligned(m: Matched, shift: np.ndarray, offsets: np.ndarray, steps: np.ndarray) -> Aligned:
    d = (shift - offsets)[:, None]
    use = m.complete & (m.col_group > 1) & np.isin(m.col_step, steps)
    return Aligned(m.start + d, m.end + d, use, steps)


def choose_steps(m: Matched, wanted=None) -> np.ndarray:
    """The steps every rank recorded complete (a step cut short on any rank is left out), cut to `wanted`."""
    sets = [set(r.steps["step"][~r.steps["partial"]].tolist()) for r in m.rows if len(r.steps.get("step", ()))]
    common = set.intersection(*sets) if sets else set()
    if wanted is not None:
        common &= set(wanted)
    return np.array(sorted(common), dtype=np.int64)


def per_step_union(s: np.ndarray, e: np.ndarray, col_step: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """Length of the union of [s, e) per (row, step) -> [rows, len(steps)]. Empty where e <= s or NaN."""
    R, C = s.shape
    out = np.zeros((R, len(steps)))
    if R == 0 or len(steps) == 0:
        return out
    k = np.searchsorted(steps, col_step)
    cols = np.flatnonzero((k < len(steps)) & (steps[np.minimum(k, len(steps) - 1)] == col_step))
    if len(cols) == 0:
        return out
    s, e, k = s[:, cols], e[:, cols], k[cols]
    ok = np.isfinite(s) & np.isfinite(e) & (e > s)
    lo = np.nanmin(np.where(ok, s, np.nan)) if ok.any() else 0.0
    span = (np.nanmax(np.where(ok, e, np.nan)) - lo) if ok.any() else 1.0
    big = 4 * span + 1.0
    # Steps laid end to end on one axis, so a single sort per row orders by (step, start) and a
    # running max never carries an interval into the next step. Empty cells sit at their step's start.
    base = k[None, :] * big
    s2 = np.where(ok, s - lo, -span) + base
    e2 = np.where(ok, e - lo, -span) + base
    order = np.argsort(s2, axis=1, kind="stable")
    s2, e2 = np.take_along_axis(s2, order, 1), np.take_along_axis(e2, order, 1)
    run = np.maximum.accumulate(e2, axis=1)
    prev = np.concatenate([np.full((R, 1), -np.inf), run[:, :-1]], axis=1)
    contrib = np.maximum(0.0, e2 - np.maximum(s2, prev))
    flat = (np.arange(R)[:, None] * len(steps) + k[order]).ravel()
    return np.bincount(flat, weights=contrib.ravel(), minlength=R * len(steps)).reshape(R, len(steps))


def collective_wait(a: Aligned, m: Matched) -> np.ndarray:
    """[rows, steps] union of [arrival, min(last arrival, end)] over the rank's matched collectives."""
    s = np.where(a.use[None, :], a.start, np.nan)
    last = quiet(np.nanmax, s, axis=0)
    return per_step_union(s, np.minimum(last[None, :], a.end), m.col_step, a.steps)


def peer_waits(m: Matched, shift: np.ndarray, offsets: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per row: (the starts of its collectives on its own clock, us of each spent waiting for the last rank to
    arrive), for every complete collective of a group of more than one (trace/peer_waits.py takes them out)."""
    d = (shift - offsets)[:, None]
    use = m.complete & (m.col_group > 1)
    s, e = m.start + d, m.end + d
    last = quiet(np.nanmax, np.where(use[None, :], s, np.nan), axis=0) if use.any() else np.full(len(use), np.nan)
    with np.errstate(invalid="ignore"):
        w = np.minimum(last[None, :], e) - s
    out = []
    for r in range(m.n_rows):
        cols = use & np.isfinite(m.start[r]) & np.isfinite(w[r]) & (np.nan_to_num(w[r]) > 0)
        out.append((m.start[r, cols].astype(float), w[r, cols].astype(float)))
    return out


def step_values(m: Matched, steps: np.ndarray, key: str) -> np.ndarray:
    """[rows, len(steps)]: one per-step column of the summaries over the chosen (sorted) steps, NaN where a rank
    lacks the step."""
    out = np.full((m.n_rows, len(steps)), np.nan)
    have = [(i, r.steps) for i, r in enumerate(m.rows) if len(r.steps.get("step", ())) and key in r.steps]
    if not have or not len(steps):
        return out
    row = np.concatenate([np.full(len(st["step"]), i) for i, st in have])
    step = np.concatenate([st["step"] for _, st in have])
    sel = np.isin(step, steps)
    out[row[sel], np.searchsorted(steps, step[sel])] = np.concatenate([st[key] for _, st in have])[sel]
    return out


def step_medians(m: Matched, steps: np.ndarray, keys) -> dict:
    """Per key, per row: the median over the chosen steps of one per-step column of the summaries."""
    return {key: quiet(np.nanmedian, step_values(m, steps, key), axis=1) for key in keys}


def straggler(a: Aligned, m: Matched, step_us: float) -> dict:
    """The rank that arrives clearly last most often, its lag per step, and the columns it was last in."""
    s = np.where(a.use[None, :] & np.isfinite(a.start), a.start, -np.inf)
    R = s.shape[0]
    none = {"row": None, "candidate": None, "lag_us": 0.0, "cols": np.zeros(0, dtype=np.int64), "share": 0.0,
            "counts": np.zeros(R, dtype=np.int64)}
    if R < 2 or not a.use.any():
        return none
    srt = np.sort(s, axis=0)
    with np.errstate(invalid="ignore"):          # -inf - -inf where a column has fewer than 2 arrivals
        margin = srt[-1] - srt[-2]
    eps = max(20.0, 0.002 * step_us)
    clear = a.use & np.isfinite(margin) & (margin > eps)
    last = np.argmax(s, axis=0)
    counts = np.bincount(last[clear], minlength=R)
    if counts.max() == 0:
        return none
    row = int(np.argmax(counts))
    cols = np.flatnonzero(clear & (last == row))
    others = np.delete(a.start[:, cols], row, axis=0)
    med_other = quiet(np.nanmedian, others, axis=0)
    lag = per_step_union(med_other[None, :], a.start[row, cols][None, :], m.col_step[cols], a.steps)[0]
    lag_us = float(np.median(lag)) if len(lag) else 0.0
    share = counts[row] / max(1, int(a.use.sum()))
    return {"row": row if lag_us >= STRAGGLER_MIN_SHARE * step_us else None, "candidate": row,
            "lag_us": lag_us, "cols": cols, "share": float(share), "counts": counts}


def why(m: Matched, srow: int, mrow: int, steps: np.ndarray, gap_us: float, waits=(0.0, 0.0)) -> dict:
    """Compare what the straggler did in its steps with what the median rank did in its own (WORK), against
    `gap_us`, how much more of a step the straggler's own work takes. `waits`: each one's time (us, over the
    steps) spent waiting for the others inside ops, taken out of its "cpu" (a CPU job's collectives block)."""
    def sums(r, wait):
        st = m.rows[r].steps
        sel = np.isin(st.get("step", np.zeros(0)), steps)
        out = np.array([float(np.sum(st[k][sel])) if k in st else 0.0 for k in WORK])
        out[WORK.index("cpu")] = max(0.0, out[WORK.index("cpu")] - wait)
        return out
    n_steps = max(1, len(steps))
    delta = dict(zip(WORK, sums(srow, waits[0]) - sums(mrow, waits[1])))
    lag_us_total = max(gap_us, 1.0) * n_steps
    per_step = {k: round(float(v) / n_steps / 1000, 3) for k, v in delta.items()}
    host = {"host-bound": delta["untraced"], "data-loading": delta["data"], "slower-cpu-ops": delta["cpu"]}
    has_gpu = m.rows[srow].has_gpu
    cause, share = "mixed", 0.0
    if has_gpu and delta["gpu"] >= 0.5 * lag_us_total:
        cause, share = "slower-kernels", delta["gpu"] / lag_us_total
    else:
        pos = sum(v for v in host.values() if v > 0)
        best = max(host, key=host.get)
        if pos > 0 and host[best] >= 0.5 * pos and host[best] >= 0.3 * lag_us_total:
            cause, share = best, host[best] / lag_us_total
    where = {"slower-kernels": "gpu", "slower-cpu-ops": "cpu"}.get(cause)
    return {"cause": cause, "explained_share": round(float(min(share, 9.99)), 3),
            "work_delta_ms_per_step": per_step,
            "top_differences": _op_differences(m.rows[srow], m.rows[mrow], where, 0.05 * gap_us)}


def _op_differences(s, med, where, min_us: float, top: int = 5) -> list:
    """Ops / kernels (by name and input shapes) that took longer per step on the straggler."""
    def table(r):
        n = max(1, len(r.steps.get("step", ())))
        return {(w, name, shape): us / n for w, name, shape, us, _ in r.step_ops if where in (None, w)}
    a, b = table(s), table(med)
    diffs = sorted(((a.get(k, 0.0) - b.get(k, 0.0), k) for k in set(a) | set(b)), key=lambda t: (-t[0], t[1]))
    return [{"where": k[0], "name": k[1], "input_dims": k[2], "straggler_ms_per_step": round(a.get(k, 0) / 1000, 3),
             "median_rank_ms_per_step": round(b.get(k, 0) / 1000, 3),
             "matched": k in b} for d, k in diffs[:top] if d >= max(min_us, 1.0)]


def bandwidth(a: Aligned, m: Matched) -> list[dict]:
    """Per (op, dtype, bytes, group size): count, shortest duration across ranks, algbw and busbw."""
    use = m.complete & np.isin(m.col_step, a.steps)
    if not use.any():
        return []
    dur = quiet(np.nanmin, (m.end - m.start)[:, use], axis=0)
    ops = np.array(m.ops, dtype=object)[m.col_op[use]]
    dts = np.array(m.dtypes, dtype=object)[m.col_dtype[use]]
    size = np.array([dtype_bytes(d) for d in dts], dtype=np.int64)
    nel = np.maximum(m.col_nelems[use], m.col_out_nelems[use])
    group = m.col_group[use]
    # gloo records only the input: an allgather's output is group x larger.
    gather_in_only = (ops == "allgather") & (m.col_out_nelems[use] == 0)
    nel = np.where(gather_in_only, nel * group, nel)
    df = pd.DataFrame({"op": ops, "dtype": dts, "bytes": nel * size, "group_size": group, "dur": dur})
    rows = []
    for (op, dt, nbytes, n), g in df.groupby(["op", "dtype", "bytes", "group_size"], sort=True):
        t = float(np.median(g["dur"]))
        alg = nbytes / (t * 1e3) if t > 0 and nbytes > 0 else None
        bus = busbw_gbps(op, nbytes, int(n), t)
        rows.append({"op": op, "dtype": dt, "bytes": int(nbytes), "group_size": int(n), "count": int(len(g)),
                     "time_us": round(t, 3), "algbw_gbps": round(alg, 3) if alg is not None else None,
                     "busbw_gbps": round(bus, 3) if bus is not None else None})
    return rows
