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

from ..trace.unasked import launched_in
from ..trace.precision import FP32_CONV, FP32_CONV_EXTRAS, FP32_GEMM_ONLY, fp32_convolutions_count, fp32_gemms_count
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
# The central guess, as a share of the peak ratio: what TF32 made of a program's FP32 GEMM time, measured on
# our matrix (sample_traces/matrix/fit_tf32.py: each GEMM op matched to its TF32 run; 6 programs, 8 with
# their GPU: H100, H200): 4.9-6.6x, median 5.76x (0.78 of peak); each program left out, the others' median read it within
# -13..+17%. It was 0.6 (4.4x): -10..-33%. A law by each GEMM's length (1 + (peak - 1) * d / (d + h)),
# fitted on five of the programs, read them within -5..+11% but a held-out inference MLP's 90-100 us GEMMs
# at 4.0x (measured 5.9x: cuBLAS's TF32 kernel for them was fast; holdout39_fp32_mlp_infer): the kernel
# cuBLAS picks, not the length, sets the gain, so one share of peak, and the range for the rest. 0.75 rather
# than the median's 0.78: the convolutions this guess also prices gained 4.1-4.3x (holdout21_fp32_convnet_notf32).
TF32_SHARE = 0.75
# Volta and Turing: NVIDIA's mixed-precision figures for ResNet-50 training on a V100 are about 3x the
# FP32 throughput; the GEMMs and convolutions alone gain at least that. Not measured by us.
FP16_ONLY_SPEEDUP = 3.0


def tensor_core_arch(ctx: Context) -> int | None:
    """An NVIDIA GPU's compute capability major, from 7 (Volta) on; None otherwise (an AMD GPU's figures are its
    gfx version: trace/gpu_specs.rocm_trace)."""
    if ctx.model.meta.get("vendor") == "AMD":
        return None
    for d in ctx.model.devices.values():
        if d.compute_capability and d.compute_capability[0] >= 7:
            return d.compute_capability[0]
    return None


def analyze(ctx: Context) -> list[Finding]:
    gpu = ctx.model.gpu
    m = ctx.model
    convs, gemms = fp32_convolutions_count(m), fp32_gemms_count(m)
    if not (convs or gemms):
        return []
    # (case-blind, as FP32_GEMM_ONLY is: its flag leads the joined pattern)
    parts = [FP32_GEMM_ONLY.removeprefix("(?i)")] * gemms + [FP32_CONV] * convs
    fp32 = gpu[(gpu["kind"] == "kernel").to_numpy() & m.gpu_match("(?i)" + "|".join(parts))]
    fp32 = fp32[~launched_in(m, fp32)]      # (not cuDNN's trials, the autotuner's runs: the choice ran after)
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
    central = FP16_ONLY_SPEEDUP if fp16_only else max(2.0, TF32_SHARE * peak)
    fp32 = fp32.assign(step=ctx.step_of(fp32["ts"].to_numpy()))
    per_step = fp32.groupby("step")["dur"].sum()
    t = ctx.per_step_median(per_step)
    lost = t * (1 - 1 / central)
    full = fp32[np.isin(fp32["step"], ctx.full_steps)]
    if full["dur"].sum() < MIN_GPU_SHARE * busy:
        return []
    ev = {
        "fp32_gemm_ms_per_step": round(t / 1000, 3),
        "pct_of_gpu_time": round(100 * full["dur"].sum() / busy, 1),
        "kernels": full["name"].str.slice(0, 120).value_counts().head(4).to_dict(),
        "assumed_speedup": f"{central:.1f}x (range 2x-{peak:.1f}x, the peak "
                           + ("fp16 tensor-core/FP32 ratio of this GPU; not calibrated on this architecture)"
                              if fp16_only else "TF32/FP32 ratio of this GPU)"),
    }
    what = "Matrix multiplies and convolutions" if convs and full["name"].str.contains(FP32_CONV).any() \
        else "Matrix multiplies"
    return [Finding(
        kind=SPEC.kind,
        title=f"{what} run in full FP32 without tensor cores ({ev['pct_of_gpu_time']}% of GPU time)",
        lost_per_step_us=lost, lost_total_us=float(per_step.sum()) * (1 - 1 / central),
        fix=("This GPU's tensor cores take fp16, not TF32 or bf16: run the forward and the loss under "
             "torch.autocast('cuda', dtype=torch.float16) and scale the loss with torch.amp.GradScaler('cuda') "
             "(mixed precision)." if fp16_only else
             "Allow TF32 tensor cores: torch.set_float32_matmul_precision('high') (or "
             "torch.backends.cuda.matmul.allow_tf32 = True" + ("; cudnn.allow_tf32 = True for the convolutions"
                                                                if what != "Matrix multiplies" else "")
             # (only where convolutions are among them: AlexNet's ran TF32 already, and the advice had named it)
             + "), or run the model under torch.autocast('cuda', dtype=torch.bfloat16)."),
        confidence="low" if fp16_only else "medium", evidence=ev,
        fixes=(ScaleKernels("^(?:" + "|".join(re.escape(n) for n in names) + ")$", 1 / central,
                            bounds=(1 / peak, 1 / 2.0)),)
        # The tensor-core path runs one kernel where an FFT convolution ran several: those go, launches and all.
        + ((DropKernels(FP32_CONV_EXTRAS),) if convs and m.gpu_match(FP32_CONV_EXTRAS).any() else ()))]
