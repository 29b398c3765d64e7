"""profiler_overhead: with_stack / profile_memory / record_shapes make the profiled run slower.

Every Python frame (with_stack) and allocation ([memory] events, profile_memory) is recorded on the
CPU while the program runs, so CPU-side costs in this trace are inflated. We estimate the inflation
from event counts (per-event costs measured on recent PyTorch; a rough figure, said to be one).
The fix is to the measurement, not the program: the other findings' CPU numbers are upper bounds.
"""
from __future__ import annotations

from .base import Context, Finding, KindSpec

SPEC = KindSpec("profiler_overhead", "inflated by the profiler", estimate="measured", note=True)

US_PER_PY_EVENT = 1.0
US_PER_MEMORY_EVENT = 0.5


def analyze(ctx: Context) -> list[Finding]:
    m = ctx.model
    py = int((m.cpu["kind"] == "python").sum())
    mem = int(m.meta.get("n_memory_events", 0))
    per_step = (py * US_PER_PY_EVENT + mem * US_PER_MEMORY_EVENT) / max(1, len(m.steps))
    if per_step <= 0:
        return []
    on = [k for k in ("with_stack", "profile_memory", "record_shapes") if m.meta.get(k)]
    if py:
        on.append("with_stack (python_function events)")
    if mem:
        on.append("profile_memory ([memory] events)")
    ev = {"python_events_per_step": round(py / max(1, len(m.steps)), 1),
          "memory_events_per_step": round(mem / max(1, len(m.steps)), 1),
          "options_seen": sorted(set(on)),
          "estimated_inflation_ms_per_step": round(per_step / 1000, 3)}
    return [Finding(
        kind="profiler_overhead",
        title="Profiler options inflate CPU time in this trace (CPU-side findings are upper bounds)",
        lost_per_step_us=per_step, lost_total_us=per_step * len(m.steps),
        fix="This costs only the profiled run. For true CPU timings record again with with_stack=False "
            "and profile_memory=False (traceinsight record does so by default), and use with_stack only "
            "to find the source line of a sync.",
        confidence="low", evidence=ev, fixes=())]
