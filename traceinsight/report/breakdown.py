"""What every verdict and table reads of an Analysis (report/analyze.py): the median step's GPU busy and idle by
cause, and the un-profiled step the healthy verdict goes by. Functions of the Analysis, importing nothing of it,
so that the verdict (report/verdict.py) and the pipeline that calls it do not import each other."""
from __future__ import annotations

from ..analyses import CAUSES
from ..trace.profiler_cost import measured_unprofiled_us


def breakdown(a) -> dict:
    """Median per full step (us): GPU busy, and idle by cause. Medians do not add up exactly."""
    fs = a.full_steps
    out = {"step": float(fs["dur"].median()), "gpu_busy": float(fs["gpu_busy"].median()),
           "gpu_idle": float(fs["gpu_idle"].median())}
    for c in CAUSES:
        out[c] = float(fs[c].median()) if c in fs else 0.0
    return out


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
