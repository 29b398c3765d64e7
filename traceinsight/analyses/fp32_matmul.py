"""fp32_matmul: GEMMs and convolutions in full FP32 (no tensor cores) on a GPU that has tensor cores.

Which kernels those are is trace/precision.py's. The fix's speed-up is not in the trace, so the estimate is
a range (2x to the peak ratio) and says so.
Ampere and later take FP32 inputs on TF32 tensor cores (one setting). Volta and Turing have fp16 tensor
cores only: the fix is mixed precision (autocast to fp16 with a GradScaler), and its estimate is not
calibrated on those GPUs (no measured pair), so it is low confidence.
"""
from __future__ import annotations

import re

import numpy as np

from ..trace.precision import FP32_CONV, FP32_CONV_EXTRAS, FP32_GEMM_ONLY, fp32_convolutions_count
from .base import KERNELS_GO, Context, Finding, KindSpec
from .fixes import DropKernels, ScaleKernels

SPEC = KindSpec("fp32_matmul", "slowed by FP32 matmuls",
                cost_basis="the FP32 kernels' measured time less that time at the assumed tensor-core speed-up",
                beyond_cost=KERNELS_GO)

# A kernel this short is bound by its launch and its memory latency, not its arithmetic: tensor cores do
# not shorten it (cuDNN picks FP32 FFMA kernels for a batch-1 net's 6 us convolutions under TF32 too).
MIN_KERNEL_US = 10.0
# Below this share of the GPU's time FP32 kernels are noise, not a finding (0.1% of an A100's step had read
# "saves next to nothing" beside advice the program follows).
MIN_GPU_SHARE = 0.01
# Dense peak of the tensor-core path (TF32; fp16 on Volta and Turing) over plain FP32, by architecture
# (vendor spec sheets: V100 125 against 15.7 TFLOPS, T4 65 against 8.1).
PEAK_RATIO = {7: 8.0, 8: 8.0, 9: 7.4, 10: 8.0, 12: 8.0}
# How much of the peak ratio a GEMM gets, by its FP32 duration d: 1 + (peak - 1) * d / (d + GEMM_HALF_US).
# Fitted on our matrix's 151 distinct FP32 GEMMs matched op by op to their TF32 runs (five programs, H100 and
# H200, 2026-12-01): a 15 us GEMM gained 1.7-2x, 100-300 us ones 4-6x, 1-3 ms ones 7-9x; the fitted peak was
# the spec sheet's (7.25 against 7.4). Left one program out, the fit read each program's GEMM time within
# -5%..+11% of its measured TF32 gain (4.9-6.6x), where one constant (0.6 x peak, 4.4x) read it -10..-33%.
# Not convolutions: cuDNN's FP32 paths (transposes around them) gained 4.1-4.3x over their ops whatever their
# length (holdout21_fp32_convnet_notf32), so they keep the central guess.
GEMM_HALF_US = 120.0
# Volta and Turing: NVIDIA's mixed-precision figures for ResNet-50 training on a V100 are about 3x the
# FP32 throughput; the GEMMs and convolutions alone gain at least that. Not measured by us.
FP16_ONLY_SPEEDUP = 3.0


def tensor_core_arch(ctx: Context) -> int | None:
    for d in ctx.model.devices.values():
        if d.compute_capability and d.compute_capability[0] >= 7 and "AMD" not in (d.name or ""):
            return d.compute_capability[0]
    return None


