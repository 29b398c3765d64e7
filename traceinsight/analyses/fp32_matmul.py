"""fp32_matmul: GEMMs in full fp32 (SIMT, no tensor cores) on a GPU that has TF32/bf16 tensor cores.

cuBLAS names tell: `sgemm`, `simt`, `gemm_f32f32_f32f32` without `tf32` are plain fp32; tensor-core
kernels say tensorop / tf32 / s1688 / h884 / bf16 / f16 / wgmma. The fix's speed-up is not in the
trace, so the estimate is a range (2x to the peak ratio) and says so.
"""
from __future__ import annotations

import re

import numpy as np

from .base import KERNELS_GO, Context, Finding, KindSpec
from .fixes import ScaleKernels

SPEC = KindSpec("fp32_matmul", "slowed by FP32 matmuls",
                cost_basis="the FP32 GEMMs' measured time less that time at the assumed TF32 speed-up",
                beyond_cost=KERNELS_GO)

GEMM = re.compile(r"gemm|gemv|Gemm|matmul", re.I)
FP32_SIMT = re.compile(r"sgemm|simt|gemm_f32f32_f32f32|gemmSN|gemv2T_kernel|gemvx", re.I)
TENSOR_CORE = re.compile(r"tf32|tensorop|s1688|s16816|h884|h1688|h16816|bf16|f16|hmma|wgmma|i8|bfloat16|half",
                         re.I)
# An FP32 SIMT GEMM that is not a half/bf16/tensor-core one (cuDNN's implicit sgemm runs bf16 too): the
# kernels the fix speeds up, as one pattern for the replay.
FP32_ONLY = rf"(?i)^(?!.*(?:{TENSOR_CORE.pattern})).*(?:{FP32_SIMT.pattern})"
# Dense peak of the tensor-core path (TF32) over plain FP32, by architecture (vendor spec sheets).
PEAK_RATIO = {8: 8.0, 9: 7.4, 10: 8.0, 12: 8.0}


def tensor_core_arch(ctx: Context) -> int | None:
    for d in ctx.model.devices.values():
        if d.compute_capability and d.compute_capability[0] >= 8 and "AMD" not in (d.name or ""):
            return d.compute_capability[0]
    return None


def analyze(ctx: Context) -> list[Finding]:
    gpu = ctx.model.gpu
    m = ctx.model
    sel = ((gpu["kind"] == "kernel").to_numpy() & m.gpu_match(GEMM.pattern, re.I)
           & m.gpu_match(FP32_SIMT.pattern, re.I) & ~m.gpu_match(TENSOR_CORE.pattern, re.I))
    fp32 = gpu[sel]
    arch = tensor_core_arch(ctx)
    if fp32.empty or arch is None:
        return []
    peak = PEAK_RATIO.get(arch, 8.0)
    # Large GEMMs get most of the peak ratio, small ones little; 60% of peak is the central guess
    # (an H200 measured 5.5x end to end on 4096-wide fp32 matmuls, peak 7.4x); the range says more.
    central = max(2.0, 0.6 * peak)
    fp32 = fp32.assign(step=ctx.step_of(fp32["ts"].to_numpy()))
    per_step = fp32.groupby("step")["dur"].sum()
    t = ctx.per_step_median(per_step)
    lost = t * (1 - 1 / central)
    full = fp32[np.isin(fp32["step"], ctx.full_steps)]
    busy = float(ctx.gpu_in_full_steps(gpu)["dur"].sum())
    ev = {
        "fp32_gemm_ms_per_step": round(t / 1000, 3),
        "pct_of_gpu_time": round(100 * full["dur"].sum() / busy, 1) if busy else None,
        "kernels": full["name"].str.slice(0, 120).value_counts().head(4).to_dict(),
        "assumed_speedup": f"{central:.1f}x (range 2x-{peak:.1f}x, the peak TF32/FP32 ratio of this GPU)",
    }
    return [Finding(
        kind="fp32_matmul",
        title=f"Matrix multiplies run in full FP32 without tensor cores ({ev['pct_of_gpu_time']}% of GPU time)",
        lost_per_step_us=lost, lost_total_us=float(per_step.sum()) * (1 - 1 / central),
        fix="Allow TF32 tensor cores: torch.set_float32_matmul_precision('high') (or "
            "torch.backends.cuda.matmul.allow_tf32 = True; cudnn.allow_tf32 for convs), or run the model "
            "under torch.autocast('cuda', dtype=torch.bfloat16).",
        confidence="medium", evidence=ev,
        fixes=(ScaleKernels(FP32_ONLY, 1 / central, bounds=(1 / peak, 1 / 2.0)),))]
