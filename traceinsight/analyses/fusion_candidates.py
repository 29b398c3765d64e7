"""fusion_candidates: GPU time spent in chains of small elementwise / reduction kernels.

Each unfused pointwise op reads and writes its tensors through memory; a fused kernel does the chain
in one pass. Only reported when the GPU is the bottleneck (busy most of the step): when the CPU is,
launch_overhead already says so and fusion's gain there is fewer launches. The saving is an
estimate: torch.compile typically removes about half of such kernels' memory traffic; the range
goes from a fifth to four fifths of their time.
"""
from __future__ import annotations

import numpy as np

from .base import Context, Finding, KindSpec
from .fixes import ScaleKernels

SPEC = KindSpec("fusion_candidates", "slowed by unfused elementwise kernels")

ELEMENTWISE = r"elementwise_kernel|vectorized_elementwise|unrolled_elementwise|reduce_kernel|" \
              r"CatArrayBatchedCopy|index_elementwise"
MIN_GPU_SHARE = 0.15      # of the GPU busy time
MIN_BUSY_SHARE = 0.6      # of the step: the GPU must be the bottleneck
FUSED_FACTOR = 0.5


def analyze(ctx: Context) -> list[Finding]:
    m = ctx.model
    gpu = m.gpu
    sel = (gpu["kind"] == "kernel").to_numpy() & m.gpu_match(ELEMENTWISE)
    k = gpu[sel]
    if k.empty:
        return []
    steps = m.steps[m.steps["step"].isin(ctx.full_steps)]
    busy = float(steps["gpu_busy"].median()) if len(steps) else 0.0
    if busy < MIN_BUSY_SHARE * ctx.median_step_us:
        return []
    k = k.assign(step=ctx.step_of(k["ts"].to_numpy()))
    per_step = k.groupby("step")["dur"].sum()
    t = ctx.per_step_median(per_step)
    if t < MIN_GPU_SHARE * busy:
        return []
    full = k[np.isin(k["step"], ctx.full_steps)]
    ev = {
        "elementwise_kernels_per_step": round(len(full) / ctx.n_full, 1),
        "elementwise_ms_per_step": round(t / 1000, 3),
        "pct_of_gpu_busy": round(100 * t / busy, 1) if busy else None,
        "median_kernel_us": round(float(full["dur"].median()), 2) if len(full) else None,
        "top_kernels": full["name"].str.slice(0, 120).value_counts().head(5).to_dict(),
    }
    return [Finding(
        kind="fusion_candidates",
        title=f"{ev['pct_of_gpu_busy']}% of GPU time is small elementwise/reduction kernels that a compiler "
              "could fuse",
        lost_per_step_us=t * (1 - FUSED_FACTOR), lost_total_us=float(per_step.sum()) * (1 - FUSED_FACTOR),
        fix="Fuse the pointwise chains: model = torch.compile(model) (inductor generates fused Triton "
            "kernels), or use fused library ops (F.scaled_dot_product_attention, fused LayerNorm/GELU).",
        confidence="low", evidence=ev,
        fixes=(ScaleKernels(ELEMENTWISE, FUSED_FACTOR, bounds=(0.2, 0.8)),))]
