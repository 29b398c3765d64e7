"""layout_permute: layout conversion kernels (cuDNN nchwToNhwc / nhwcToNchw and kin) around convs.

Tensor-core convolutions want NHWC; a model in NCHW pays a transpose before and after each conv.
Cost = the conversion kernels' GPU time (they are pure overhead), plus what channels_last takes off cuDNN's
half-precision batch norm: its NCHW kernels give way to NHWC ones that run in a fraction of their time.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace.precision import FP32_CONV, fp32_convolutions_count
from .fixes import DropKernels, ScaleKernels
from .base import KERNELS_GO, Context, Finding, KindSpec, op_rows

SPEC = KindSpec("layout_permute", "slowed by layout conversions", estimate="upper_bound",
                caveat="NHWC convolutions may pick faster or slower kernels, which the trace cannot show: "
                       "treat as an upper bound", beyond_cost=KERNELS_GO)

PERMUTE = r"nchwToNhwc|nhwcToNchw|NchwToNhwc|NhwcToNchw|nchw2nhwc|nhwc2nchw|NCHWToNHWC|NHWCToNCHW"
# cuDNN's NCHW batch norm in fp16/bf16 (forward training, inference, backward). In channels_last cuDNN runs
# batchnorm_*_nhwc_semiPersist instead: on the matrix's three fp16 convnets (H100 and H200) and the root
# layout pair the NHWC kernels took 0.13-0.21x the NCHW ones' time, 0.49x on a VGG-style net whose small
# late feature maps already used the single-read kernels (fitted 2026-11-29, before the set that tests it).
BN_NCHW_HALF = r"cudnn::bn_(?:fw_tr|fw_inf|bw)_1C11_\w*<(?:__half|__nv_bfloat16)"
BN_NHWC_SHARE = 0.2
BN_NHWC_SHARE_RANGE = (0.12, 0.5)     # (best, worst)


def analyze(ctx: Context) -> list[Finding]:
    gpu = ctx.model.gpu
    # Transposes around FP32 convolutions that run in NCHW because TF32 is off are the FP32 path's
    # (fp32_matmul's fix removes them); the model may well be channels_last already.
    pattern = rf"^(?!.*(?:{FP32_CONV}))(?=.*(?:{PERMUTE}))" if fp32_convolutions_count(ctx.model) else PERMUTE
    k = gpu[(gpu["kind"] == "kernel").to_numpy() & ctx.model.gpu_match(pattern)]
    if k.empty:
        return []
    k = k.assign(step=ctx.step_of(k["ts"].to_numpy()))
    per_step = k.groupby("step")["dur"].sum()
    lost = ctx.per_step_median(per_step)
    full = k[np.isin(k["step"], ctx.full_steps)]
    all_k = ctx.gpu_in_full_steps(gpu)
    busy = float(all_k["dur"].sum())
    # The ops that launched them: usually aten::cudnn_convolution and its backward.
    cpu = ctx.model.cpu
    ops = pd.Series(dtype=float)
    linked = full[full["launcher"] >= 0]
    if len(linked):
        top = op_rows(cpu, linked["launcher"].to_numpy())
        names = np.where(top >= 0, cpu["name"].to_numpy()[np.maximum(top, 0)], "(no op)")
        ops = linked["dur"].groupby(pd.Series(names, index=linked.index)).sum().sort_values(ascending=False)
    ev = {
        "kernels_per_step": round(len(full) / ctx.n_full, 1),
        "ms_per_step": round(full["dur"].sum() / ctx.n_full / 1000, 3),
        "pct_of_gpu_time": round(100 * full["dur"].sum() / busy, 1) if busy else None,
        "kernels": full["name"].str.slice(0, 120).value_counts().head(4).to_dict(),
        "launched_by": {n: round(v / ctx.n_full / 1000, 3) for n, v in ops.head(5).items()},
    }
    # 1-D convolutions (3-D tensors): cuDNN runs them as 2-D ones and transposes inside; channels_last
    # does not apply to a 3-D tensor (x.to(memory_format=torch.channels_last) raises).
    forward = [n for n in ops.index if not n.startswith("autograd::")]     # the backward's name is generic
    conv1d = bool(forward) and all("conv1d" in n for n in forward)
    bn = _batch_norm(ctx, busy) if not conv1d else None
    if bn:
        ev["batch_norm_nchw_ms_per_step"] = round(bn[0] / 1000, 3)
    if conv1d:
        where, confidence = "inside 1-D convolutions", "medium"
        fix = ("These transposes are cuDNN's own, around 1-D convolutions run as 2-D ones: channels_last does "
               "not apply to 3-D tensors. Writing the layer as a Conv2d over (N, C, 1, L) inputs in "
               "channels_last can remove them; time it both ways, or leave them if they are a small share.")
    else:
        where, confidence = "around convolutions", "medium"
        fix = ("Use channels_last end to end: model = model.to(memory_format=torch.channels_last) and "
               "x = x.to(memory_format=torch.channels_last) (with autocast/bf16 or fp16), so cuDNN runs NHWC "
               "kernels without transposes. Time a few steps both ways before keeping it: cuDNN may pick "
               "slower NHWC convolution kernels for some shapes (a VGG-style fp16 net measured 0.8-0.86x on "
               "H100 and H200), and in a launch-bound step the transposes cost little.")
        if bn:
            fix += (f" Batch norm gains too: its NCHW kernels take {bn[0] / 1000:.2f} ms a step here, and "
                    f"cuDNN's NHWC ones ran in {BN_NHWC_SHARE_RANGE[0]:.2f}-{BN_NHWC_SHARE_RANGE[1]:.2f}x that "
                    "time on our convnets.")
    shrink = (ScaleKernels(BN_NCHW_HALF, BN_NHWC_SHARE, bounds=BN_NHWC_SHARE_RANGE),) if bn else ()
    gain, gain_total = (bn[0] * (1 - BN_NHWC_SHARE), bn[1] * (1 - BN_NHWC_SHARE)) if bn else (0.0, 0.0)
    return [Finding(
        kind=SPEC.kind,
        title=f"{ev['pct_of_gpu_time']}% of GPU time converts tensors between NCHW and NHWC {where}"
              + (" (and batch norm runs in NCHW)" if bn else ""),
        lost_per_step_us=lost + gain, lost_total_us=float(per_step.sum()) + gain_total, fix=fix,
        confidence=confidence, evidence=ev, fixes=(DropKernels(pattern),) + shrink)]


def _batch_norm(ctx: Context, busy: float) -> tuple[float, float] | None:
    """(median per step, total) us of cuDNN's half-precision NCHW batch norm kernels, or None where they are
    under 1% of the GPU time in full steps."""
    gpu = ctx.model.gpu
    k = gpu[(gpu["kind"] == "kernel").to_numpy() & ctx.model.gpu_match(BN_NCHW_HALF)]
    if k.empty:
        return None
    step = ctx.step_of(k["ts"].to_numpy())
    if float(k["dur"].to_numpy()[np.isin(step, ctx.full_steps)].sum()) < 0.01 * busy:
        return None
    per_step = k["dur"].groupby(step).sum()
    return ctx.per_step_median(per_step), float(per_step.sum())
