"""dependency_wait: work was launched in time, but the GPU could not start it: it waited behind an
event (cudaStreamWaitEvent), another stream or a blocking copy. Launch overhead is not the cause, and
CUDA graphs do not remove it; the fix is in how streams and events are ordered.
"""
from __future__ import annotations

import numpy as np

from .base import Context, Finding, KindSpec

# Small waits behind other streams are normal (a copy stream, a graph's own kernel spacing): reported
# only when they are a large share of the step.
SPEC = KindSpec("dependency_wait", "waiting on dependencies", idle_cause=True, color="#5b7fd6",
                estimate="measured", min_share=0.10)


def analyze(ctx: Context) -> list[Finding]:
    cause = SPEC.kind
    lost = ctx.per_step_median(ctx.per_step[cause])
    gaps = ctx.gaps[ctx.gaps[cause] > 0]
    if gaps.empty:
        return []
    gpu, cpu = ctx.model.gpu, ctx.model.cpu
    waits = []
    for r in gaps.nlargest(5, cause).itertuples():
        g = gpu.loc[r.next_gpu] if r.next_gpu >= 0 else None
        prev = gpu.loc[r.prev_gpu] if r.prev_gpu >= 0 else None
        waits.append({"waited_ms": round(getattr(r, cause) / 1000, 3),
                      "kernel": str(g["name"])[:120] if g is not None else "?",
                      "stream": int(g["stream"]) if g is not None else None,
                      "after": str(prev["name"])[:120] if prev is not None else "(nothing before it)",
                      "after_stream": int(prev["stream"]) if prev is not None else None})
    rt = cpu[cpu["kind"] == "runtime"]
    wait_events = int(rt["name"].str.contains("StreamWaitEvent", regex=False).sum())
    n_steps = max(1, len(ctx.model.steps))
    cross = sum(1 for w in waits if w["stream"] is not None and w["after_stream"] is not None
                and w["stream"] != w["after_stream"])
    ev = {"idle_ms_per_step": round(lost / 1000, 3), "stream_wait_event_calls_per_step": round(wait_events / n_steps, 2),
          "largest_waits": waits}
    share = lost / ctx.median_step_us if ctx.median_step_us else 0.0
    return [Finding(
        kind=cause,
        title=(f"Work launched in time waits on a dependency before it can start ({share:.0%} of each step"
               f"{', across streams' if cross else ''})"),
        lost_per_step_us=lost, lost_total_us=float(np.sum(ctx.gaps[cause])),
        fix=("Find what the waiting kernel depends on (the largest waits name it): a cudaStreamWaitEvent on "
             "an event recorded late, a side stream that serialises with the main one, or a blocking copy "
             "in front of it. Record the event as early as the data is ready, move independent work onto "
             "the waiting stream's idle time, and use non-blocking copies on their own stream."),
        confidence="medium", evidence=ev)]
