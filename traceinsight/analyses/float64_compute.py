"""float64_compute: a program that runs its model in float64 (doubles) by accident. numpy makes float64 arrays,
torch.from_numpy keeps the dtype, and model.double() is a common answer to the dtype error that follows: every GEMM,
convolution and elementwise kernel then runs on doubles. Which kernels those are is trace/precision.py's (FP64).

The fix is float32 data and model with TF32 allowed. Its estimate scales the float64 kernels by class:
- cuBLAS's GEMMs run on float64 tensor cores, at the plain-FP32 rate of a data-centre GPU (A100 19.5 against 19.5
  TFLOP/s, H100 67 against 67): they gain fp32_matmul's TF32 speed-up;
- cuDNN's float64 convolutions run its generic engines (implicit_convolve_dgemm, dgrad_engine, wgrad_alg0_engine), on
  the float64 vector units, half the tensor-core rate on those GPUs, and their kernels gain more (12.2x measured, set
  55's conv net); but the float32 step adds what the replay does not: cuDNN's NCHW<->NHWC transposes around its TF32
  kernels, split-K and workspace kernels, their launches. Priced at the GEMMs' speed-up, twice it the range's best
  end (priced at twice it, the conv net's step read +42%);
- the rest (elementwise, reductions, batch norm, matrix-vector products) are memory-bound: half the bytes.
A GPU with a slow float64 unit (a consumer card's 1/64 rate) gains more than this says, and the evidence says so.
Drafted before the fifty-fifth held-out set was recorded, and measured only there (two programs on one H200 host,
sample_traces/matrix/README.md: an MLP 5.4x, a 1-D conv net 4.4-5.2x; its GEMMs gained 6.8x, its convolutions 12.2x,
the rest 0.48-0.77 of their time, read after the recording): estimate/likely.py gives the kind no band, the report
says it is not validated, and the confidence is low.
"""
from __future__ import annotations

import re

import numpy as np

from ..trace.precision import CONV, FP64, FP64_MATMUL
from ..trace.unasked import launched_in
from .base import KERNELS_GO, Context, Finding, KindSpec, top_op
from .fixes import ScaleKernels
from .fp32_matmul import PEAK_RATIO, TF32_SHARE, tensor_core_arch

SPEC = KindSpec("float64_compute", "slowed by float64 compute",
                cost_basis="the float64 kernels' measured time less that time in float32 (GEMMs and convolutions at the "
                           "assumed TF32 speed-up, the rest at half: half the bytes)",
                beyond_cost=KERNELS_GO)

# Below this share of the GPU's time float64 is a deliberate detail (a metric summed in doubles), not a finding.
MIN_GPU_SHARE = 0.05
# A GEMM this short is bound by its launch and its memory latency: it gains what the memory-bound kernels gain.
MIN_KERNEL_US = 10.0
# The rest: float32 moves half the bytes (the best end); a kernel bound by its latency gains less (the worst).
HALF_BYTES = 0.5
HALF_BYTES_RANGE = (0.5, 0.8)
# GPUs whose float64 units run at half their FP32 rate or better; elsewhere float64 is far slower and the gain larger.
DATA_CENTRE = r"A100|A800|A30\b|H100|H800|H200|GH200|B100|B200|GB200|V100|MI[123]\d\d"
OPS = "autograd::engine::evaluate_function: "     # (the backward node's name says which layer)


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
    big = {n for n in typical.index if re.search(FP64_MATMUL, n) and typical[n] >= MIN_KERNEL_US}
    convs = {n for n in big if re.search(CONV, n, re.I)}
    gemms = big - convs
    arch = tensor_core_arch(ctx)
    peak = PEAK_RATIO.get(arch, 8.0) if arch and arch >= 8 else 2.0   # (no TF32 before Ampere: float32 only)
    central = max(2.0, TF32_SHARE * peak)
    factor = np.where(k["name"].isin(big), 1 / central, HALF_BYTES)
    k = k.assign(step=ctx.step_of(k["ts"].to_numpy()), saved=k["dur"].to_numpy() * (1 - factor))
    t = ctx.per_step_median(k.groupby("step")["dur"].sum())
    frac = float(k["saved"].sum()) / float(k["dur"].sum())
    cpu = m.cpu
    ops = k.assign(op=[top_op(cpu, int(r)).replace(OPS, "") if r >= 0 else "" for r in k["launcher"]])
    ops = ops[ops["op"] != ""].groupby("op")["dur"].sum().sort_values(ascending=False)
    by_kernel = k.groupby("name")["dur"].sum().sort_values(ascending=False)
    ev = {"float64_ms_per_step": round(t / 1000, 3),
          "pct_of_gpu_time": round(100 * float(k["dur"].sum()) / busy, 1),
          "gemm_pct": round(100 * float(k["dur"][k["name"].isin(gemms)].sum()) / float(k["dur"].sum()), 1),
          "convolution_pct": round(100 * float(k["dur"][k["name"].isin(convs)].sum()) / float(k["dur"].sum()), 1),
          "ms_by_op_in_window": {str(o)[:80]: round(float(v) / 1000, 3) for o, v in ops.head(6).items()},
          "ms_by_kernel_in_window": {str(n)[:120]: round(float(v) / 1000, 3) for n, v in by_kernel.head(4).items()},
          "assumed_speedup": (f"GEMMs {central:.1f}x (range 2x-{peak:.1f}x, this GPU's TF32/FP32 peak ratio), cuDNN's "
                              f"convolutions the same, up to {2 * peak:.1f}x (its float64 engines run without tensor cores), "
                              f"the rest 2x "
                              f"(half the bytes); not validated: measured on two programs on one H200")}
    if not re.search(DATA_CENTRE, m.device_name() or ""):
        ev["assumed_speedup"] += ("; this GPU may have a slow float64 unit (consumer cards run it at 1/64 of FP32): "
                                  "the gain is then larger than this")
    top = ", ".join(list(ev["ms_by_op_in_window"])[:3]) or "ops not in the trace"
    fixes = []
    if gemms:
        fixes.append(ScaleKernels(_names(gemms), 1 / central, bounds=(1 / peak, 1 / 2.0)))
    if convs:
        fixes.append(ScaleKernels(_names(convs), 1 / central, bounds=(0.5 / peak, 1 / 2.0)))
    rest = set(k["name"]) - big
    if rest:
        fixes.append(ScaleKernels(_names(rest), HALF_BYTES, bounds=HALF_BYTES_RANGE))
    return [Finding(
        kind=SPEC.kind,
        title=f"The model computes in float64: {ev['pct_of_gpu_time']}% of GPU time in float64 kernels ({top})",
        lost_per_step_us=t * frac, lost_total_us=float(k["dur"].sum()) * frac,
        fix=("Run in float32: cast numpy arrays with .astype(np.float32) before torch.from_numpy (numpy makes float64 "
             "and torch keeps it), drop model.double() and dtype=torch.float64; then allow TF32 matmuls "
             "(torch.set_float32_matmul_precision('high'); convolutions take TF32 by default, "
             "torch.backends.cudnn.allow_tf32) or autocast to bf16 (autocast leaves float64 tensors as they are: cast "
             "first). Check the loss curve against the float64 run: TF32 and bf16 keep fewer digits than float32. "
             "Keep float64 only where the digits matter (a long running sum of a metric)."),
        confidence="low", evidence=ev, fixes=tuple(fixes))]


def _names(names: set) -> str:
    return "^(?:" + "|".join(re.escape(n) for n in sorted(names)) + ")$"
