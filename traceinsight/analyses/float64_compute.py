"""float64_compute: a program that runs its model in float64 (doubles) by accident. numpy makes float64 arrays,
torch.from_numpy keeps the dtype, and model.double() is a common answer to the dtype error that follows: every GEMM,
convolution and elementwise kernel then runs on doubles. Which kernels those are is trace/precision.py's (FP64).

The fix is float32 data and model with TF32 allowed. Its estimate scales the float64 kernels: the GEMMs and
convolutions by fp32_matmul's TF32 speed-up (on a data-centre GPU float64 runs at the plain-FP32 rate), the rest by
half (their bytes halve; they are memory-bound). A GPU with a slow float64 unit (a consumer card's 1/64 rate) gains
more than this says. Drafted before the fifty-fifth held-out set was recorded, and measured only there (two
programs on one H200 host, sample_traces/matrix/README.md: an MLP 5.4x, a 1-D conv net 4.4-5.2x, predicted -3% to -18%
once cuDNN's float64 convolutions, which name their type only in pointer parameters, were read): estimate/likely.py
gives the kind no band, the report says it is not validated, and the confidence is low.
"""
from __future__ import annotations

import re

import numpy as np

from ..trace.precision import FP64, FP64_MATMUL
from ..trace.unasked import launched_in
from .base import KERNELS_GO, Context, Finding, KindSpec, top_op
from .fixes import ScaleKernels
from .fp32_matmul import PEAK_RATIO, TF32_SHARE, tensor_core_arch

SPEC = KindSpec("float64_compute", "slowed by float64 compute",
                cost_basis="the float64 kernels' measured time less that time in float32 (GEMMs and convolutions "
                           "at the assumed TF32 speed-up, the rest at half: half the bytes)",
                beyond_cost=KERNELS_GO)

# Below this share of the GPU's time float64 is a deliberate detail (a metric summed in doubles), not a finding.
MIN_GPU_SHARE = 0.05
# A GEMM this short is bound by its launch and its memory latency: it gains what the memory-bound kernels gain.
MIN_KERNEL_US = 10.0
# The rest: float32 moves half the bytes (the best end); a kernel bound by its latency gains less (the worst).
HALF_BYTES = 0.5
HALF_BYTES_RANGE = (0.5, 0.8)


def analyze(ctx: Context) -> list[Finding]:
    m = ctx.model
    g = m.gpu
    kern = (g["kind"] == "kernel").to_numpy() & m.gpu_match(FP64)
    if not kern.any():
        return []
    k = ctx.gpu_in_full_steps(g[kern & ~launched_in(m, g)])
    busy = float(ctx.gpu_in_full_steps(g)["dur"].sum())
    if k.empty or not busy or k["dur"].sum() < MIN_GPU_SHARE * busy:
        return []
    typical = k.groupby("name")["dur"].median()
    matmul = {n for n in typical.index if re.search(FP64_MATMUL, n) and typical[n] >= MIN_KERNEL_US}
    arch = tensor_core_arch(ctx)
    peak = PEAK_RATIO.get(arch, 8.0) if arch and arch >= 8 else 2.0   # (no TF32 before Ampere: float32 only)
    central = max(2.0, TF32_SHARE * peak)
    is_mm = k["name"].isin(matmul).to_numpy()
    factor = np.where(is_mm, 1 / central, HALF_BYTES)
    k = k.assign(step=ctx.step_of(k["ts"].to_numpy()), saved=k["dur"].to_numpy() * (1 - factor))
    t = ctx.per_step_median(k.groupby("step")["dur"].sum())
    frac = float(k["saved"].sum()) / float(k["dur"].sum())
    cpu = m.cpu
    ops = k.assign(op=[top_op(cpu, int(r)) if r >= 0 else "?" for r in k["launcher"]]).groupby("op")["dur"].sum()
    ev = {"float64_ms_per_step": round(t / 1000, 3),
          "pct_of_gpu_time": round(100 * float(k["dur"].sum()) / busy, 1),
          "gemm_and_conv_pct": round(100 * float(k["dur"][is_mm].sum()) / float(k["dur"].sum()), 1),
          "ms_by_op_in_window": {str(o)[:80]: round(float(v) / 1000, 3) for o, v in ops.sort_values(ascending=False).head(6).items()},
          "kernels": k["name"].str.slice(0, 120).value_counts().head(4).to_dict(),
          "assumed_speedup": (f"GEMMs and convolutions {central:.1f}x (range 2x-{peak:.1f}x, this GPU's TF32/FP32 peak "
                              f"ratio), the rest 2x (half the bytes); not validated: measured on two programs on one H200")}
    top = ", ".join([o for o in ev["ms_by_op_in_window"] if o != "?"][:3]) or "ops not in the trace"
    fixes = []
    if matmul:
        fixes.append(ScaleKernels("^(?:" + "|".join(re.escape(n) for n in sorted(matmul)) + ")$", 1 / central,
                                  bounds=(1 / peak, 1 / 2.0)))
    rest = sorted(set(k["name"]) - matmul)
    if rest:
        fixes.append(ScaleKernels("^(?:" + "|".join(re.escape(n) for n in rest) + ")$", HALF_BYTES,
                                  bounds=HALF_BYTES_RANGE))
    return [Finding(
        kind=SPEC.kind,
        title=f"The model computes in float64: {ev['pct_of_gpu_time']}% of GPU time in float64 kernels ({top})",
        lost_per_step_us=t * frac, lost_total_us=float(k["dur"].sum()) * frac,
        fix=("Run in float32: cast numpy arrays with .astype(np.float32) before torch.from_numpy (numpy makes float64 "
             "and torch keeps it), drop model.double() and dtype=torch.float64, then allow TF32 matmuls "
             "(torch.set_float32_matmul_precision('high')) or autocast to bf16. Keep float64 only where the digits "
             "matter (a long running sum of a metric)."),
        confidence="low", evidence=ev, fixes=tuple(fixes))]
