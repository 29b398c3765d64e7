"""launch_overhead: the GPU waits while the CPU issues work: many short kernels, launch calls and
dispatcher/Python time back to back, and the queue never builds up.

Cost = idle time attribution.py gave to feeding the GPU (plus launch latency), median per step.
"""
from __future__ import annotations


from .fixes import CudaGraph
from .base import Context, Finding, KindSpec

SPEC = KindSpec("launch_overhead", "launch-bound", idle_cause=True, color="#e8833a")


def analyze(ctx: Context) -> list[Finding]:
    per_step = ctx.per_step["launch_overhead"]
    lost = ctx.per_step_median(per_step)
    g = ctx.gpu_in_full_steps(ctx.model.gpu)
    k = g[g["kind"] == "kernel"]
    cpu = ctx.model.cpu
    rt = cpu[cpu["rkind"] == "launch"]
    per_step_k = len(k) / ctx.n_full
    med_kernel = float(k["dur"].median()) if len(k) else 0.0
    small = float((k["dur"] < 10).mean() * 100) if len(k) else 0.0
    ev = {
        "kernels_per_step": round(per_step_k, 1),
        "median_kernel_us": round(med_kernel, 2),
        "pct_kernels_under_10us": round(small, 1),
        "median_launch_call_us": round(float(rt["dur"].median()), 2) if len(rt) else None,
        "cpu_us_per_kernel": round(ctx.median_step_us / per_step_k, 2) if per_step_k else None,
        "idle_ms_per_step": round(lost / 1000, 3),
        "top_kernels_by_count": k["name"].str.slice(0, 120).value_counts().head(5).to_dict(),
    }
    share = lost / ctx.median_step_us if ctx.median_step_us else 0
    conf = "high" if share > 0.3 and med_kernel < 30 else ("medium" if share > 0.1 else "low")
    return [Finding(
        kind="launch_overhead",
        title=f"The GPU waits on the CPU to launch work: {per_step_k:.0f} kernels per step, median "
              f"{med_kernel:.1f} us each, {share:.0%} of each step idle between them",
        lost_per_step_us=lost, lost_total_us=float(ctx.gaps["launch_overhead"].sum()),
        fix="Cut the per-kernel CPU cost: capture the step in a CUDA graph "
            "(torch.compile(model, mode=\"reduce-overhead\") or torch.cuda.graph / make_graphed_callables), "
            "fuse small ops with torch.compile, or give each kernel more work (bigger batch, fewer, larger "
            "layers).",
        confidence=conf, evidence=ev, fixes=(CudaGraph(),))]
