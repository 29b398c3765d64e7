"""misaligned_gemm: tensor-core GEMMs run on narrow-aligned kernels because a dimension is not a multiple of
8 (16-bit) or 4 (TF32): a vocabulary of 50257, 429 concatenated features (trace/gemm_align.py). Padding the
dimension lets cuBLAS take its aligned kernels; the padded rows are never a target, the padded columns zeros.

The estimate prices each misaligned product at the speed the trace's own aligned products reach (FLOPs over
time, from their ops' Input Dims) where the trace has shapes; without them, at ALIGNED_SHARE of its time by its
alignment. Not for the products an eager attention core runs on its [T, T] scores (attention's fix, SDPA, removes
them). Measured on the fifty-fourth held-out set only (two programs, one H100 host; sample_traces/matrix/README.md):
estimate/likely.py gives the kind no band, the report says it is not validated, and the confidence is at most
medium.
"""
from __future__ import annotations

import re

import numpy as np

from ..trace.gemm_align import aligned_rows, flops, product_op, misaligned_rows, narrow
from ..trace.unasked import launched_in
from . import attention
from .base import KERNELS_GO, Context, Finding, KindSpec
from .fixes import ScaleKernels
from .fusion_candidates import ELEMENTWISE

SPEC = KindSpec("misaligned_gemm", "slowed by misaligned GEMM dimensions",
                cost_basis="the narrow-aligned GEMM kernels' measured time less that time at the speed of the "
                           "trace's aligned GEMMs by FLOPs, or at an assumed speed-up by alignment where the trace "
                           "cannot give that speed (evidence.priced_by says which)",
                beyond_cost=KERNELS_GO)

# Below this share of the GPU's time the misaligned products are noise, not a finding (a classifier's
# 10-class head runs align2, in microseconds).
MIN_GPU_SHARE = 0.03
# A kernel this short is bound by its launch and its memory latency, not by how it loads.
MIN_KERNEL_US = 10.0
# Without shapes: what an aligned kernel takes, as a share of the misaligned one's time, by the kernel's alignment
# in elements. align1 (one element a load): set 54's two programs on an H100 (an LM head over 50257 words, an MLP
# over 429 features, cuBLAS's fallback cutlass_75 align1 kernels against nvjet) measured 0.15 and 0.17 over their
# products, 0.13-0.23 a kernel, priced by FLOPs; set after that recording, so fitted, not held out. Wider loads
# are not measured: half, provisional.
ALIGNED_SHARE = {1: 0.2}
UNMEASURED_SHARE = 0.5
RANGE = (0.1, 0.8)               # the shares an assumed price spans
# Aligned products this small are latency-bound: their speed is not the speed a large one would reach.
MIN_GFLOP = 1.0
# So a misaligned product under MIN_GFLOP, priced by FLOPs, is not priced below this share (5x).
MAX_GAIN = 0.2
# Priced by FLOPs: the aligned kernel may be this much slower or faster than the trace's large aligned products.
FLOPS_RANGE = (0.75, 2.0)


