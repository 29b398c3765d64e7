"""layout_permute: layout conversion kernels (cuDNN nchwToNhwc / nhwcToNchw and kin) around convs.

Tensor-core convolutions want NHWC; a model in NCHW pays a transpose before and after each conv.
Cost = the conversion kernels' GPU time (they are pure overhead), plus what channels_last takes off batch norm
in training: its NCHW kernels (cuDNN's in fp16, PyTorch's own in bf16) give way to NHWC ones that run in a
fraction of their time.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..trace.unasked import launched_in
from ..trace.precision import FP32_CONV, fp32_convolutions_count
from .fixes import DropKernels, ScaleKernels
from .base import KERNELS_GO, Context, Finding, KindSpec, op_rows

SPEC = KindSpec("layout_permute", "slowed by layout conversions", estimate="upper_bound",
                caveat="NHWC convolutions may pick faster or slower kernels, which the trace cannot show: "
                       "treat as an upper bound", beyond_cost=KERNELS_GO)

PERMUTE = r"nchwToNhwc|nhwcToNchw|NchwToNhwc|NhwcToNchw|nchw2nhwc|nhwc2nchw|NCHWToNHWC|NHWCToNCHW"
# Batch norm in NCHW, and the share of its time the NHWC kernels channels_last picks take: (name, pattern,
# share, (best, worst)). cuDNN's half-precision training kernels (forward and backward) give way to
# batchnorm_*_nhwc_semiPersist: 0.13-0.21x on the matrix's three fp16 convnets (H100 and H200) and the root
# layout pair, 0.49x on a VGG-style net whose small late maps already used the single-read kernels (fitted
# 2026-11-29). PyTorch's own kernels (bf16, fp32) give way to their channels_last versions: 0.42x on the
# twenty-third held-out set's bf16 ResNet (one program, read after that set was scored). cuDNN's inference
# kernel (bn_fw_inf_1C11) is left out: its NHWC version took 0.87x its time there, no gain worth a claim.
BATCH_NORM = (
    ("cuDNN", r"cudnn::bn_(?:fw_tr|bw)_1C11_\w*<(?:__half|__nv_bfloat16)", 0.2, (0.12, 0.5)),
    ("PyTorch", r"at::native::batch_norm_(?:collect_statistics|backward|transform_input)_kernel<", 0.42, (0.3, 0.6)),
)


def analyze(ctx: Context) -> list[Finding]:
    gpu = ctx.model.gpu
    # Transposes around FP32 convolutions that run in NCHW because TF32 is off are the FP32 path's
    # (fp32_matmul's fix removes them); the model may well be channels_last already.
    pattern = rf"^(?!.*(?:{FP32_CONV}))(?=.*(?:{PERMUTE}))" if fp32_convolutions_count(ctx.model) else PERMUTE
    k = gpu[(gpu["kind"] == "kernel").to_numpy() & ctx.model.gpu_match(pattern)]
    k = k[~launched_in(ctx.model, k)]
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
    bn = _batch_norm(ctx, busy) if not conv1d else []
    if bn:
        ev["batch_norm_nchw_ms_per_step"] = round(sum(b[1] for b in bn) / 1000, 3)
    if conv1d:
        where = "inside 1-D convolutions"
        fix = ("These transposes are cuDNN's own, around 1-D convolutions run as 2-D ones: channels_last does "
               "not apply to 3-D tensors. Writing the layers as Conv2d over (N, C, 1, L) inputs in channels_last "
               "measured slower (0.90-0.92x) on an H100 for a wav2vec2-style feature extractor whose transposes took "
               "25% of its GPU time, so no saving is claimed: time it both ways before changing the model.")
    else:
        where = "around convolutions"
        fix = ("Use channels_last end to end: model = model.to(memory_format=torch.channels_last) and "
               "x = x.to(memory_format=torch.channels_last) (with autocast/bf16 or fp16), so cuDNN runs NHWC "
               "kernels without transposes. Time a few steps both ways before keeping it: cuDNN may pick "
               "slower NHWC convolution kernels for some shapes (a VGG-style fp16 net measured 0.8-0.86x on "
               "H100 and H200), and in a launch-bound step the transposes cost little.")
        if bn:
            fix += (f" Batch norm gains too: its NCHW kernels take {ev['batch_norm_nchw_ms_per_step']:.2f} ms a step "
                    "here, and their NHWC versions ran in " + ", ".join(
                        f"{lo:.2f}-{hi:.2f}x that time ({who}'s)" for who, _, _, (lo, hi) in
                        (BATCH_NORM[k] for k, _, _ in bn)) + " on our convnets.")
    shrink = tuple(ScaleKernels(BATCH_NORM[k][1], BATCH_NORM[k][2], bounds=BATCH_NORM[k][3]) for k, _, _ in bn)
    gain = sum(per * (1 - BATCH_NORM[k][2]) for k, per, _ in bn)
    gain_total = sum(tot * (1 - BATCH_NORM[k][2]) for k, _, tot in bn)
    # 1-D convolutions' transposes: no fix measured to remove them (sample_traces/matrix/h100_clean61*: the audio
    # classifier's Conv1d layers as channels_last Conv2d, 9.35 -> 10.35 and 8.12 -> 8.83 ms a step), so the finding
    # says what they cost and claims no saving (a minor finding: a GPU-bound step stays healthy).
    return [Finding(
        kind=SPEC.kind,
        title=f"{ev['pct_of_gpu_time']}% of GPU time converts tensors between NCHW and NHWC {where}"
              + (" (and batch norm runs in NCHW)" if bn else ""),
        lost_per_step_us=lost + gain, lost_total_us=float(per_step.sum()) + gain_total, fix=fix,
        # Medium: an upper bound whose NHWC convolutions cuDNN may run slower (the VGG-style net: 0.79-0.95x).
        confidence="medium", evidence=ev, fixes=() if conv1d else (DropKernels(pattern),) + shrink,
        estimated_savings_us=0.0 if conv1d else math.nan)]


def _batch_norm(ctx: Context, busy: float) -> list[tuple[int, float, float]]:
    """(BATCH_NORM entry, median per step, total) us of each family of NCHW batch norm kernels that is at
    least 1% of the GPU time in full steps."""
    gpu = ctx.model.gpu
    out = []
    for k, (_, pattern, _, _) in enumerate(BATCH_NORM):
        g = gpu[(gpu["kind"] == "kernel").to_numpy() & ctx.model.gpu_match(pattern)]
        if g.empty:
            continue
        step = ctx.step_of(g["ts"].to_numpy())
        if float(g["dur"].to_numpy()[np.isin(step, ctx.full_steps)].sum()) < 0.01 * busy:
            continue
        per_step = g["dur"].groupby(step).sum()
        out.append((k, ctx.per_step_median(per_step), float(per_step.sum())))
    return out
