"""launch_overhead: the GPU waits while the CPU issues work: many short kernels, launch calls and
dispatcher/Python time back to back, and the queue never builds up.

Cost = idle time attribution.py gave to feeding the GPU (plus launch latency), median per step.
"""
from __future__ import annotations

import re

import numpy as np


from ..trace.facts import compiled_wrapper_us, program_facts
from .fixes import CudaGraph
from .unfused_optimizer import for_loop_steps
from .base import Context, Finding, KindSpec

SPEC = KindSpec("launch_overhead", "launch-bound", idle_cause=True, color="#e8833a", prerequisites=("sync_stall",))


GRAPHED = 0.5      # share of kernel time already replayed from graphs: the step is graphed
COMPILED = 0.2     # share of kernels that are Triton's: the step is compiled


def _advice(p: dict, wrapper_us=lambda: 0.0) -> tuple[str, str, tuple]:
    """(program, fix, typed fixes) for what the program already does: eager -> compile / graphs;
    compiled -> reduce-overhead; already graphed -> what a graph cannot remove."""
    if p["graphed_share"] >= GRAPHED:
        return ("graphed", f"{p['graphed_share']:.0%} of the GPU time already runs from CUDA-graph replays: "
                "what is left is the CPU between replays. Trim the Python between graph launches (input "
                "preparation, sampling, bookkeeping), copy inputs into the graph's static buffers with "
                "non_blocking copies, and give each replay more work (bigger batches, more tokens per "
                "launch).", ())
    if p["kernels"] and p["triton_kernels"] / p["kernels"] >= COMPILED:
        return ("compiled", "The step is already compiled (Triton kernels): compile it with "
                "torch.compile(model, mode=\"reduce-overhead\") so the compiled step replays as a CUDA graph, "
                "and remove graph breaks and syncs that keep it from being captured.",
                (CudaGraph(wrapper_us=wrapper_us(), compiled_only=True, python_share=COMPILED_PYTHON_SHARE,
                           bounds=COMPILED_PYTHON_BOUNDS),))
    return ("eager", "Cut the per-kernel CPU cost: capture the step in a CUDA graph "
            "(torch.compile(model, mode=\"reduce-overhead\") or torch.cuda.graph / make_graphed_callables), "
            "fuse small ops with torch.compile, or give each kernel more work (bigger batch, fewer, larger "
            "layers).", (CudaGraph(),))


# A for-loop optimizer made capturable=True (needed to capture it) keeps its step count and bias
# corrections on the GPU: Adam(foreach=False, capturable=True) measured 2.7 more kernels per kernel of
# the eager step, each about as long as the trace's shortest kernels (the matrix's unfused_optimizer
# graph variant on H100 and H200: +500 kernels, +0.6 ms per step over 26 parameter tensors).
CAPTURABLE_KERNELS_PER_KERNEL = 2.7
# A compiled step's own Python (Dynamo's guards, AOTAutograd's wrapper, cudagraph trees' call) ran at
# 0.45-0.75 of its profiled time un-profiled (four reduce-overhead programs on H100 and H200: the
# measured step against the profiled one, the graph launch's per-node profiling cost left out); the
# per-event cost model does not see it, so the graph estimate of a compiled step is a range.
COMPILED_PYTHON_SHARE = 0.6
COMPILED_PYTHON_BOUNDS = (0.45, 0.75)
# The optimizers whose capturable=True step keeps a step count on the GPU (torch.optim's Adam family).
CAPTURABLE = re.compile(r"#(Adam|AdamW|Adamax|NAdam|RAdam)\.step")


def _capturable(ctx: Context, ev: dict):
    """(regions, factor on their kernels' time) for a for-loop optimizer captured in a graph, or None."""
    got = for_loop_steps(ctx)
    if got is None:
        return None
    regions, rows = got
    if not CAPTURABLE.search(str(regions["name"].iloc[0])):
        return None     # no step count to keep on the GPU (SGD): captured as it is
    k = ctx.gpu_in_full_steps(ctx.model.gpu)
    k = k[k["kind"] == "kernel"]
    gpu_us = float(np.median([r[3] for r in rows]))
    if not len(k) or gpu_us <= 0:
        return None
    extra = CAPTURABLE_KERNELS_PER_KERNEL * float(np.median([r[2] for r in rows])) * float(k["dur"].quantile(0.1))
    ev["capturable_optimizer_extra_gpu_ms_per_step"] = round(extra / 1000, 3)
    return (tuple((float(r.ts), float(r.end), r.thread) for r in regions.itertuples()), 1.0 + extra / gpu_us)


def analyze(ctx: Context) -> list[Finding]:
    prog = program_facts(ctx.model)
    if prog["capture_calls"] or prog["capture_ranges"]:
        return []  # a capture is not a steady-state step: graph_capture says so
    per_step = ctx.per_step["launch_overhead"]
    lost = ctx.per_step_median(per_step)
    g = ctx.gpu_in_full_steps(ctx.model.gpu)
    k = g[g["kind"] == "kernel"]
    cpu = ctx.model.cpu
    launch_dur = cpu["dur"][(cpu["rkind"] == "launch").to_numpy()]
    per_step_k = len(k) / ctx.n_full
    med_kernel = float(k["dur"].median()) if len(k) else 0.0
    small = float((k["dur"] < 10).mean() * 100) if len(k) else 0.0
    ev = {
        "kernels_per_step": round(per_step_k, 1),
        "median_kernel_us": round(med_kernel, 2),
        "pct_kernels_under_10us": round(small, 1),
        "median_launch_call_us": round(float(launch_dur.median()), 2) if len(launch_dur) else None,
        "cpu_us_per_kernel": round(ctx.median_step_us / per_step_k, 2) if per_step_k else None,
        "idle_ms_per_step": round(lost / 1000, 3),
        "top_kernels_by_count": k["name"].str.slice(0, 120).value_counts().head(5).to_dict(),
    }
    share = lost / ctx.median_step_us if ctx.median_step_us else 0
    conf = "high" if share > 0.3 and med_kernel < 30 else ("medium" if share > 0.1 else "low")
    program, fix, plan = _advice(prog, lambda: compiled_wrapper_us(ctx.model, ctx.full_steps) or 0.0)
    if program == "eager" and plan:
        plan = (CudaGraph(optimizer=_capturable(ctx, ev)),)
    if program == "eager" and ctx.model.cpu_match(r"^Optimizer\.step#").any():
        # A for-loop or foreach optimizer keeps its step count on the CPU: a capture fails on it.
        fix += (" An optimizer stepped inside a torch.cuda.graph capture must keep its state on the GPU: "
                "construct it with capturable=True (e.g. torch.optim.Adam(params, fused=True, "
                "capturable=True)).")
    ev["program"] = program
    ev["graphed_share_pct"] = round(100 * prog["graphed_share"], 1)
    if program == "graphed":
        conf = "low"
    return [Finding(
        kind="launch_overhead",
        title=f"The GPU waits on the CPU to launch work: {per_step_k:.0f} kernels per step, median "
              f"{med_kernel:.1f} us each, {share:.0%} of each step idle between them",
        lost_per_step_us=lost, lost_total_us=float(ctx.gaps["launch_overhead"].sum()),
        fix=fix, confidence=conf, evidence=ev, fixes=plan)]
