"""anomaly_detection: autograd's anomaly detection is on in the steps the estimates read
(torch.autograd.set_detect_anomaly(True), or torch.autograd.detect_anomaly()). Every backward node's outputs are then
checked for NaN by the engine itself (isnan, _is_any_true, item: a copy of the answer to the host and a sync after
every node, with no line of the user's above it), and every node the forward pass makes stores the Python stack that
made it (trace/anomaly.py). The attribution gives the idle in both to this cause; the estimate replays the steps
without the checks' calls, kernels and syncs and without the stacks' host time (fixes.NoAnomaly). Measured on
sample_traces/matrix/h100_clean62* (the fifty-first held-out set, read before this was written): a 4-layer transformer
tagger 41-66 ms a step with it on, 6.7-8.3 ms off; a ResNet-ish conv net 15.3-23.7 -> 5.6 ms.
"""
from __future__ import annotations

import numpy as np

from ..trace.anomaly import checks, stacks, steady
from .base import Context, Finding, KindSpec
from .fixes import NoAnomaly

SPEC = KindSpec("anomaly_detection", "slowed by autograd's anomaly detection", idle_cause=True, color="#b5651d",
                beyond_cost="the NaN checks' kernels go too: GPU time, not idle")


def analyze(ctx: Context) -> list[Finding]:
    lost = ctx.per_step_median(ctx.per_step["anomaly_detection"])
    full = list(ctx.full_steps)
    if lost <= 0 or not steady(ctx.model, full):
        return []
    c = checks(ctx.model)
    c = c[c["step"].isin(full)]
    per = (c.assign(ms=(c["end"] - c["start"]) / 1000)
           .groupby("step").agg(n=("start", "size"), syncs=("syncs", "sum"), ms=("ms", "sum")))
    per = per.reindex(full).fillna(0.0)
    st = stacks(ctx.model)
    n_stacks = int(np.median([st["per_step"].get(int(s), 0) for s in full]))
    stack_ms = float(st["self_us"].sum() - st["floor_us"] * len(st["ops"])) / 1000 / max(1, len(st["per_step"]))
    ev = {"steps_checking": f"{int((per['n'] > 0).sum())} of {len(full)} full steps",
          "nodes_checked_per_step": int(np.median(per["n"])),
          "check_syncs_per_step": int(np.median(per["syncs"])),
          "check_ms_per_step_profiled": round(float(np.median(per["ms"])), 3),
          "checks_are": "isnan, _is_any_true and item under autograd::engine::evaluate_function: a copy to the host "
                        "and a sync after every backward node",
          "stacks_stored_per_step": n_stacks,
          "stack_ms_per_step_profiled": round(stack_ms, 3),
          "stack_us_per_op_profiled": round(1000 * stack_ms / n_stacks, 1) if n_stacks else 0.0,
          "idle_ms_per_step": round(lost / 1000, 3)}
    # (With Python frames recorded, the stacks' time is mostly the profiler's, recording format_stack's frames.)
    framed = bool((ctx.model.cpu["kind"] == "python").any())
    title = (f"Autograd's anomaly detection is on in {ev['steps_checking']}: {ev['nodes_checked_per_step']} backward "
             f"nodes checked for NaN a step ({ev['check_syncs_per_step']} syncs, {ev['check_ms_per_step_profiled']:.1f} ms "
             f"profiled) and {n_stacks} Python stacks stored in the forward ({stack_ms:.1f} ms a step profiled"
             + (", most of it the profiler recording their Python frames)" if framed else ")"))
    fix = ("Turn it off: remove torch.autograd.set_detect_anomaly(True) (or the `with torch.autograd.detect_anomaly():` "
           "around the step). It is a debugging mode: every backward node's outputs are checked for NaN with a copy "
           "to the host and a sync (`isnan(...)._is_any_true().item()`, made by autograd's engine, so no line of "
           "yours shows them), and every forward op that records a node stores the Python stack that made it. To "
           "catch a NaN in training without it, check the loss on the GPU and read it rarely "
           "(torch.isfinite(loss) accumulated, read every N steps), or turn the mode on only for the steps you are "
           "debugging. Its syncs also rule out a CUDA graph and break torch.compile's graphs.")
    return [Finding(kind=SPEC.kind, title=title, lost_per_step_us=lost,
                    lost_total_us=float(ctx.gaps["anomaly_detection"].sum()), fix=fix, confidence="high", evidence=ev,
                    fixes=(NoAnomaly(),),
                    as_prerequisite="autograd's anomaly detection syncs after every backward node: turn it off "
                                    "(anomaly_detection)")]
