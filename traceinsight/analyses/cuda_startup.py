"""cuda_startup: the window is mostly CUDA start-up (context creation, lazy module loading, first large
allocations: runtime calls that run long while the GPU sits idle, trace/facts.startup_calls), not a
steady-state step. Its idle is paid once per process, so the fixes a steady step would need are listed,
not ranked, and the verdict says to record after a warm-up.

Only where start-up is most of the steps the estimates read: in a warm-up step that the medians leave out,
or a small part of a long window, the limits say it and the fixes stay ranked (with low confidence).
Real case: HTA's a100_alexnet trace, one 43 s window of which 42 s are cudaDeviceGetStreamPriorityRange
(29.9 s), cudaFree, a first cudaLaunchKernel and cudaMalloc calls, around 66 ms of GPU work; ranked, its
host_bound fix "saved" 14.5 s a step and a sync fix 6.6 s.
"""
from __future__ import annotations

import numpy as np

from ..trace.coverage import seconds_or_ms, startup_calls, startup_spans
from .base import Context, Finding, KindSpec

# Also an idle cause: GPU idle while such a call runs is start-up's (attribution), not the host work, sync
# or launch around it, and no steady-state fix recovers it (estimate/rank.py caps the fixes without it).
SPEC = KindSpec("cuda_startup", "GPU start-up, not a steady-state step", estimate="measured", note=True,
                note_share=0.0, headline=True, idle_cause=True, color="#6b6b3a")

HEADLINE_SHARE = 0.5      # of the full steps' time: start-up this large is what the window shows


def analyze(ctx: Context) -> list[Finding]:
    spans = startup_spans(ctx.model)
    steps = ctx.model.steps
    steps = steps[steps["step"].isin(ctx.full_steps)]
    if not spans or steps.empty:
        return []
    a, b = steps["start"].to_numpy(), steps["end"].to_numpy()
    inside = sum(float(np.clip(np.minimum(b, e) - np.maximum(a, s), 0.0, None).sum()) for _n, s, e in spans)
    window = float((b - a).sum())
    if not window or inside < HEADLINE_SHARE * window:
        return []
    names = startup_calls(ctx.model)      # (per name, longest first)
    top = ", ".join(f"{n} {seconds_or_ms(us)}" for n, us, _k in names[:3])
    return [Finding(
        kind=SPEC.kind,
        title=(f"This trace records {'HIP' if names[0][0].startswith('hip') else 'CUDA'} start-up: "
               f"{seconds_or_ms(inside)} of the {seconds_or_ms(window)} the steps "
               f"span are runtime calls made while the GPU sat idle ({top}), paid once per process."),
        lost_per_step_us=0.0, lost_total_us=0.0,
        fix=("Record again after a warm-up: run a step or two before the profiler starts "
             "(torch.profiler.schedule(wait=1, warmup=1, active=N), calling prof.step() each iteration, or "
             "`traceinsight record --skip N`), so the trace shows steady-state steps. The fixes listed for "
             "this window are what it shows, not what a steady step needs."),
        confidence="high", evidence={"startup_s_in_steps": round(inside / 1e6, 3),
                                     "steps_span_s": round(window / 1e6, 3),
                                     "startup_calls_s": {n: round(us / 1e6, 3) for n, us, _k in names}})]
