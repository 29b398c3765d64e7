"""profiler_overhead: what recording cost this trace's CPU side (a note about the measurement).

Every recorded op, runtime call and (with_stack) Python frame costs the profiler time on the thread
that ran it (trace/profiler_cost.py: per-event costs fitted on our recordings); kernels are not
inflated. The note gives the profiled median step, the un-profiled step the cost model expects, and
their difference. It is never a fix: only the profiled run pays it.
"""
from __future__ import annotations

import numpy as np

from ..trace.facts import model_has_cpu_ops
from ..trace.profiler_cost import memory_event_us, profiler_options, unprofiled_step_us
from .base import Context, Finding, KindSpec

SPEC = KindSpec("profiler_overhead", "inflated by the profiler", estimate="measured", note=True,
                profiler_cost=True, cost_basis="the profiled step less the un-profiled step (the summary says "
                                               "whether that was measured or estimated)")
FIX = ("Nothing to change in the program: only the profiled run pays this. For true CPU timings measure the "
       "step time outside the profiler's window (traceinsight record does).")
COSTLY_OPTIONS = ("with_stack", "record_shapes", "profile_memory", "with_flops")


def _fix(opts: str, ops: bool = True) -> str:
    """The note's advice: turn off the costlier options that were on (a default trace has none on). Without
    recorded ops record_shapes cost nothing, so it is not named (MI210's GPU-only trace had been told to)."""
    on = [o for o in COSTLY_OPTIONS if o in opts and (ops or o != "record_shapes")]
    if not on:
        return FIX
    return FIX.replace("For true CPU timings ", "For true CPU timings record with " +
                       ", ".join(f"{o}=False" for o in on) + " (traceinsight record's defaults) and ")


def analyze(ctx: Context) -> list[Finding]:
    m = ctx.model
    steps = m.steps[m.steps["step"].isin(ctx.full_steps)]
    if steps.empty:
        return []
    unprof = unprofiled_step_us(m, ctx.full_steps)
    profiled = float(np.median(steps["dur"].to_numpy()))
    # (profile_memory's allocation events are in the un-profiled step's cost model: MEMORY_EVENT_US)
    mem = len(m.memory) / max(1, len(m.steps)) * memory_event_us(m)
    lost = max(0.0, profiled - unprof) if unprof is not None else mem
    if lost <= 0:
        return []
    opts = profiler_options(m)
    ops = model_has_cpu_ops(m)
    if not ops:      # (record_shapes costs nothing where no op was recorded: a review)
        opts += ", runtime calls only"
    ev = {"options_seen": opts, "profiled_step_ms": round(profiled / 1000, 3),
          "unprofiled_step_ms_estimate": round(unprof / 1000, 3) if unprof is not None else None,
          "inflation_ms_per_step": round(lost / 1000, 3),
          "inflation_pct_of_unprofiled_step": round(100 * lost / unprof, 1) if unprof else None}
    return [Finding(
        kind=SPEC.kind, title=title(opts, lost, unprof or profiled),
        lost_per_step_us=lost, lost_total_us=lost * len(steps),
        fix=_fix(opts, ops),
        confidence="medium" if unprof is not None else "low", evidence=ev, fixes=())]


def title(opts: str, lost_us: float, unprofiled_us: float) -> str:
    return (f"Recording ({opts}) added about {lost_us / 1000:.2f} ms to each step: the un-profiled step is "
            f"about {unprofiled_us / 1000:.2f} ms (an estimate); CPU-side figures here are profiled")
