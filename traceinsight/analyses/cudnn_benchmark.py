"""cudnn_benchmark: cuDNN searches its algorithms inside the steps the estimates read. With
torch.backends.cudnn.benchmark=True, each convolution meeting a shape not seen before in the process times up to ten
algorithms, waiting for each (trace/cudnn_search.py); a program whose input shapes change every step (audio or text
padded to each batch's length, images at their own size) pays that on every step, most of it host time in which the
GPU idles. The attribution gives that idle to this cause.

Where only the first steps search (a warm-up, a few buckets met once), those steps are the warm-up's (trace/steps.py)
and no finding is made; this one is for a window where most steps search. Its estimate replays the steps without the
trials' calls and kernels, keeping PLAN_US of host time for each plan the search chose: with benchmark off cuDNN's
heuristics still build a plan for each new shape. Measured on sample_traces/matrix/h100_clean59* (the fiftieth
held-out set, read before this was written): a raw-audio classifier 585-706 ms -> 42-62 ms a step, a denoiser 69-113
-> 6.7-11.6 ms; in the after traces a new shape's plan took 1.7-1.9 ms profiled (3.0-3.3 ms in one slow process), a
cached one 0.03 ms. Padding the inputs to a few shapes instead (each searched once) keeps none of it: the control of
the same set, four bucketed lengths, ran 8.1-10.4 ms a step where benchmark off ran 42-62 ms.
"""
from __future__ import annotations

import numpy as np

from ..trace.cudnn_search import searches, steady
from .base import Context, Finding, KindSpec
from .fixes import NoSearch

SPEC = KindSpec("cudnn_benchmark", "searching cuDNN algorithms (cudnn.benchmark)", idle_cause=True,
                color="#8c6d31", beyond_cost="the trials' kernels go too: GPU time the search spent, not idle")

PLAN_US = 1500.0              # un-profiled host time to build one plan for a new shape with the search off
PLAN_US_BOUNDS = (750.0, 3000.0)
BUCKETED = ("bucketed", "the inputs padded to a few fixed shapes, benchmark left on (each shape searched once; the "
            "padding's extra GPU work not counted)")


def analyze(ctx: Context) -> list[Finding]:
    lost = ctx.per_step_median(ctx.per_step["cudnn_benchmark"])
    full = list(ctx.full_steps)
    if lost <= 0 or not steady(ctx.model, full):
        return []
    s = searches(ctx.model)
    s = s[s["step"].isin(full)]
    per_step = (s.assign(ms=(s["end"] - s["start"]) / 1000)
                .groupby("step").agg(ops=("op", "size"), plans=("plans", "sum"), ms=("ms", "sum"))
                .reindex(full).fillna(0.0))
    ops, plans = int(np.median(per_step["ops"])), int(np.median(per_step["plans"]))
    search_ms = float(np.median(per_step["ms"]))
    # With the search off, each new shape's plan is still built: the share of the search's host time that stays.
    keep = [min(1.0, plans * us / (1000 * search_ms)) if search_ms > 0 else 1.0
            for us in (PLAN_US, *PLAN_US_BOUNDS)]
    names = s["name"].value_counts()
    ev = {"steps_searching": f"{int((per_step['ops'] > 0).sum())} of {len(full)} full steps",
          "searched_ops_per_step": ops,
          "searches_per_step": plans,
          "searches_are": "a convolution's backward searches twice (its input's gradient and its weights')",
          "search_ms_per_step": round(search_ms, 3),
          "syncs_per_searched_op": int(np.median(s["syncs"])),
          "searched_ops": {str(k): int(v) for k, v in names.head(5).items()},
          "idle_ms_per_step": round(lost / 1000, 3),
          "plan_ms_kept_per_search": PLAN_US / 1000}
    title = (f"cuDNN searches its algorithms again in {ev['steps_searching']} ({plans} "
             f"{'search' if plans == 1 else 'searches'} in {ops} {'op' if ops == 1 else 'ops'} a step, "
             f"{search_ms:.1f} ms of searching a step, median): torch.backends.cudnn.benchmark=True meets input "
             "shapes that change from step to step")
    fix = ("Set torch.backends.cudnn.benchmark = False, or keep it on and pad the inputs to a few fixed shapes "
           "(buckets: lengths to a multiple of a second or of 64 frames, images to a few sizes), each then searched "
           "once. The search runs for every input shape not seen before in the process, and here the shapes change "
           "every step (lengths padded to each batch's longest, images at their own size), so it never pays back. "
           "With it off cuDNN's heuristics still build a plan for each new shape (about "
           f"{PLAN_US / 1000:g} ms a plan on our H100 hosts, which the estimate keeps); buckets avoid that too (the "
           "other way below), provided the padding is masked (attention and normalisation over time) or cropped "
           "from the output. torch.backends.cudnn.benchmark_limit (10 by default) caps the candidates each search "
           "times, a middle way that still searches every new shape. Shapes that change every step also rule out a "
           "CUDA graph and torch.compile's mode=\"reduce-overhead\" until they are bucketed. If the shapes stop "
           "changing after the first steps, this window is warm-up: record after it.")
    return [Finding(kind=SPEC.kind, title=title, lost_per_step_us=lost,
                    lost_total_us=float(ctx.gaps["cudnn_benchmark"].sum()), fix=fix, confidence="high", evidence=ev,
                    fixes=(NoSearch(keep[0], (keep[1], keep[2])),),
                    alternatives=((*BUCKETED, (NoSearch(0.0),)),),
                    # (a CUDA graph replays the shapes it captured: the inputs padded to a few first)
                    as_prerequisite="the input shapes change every step: pad them to a few fixed shapes "
                                    "(cudnn_benchmark); a CUDA graph replays only the shapes it captured")]