def analyze(ctx: Context) -> list[Finding]:
    gpu = ctx.model.gpu
    m = ctx.model
    convs = fp32_convolutions_count(m)
    fp32 = gpu[(gpu["kind"] == "kernel").to_numpy() & m.gpu_match(FP32_GEMM_ONLY + (f"|{FP32_CONV}" if convs else ""))]
    # By each kernel's typical run, not each run: a 6.7 us convolution that took 10 us four times in 25 is
    # still a 6.7 us one.
    typical = fp32.groupby("name")["dur"].median()
    names = sorted(typical.index[typical >= MIN_KERNEL_US])
    fp32 = fp32[fp32["name"].isin(names)]
    arch = tensor_core_arch(ctx)
    busy = float(ctx.gpu_in_full_steps(gpu)["dur"].sum())
    if fp32.empty or arch is None or not busy:
        return []
    peak = PEAK_RATIO.get(arch, 8.0)
    fp16_only = arch < 8
    # Convolutions (and every kernel where the fix is fp16 mixed precision): one central guess, 60% of peak.
    central = FP16_ONLY_SPEEDUP if fp16_only else max(2.0, 0.6 * peak)
    gemm = np.zeros(len(fp32), dtype=bool) if fp16_only else fp32["name"].str.contains(FP32_GEMM_ONLY).to_numpy()
    law = ScaleKernels("x", 1 / peak, half_us=GEMM_HALF_US)
    new = np.where(gemm, law.scaled(fp32["dur"].to_numpy()), fp32["dur"].to_numpy() / central)
    fp32 = fp32.assign(step=ctx.step_of(fp32["ts"].to_numpy()), saved=fp32["dur"].to_numpy() - new)
    per_step = fp32.groupby("step")["dur"].sum()
    t = ctx.per_step_median(per_step)
    full = fp32[np.isin(fp32["step"], ctx.full_steps)]
    if full["dur"].sum() < MIN_GPU_SHARE * busy:
        return []
    # The speed-up over the step's FP32 kernels (full steps), as the replay takes it.
    speedup = float(full["dur"].sum() / max(1e-9, full["dur"].sum() - full["saved"].sum()))
    lost = t * (1 - 1 / speedup)
    ev = {
        "fp32_gemm_ms_per_step": round(t / 1000, 3),
        "pct_of_gpu_time": round(100 * full["dur"].sum() / busy, 1),
        "kernels": full["name"].str.slice(0, 120).value_counts().head(4).to_dict(),
        "assumed_speedup": (f"{speedup:.1f}x over these kernels (range 2x-{peak:.1f}x, the peak "
                            + ("fp16 tensor-core/FP32 ratio of this GPU; not calibrated on this architecture)"
                               if fp16_only else
                               f"TF32/FP32 ratio of this GPU; a GEMM gains more the longer it runs: half of the "
                               f"peak ratio's gain at {GEMM_HALF_US:.0f} us, a convolution {central:.1f}x)")),
    }
    what = "Matrix multiplies and convolutions" if convs and full["name"].str.contains(FP32_CONV).any() \
        else "Matrix multiplies"
    return [Finding(
        kind=SPEC.kind,
        title=f"{what} run in full FP32 without tensor cores ({ev['pct_of_gpu_time']}% of GPU time)",
        lost_per_step_us=lost, lost_total_us=float(fp32["saved"].sum()),
        fix=("This GPU's tensor cores take fp16, not TF32 or bf16: run the forward and the loss under "
             "torch.autocast('cuda', dtype=torch.float16) and scale the loss with torch.amp.GradScaler('cuda') "
             "(mixed precision)." if fp16_only else
             "Allow TF32 tensor cores: torch.set_float32_matmul_precision('high') (or "
             "torch.backends.cuda.matmul.allow_tf32 = True; cudnn.allow_tf32 for convs), or run the model "
             "under torch.autocast('cuda', dtype=torch.bfloat16)."),
        confidence="low" if fp16_only else "medium", evidence=ev,
        fixes=_scale(names, set(fp32["name"][gemm]), central, peak)
        # The tensor-core path runs one kernel where an FFT convolution ran several: those go, launches and all.
        + ((DropKernels(FP32_CONV_EXTRAS),) if convs and m.gpu_match(FP32_CONV_EXTRAS).any() else ()))]


def _scale(names: list[str], gemm_names: set[str], central: float, peak: float) -> tuple:
    """The fix on the FP32 kernels: GEMMs by their length (GEMM_HALF_US), the rest at the central guess."""
    def pattern(ns):
        return "^(?:" + "|".join(re.escape(n) for n in ns) + ")$"
    gemms = [n for n in names if n in gemm_names]
    rest = [n for n in names if n not in gemm_names]
    return (((ScaleKernels(pattern(gemms), 1 / peak, bounds=(1 / peak, 1 / 2.0), half_us=GEMM_HALF_US),) if gemms else ())
            + ((ScaleKernels(pattern(rest), 1 / central, bounds=(1 / peak, 1 / 2.0)),) if rest else ()))
