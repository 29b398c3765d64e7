"""What every verdict and table reads of an Analysis (report/analyze.py): the steps' median GPU busy, idle, idle
share and idle by cause, and the un-profiled step the healthy verdict goes by. Functions of the Analysis, importing
nothing of it, so that the verdict (report/verdict.py) and the pipeline that calls it do not import each other."""
from __future__ import annotations

import numpy as np

from ..analyses import CAUSES
from ..trace.profiler_cost import measured_unprofiled_us


def breakdown(a) -> dict:
    """Median per full step (us): GPU busy, and idle by cause. Medians do not add up exactly. `idle_share`: the
    median of the steps' own idle shares (idle over that step's length), the one busy/idle share every output
    prints; the median idle over the median step mixes steps (a review read 14.4 ms, one step's idle, over 52.2 ms,
    another's length, as "busy 72%" beside per-step shares of 47-74%)."""
    fs = a.full_steps
    out = {"step": float(fs["dur"].median()), "gpu_busy": float(fs["gpu_busy"].median()),
           "gpu_idle": float(fs["gpu_idle"].median()), "idle_share": idle_share(fs)}
    for c in CAUSES:
        out[c] = float(fs[c].median()) if c in fs else 0.0
    return out


def idle_share(steps) -> float:
    """The median over steps of each one's GPU idle over its length (0..1; nan without a step of some length)."""
    dur = steps["dur"].to_numpy(dtype=float)
    ok = dur > 0
    return float(np.median(steps["gpu_idle"].to_numpy(dtype=float)[ok] / dur[ok])) if ok.any() else float("nan")


def unprofiled_ms_read(a) -> float | None:
    """The un-profiled step the healthy verdict reads (ms): measured by record, or the estimate's upper
    band (None: neither, or the step ran no faster without the profiler)."""
    w = a.whatif or {}
    u = w.get("unprofiled_step_ms")
    if not u:
        return None
    band = w.get("unprofiled_step_range_ms")
    if band and not unprofiled_measured(a):
        u = max(u, band[1])
    return u if u * 1000 < a.median_step_us else None


def unprofiled_measured(a) -> bool:
    """Whether `record` measured the un-profiled step (else the estimate stands in)."""
    return measured_unprofiled_us(a.model) is not None