def analyze(ctx: Context) -> list[Finding]:
    m = ctx.model
    g = m.gpu
    bad = misaligned_rows(m)
    if not bad.any():
        return []
    rows = np.flatnonzero(bad & ~launched_in(m, g))
    attn = {r for c in attention.cores(ctx, ELEMENTWISE) for r in c.rows}
    rows = np.array([r for r in rows if r not in attn], dtype=np.int64)
    if not len(rows):
        return []
    k = g.iloc[rows]
    typical = k.groupby("name")["dur"].median()
    names = sorted(typical.index[typical >= MIN_KERNEL_US])
    k = ctx.gpu_in_full_steps(k[k["name"].isin(names)])
    busy = float(ctx.gpu_in_full_steps(g)["dur"].sum())
    if k.empty or not busy or k["dur"].sum() < MIN_GPU_SHARE * busy:
        return []
    speed = _aligned_speed(ctx)         # FLOPs per us of the trace's large aligned products, or None
    shares, bounds, products, by_flops = {}, {}, [], set()
    for name, kk in k.groupby("name"):
        ops = [product_op(m, int(r)) for r in kk["launcher"]]
        priced = [flops(m.cpu["name"].iat[o], m.cpu["input_dims"].iat[o]) if o >= 0 else None for o in ops]
        known = [(f, d) for f, d in zip(priced, kk["dur"]) if f is not None]
        if speed and known:
            share = float(np.median([max(f[0] / speed / d, 0.0 if f[0] >= MIN_GFLOP * 1e9 else MAX_GAIN)
                                     for f, d in known if d > 0]))
            share = min(share, 1.0)
            bounds[name] = (share * FLOPS_RANGE[0], min(1.0, share * FLOPS_RANGE[1]))
            by_flops.add(name)
        else:
            share = ALIGNED_SHARE.get(narrow(name), UNMEASURED_SHARE)
            bounds[name] = (min(share, RANGE[0]), max(share, RANGE[1]))
        shares[name] = share
        op = next((m.cpu["name"].iat[o] for o in ops if o >= 0), "?")
        shape = next((f[1] for f in priced if f is not None), None)
        products.append({"kernel": name[:140], "op": op, "align": narrow(name), "runs": int(len(kk)),
                         "ms": round(float(kk["dur"].sum()) / 1000, 3),
                         "shape (M, N, K[, batch])": list(shape) if shape else None,
                         "odd N": sorted({f[1][1] for f in priced if f is not None and f[1][1] % 8}),
                         "odd K": sorted({f[1][2] for f in priced if f is not None and f[1][2] % 8})})
    k = k.assign(step=ctx.step_of(k["ts"].to_numpy()))
    per_step = k.groupby("step")["dur"].sum()
    t = ctx.per_step_median(per_step)
    saved = sum(float(kk["dur"].sum()) * (1 - shares[n]) for n, kk in k.groupby("name"))
    frac = saved / max(float(k["dur"].sum()), 1e-9)
    products.sort(key=lambda p: -p["ms"])
    odd = _culprits(products)
    for p in products:
        p["dims not a multiple of 8"] = sorted(set(p.pop("odd N")) | set(p.pop("odd K")))
    ev = {"misaligned_gemm_ms_per_step": round(t / 1000, 3),
          "pct_of_gpu_time": round(100 * float(k["dur"].sum()) / busy, 1),
          "products": products[:6],
          "priced_by": _priced_by(speed, by_flops, products)}
    which = (f"dimension{'s' if len(odd) > 1 else ''} {', '.join(map(str, odd[:4]))}" if odd else
             "a dimension (record with record_shapes=True to see which)")
    fixes = tuple(ScaleKernels(f"^{re.escape(n)}$", shares[n],
                               bounds=bounds[n])
                  for n in sorted(shares))
    return [Finding(
        kind=SPEC.kind,
        title=(f"Matrix multiplies on narrow-aligned kernels: {which} not a multiple of 8 "
               f"({ev['pct_of_gpu_time']}% of GPU time)"),
        lost_per_step_us=t * frac, lost_total_us=float(per_step.sum()) * frac,
        fix=(f"Pad {which} to a multiple of 8 (a vocabulary to a multiple of 64, as nanoGPT pads 50257 to 50304 and "
             "Megatron's make_vocab_size_divisible_by does, with extra rows that are never a target; concatenated "
             "features with zero columns). "
             "cuBLAS then runs the product on kernels that load and store 16 bytes at a time."),
        confidence="medium" if by_flops == set(shares) else "low", evidence=ev, fixes=fixes)]


def _priced_by(speed: float | None, by_flops: set, products: list[dict]) -> str:
    """What the estimate rests on, in the report's words."""
    if by_flops and len(by_flops) == len(products):
        how = f"FLOPs at the trace's aligned GEMM speed ({speed / 1e6:.0f} TFLOP/s over its products of 1 GFLOP or more)"
    else:
        why = ("no shapes in the trace" if not any(p["shape (M, N, K[, batch])"] for p in products) else
               "no aligned product of 1 GFLOP or more in the trace to price by" if not speed else
               "some products without shapes")
        how = (f"an assumed speed-up by the kernels' alignment ({why}): "
               + ", ".join(f"align{a} {1 / ALIGNED_SHARE[a]:.0f}x (fitted on held-out set 54's two programs)"
                           if a in ALIGNED_SHARE else f"align{a} {1 / UNMEASURED_SHARE:.0f}x (unmeasured)"
                           for a in sorted({p['align'] for p in products})))
    return how + "; not validated: measured on two programs on one H100"


def _culprits(products: list[dict]) -> list[int]:
    """The dimensions to pad. A product's output is a fresh row-major tensor, so an odd N (its last dimension)
    is misaligned for certain; K is the inputs' contiguous dimension unless an input is a transposed view, which
    Input Dims do not show (backward's dW = dY^T X has the token count as K). M, the rows, never is: an odd token
    count is no one's contiguous dimension. So the odd N of any product (the vocabulary in the head's forward, the
    features in the first layer's dX), else the odd K (the features in an inference-only first layer)."""
    n = {d for p in products for d in p["odd N"]}
    return sorted(n or {d for p in products for d in p["odd K"]})


def _aligned_speed(ctx: Context) -> float | None:
    """FLOPs per us of the trace's aligned tensor-core products of at least MIN_GFLOP, from their ops'
    Input Dims (None where the trace has no shapes or no such product)."""
    m = ctx.model
    g = m.gpu
    rows = np.flatnonzero(aligned_rows(m) & ~launched_in(m, g))
    if not len(rows):
        return None
    k = ctx.gpu_in_full_steps(g.iloc[rows])
    total_f, total_t = 0.0, 0.0
    for r, d in zip(k["launcher"].to_numpy(), k["dur"].to_numpy()):
        o = product_op(m, int(r))
        f = flops(m.cpu["name"].iat[o], m.cpu["input_dims"].iat[o]) if o >= 0 else None
        if f and f[0] >= MIN_GFLOP * 1e9 and d > 0:
            total_f, total_t = total_f + f[0], total_t + d
    return total_f / total_t if total_t else None
