"""Tensor-core GEMMs that run on narrow-aligned kernels: a matrix whose rows are not a whole number of 16-byte
vectors (a bf16 dimension of 50257, 429 or 197) cannot be loaded or stored 16 bytes at a time, and cuBLAS runs
the product on kernels that move 2, 4 or 8 bytes per access. CUTLASS's kernels say so in their names:
`cutlass_80_tensorop_bf16_s16816gemm_bf16_..._tn_align2` (2 elements), `..._align8` for 16-bit types and
`..._align4` for FP32 / TF32 are the full 16 bytes. On an H100 the aligned products of the same programs ran on
cuBLAS's sm90 kernels, whose names carry no alignment.

With record_shapes each product's op has its Input Dims, hence its FLOPs (2 M N K, times the batch); that prices
the misaligned kernel at the speed the trace's aligned products reach. FP32 without tensor cores (`simt`,
`sgemm`) is fp32_matmul's, not this.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .dims import parsed
from .model import TraceModel

GEMM_NAME = r"gemm|xmma|nvjet|Cijk_"
# 16-bit inputs: an MMA shape only 16-bit types have (16x8x16, wmma 16x16x16), or the type in the name.
HALF = r"bf16|f16|s16816|s161616|h16816|h1688|h884"
ALIGN = re.compile(r"_align(\d+)\b")
# Full vectors: 16 bytes.
FULL = {2: 8, 4: 4}
# cuBLASLt's own kernels on Hopper and later (`nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_NNT`): what the aligned
# 16-bit products of set 54's programs ran on, on an H100 with torch 2.11; their names say no element type, so
# they count only as the aligned products that price the misaligned ones.
NVJET = "nvjet_"
GEMM_OPS = {"aten::mm": "mm", "aten::addmm": "addmm", "aten::bmm": "bmm", "aten::baddbmm": "baddbmm",
            "aten::_scaled_mm": "mm", "aten::addbmm": "baddbmm"}


def element_bytes(name: str) -> int | None:
    """2 for a 16-bit tensor-core GEMM kernel, 4 for a TF32 / FP32 tensor-core one, None for any other."""
    # (float64: cuBLAS runs double products on align1 kernels whatever the dimensions, and they are
    # float64_compute's; nor do they set the aligned speed)
    if not re.search(GEMM_NAME, name, re.I) or re.search(r"simt|sgemm|conv|fprop|dgrad|wgrad|d884|d8816|f64", name, re.I):
        return None
    if re.search(HALF, name, re.I):
        return 2
    return 4 if re.search(r"tensorop|tf32|s1688", name, re.I) else None


def narrow(name: str) -> int | None:
    """The kernel's alignment in elements where it is narrower than 16 bytes (None: full, or not one of these)."""
    m = ALIGN.search(name)
    size = element_bytes(name) if m else None
    if size is None:
        return None
    a = int(m.group(1))
    return a if a < FULL[size] else None


def misaligned_rows(model: TraceModel) -> np.ndarray:
    """Boolean per gpu row: a tensor-core GEMM kernel on narrow-aligned accesses."""
    def compute():
        g = model.gpu
        names = pd.unique(g["name"])
        bad = {n for n in names if isinstance(n, str) and narrow(n) is not None}
        return (g["kind"] == "kernel").to_numpy() & g["name"].isin(bad).to_numpy()
    return model.memo("gemm_misaligned", compute)


def aligned_rows(model: TraceModel) -> np.ndarray:
    """Boolean per gpu row: a tensor-core GEMM kernel on full 16-byte accesses (or one whose name has no
    alignment: cuBLAS's sm90 kernels, cuBLASLt's nvjet)."""
    def compute():
        g = model.gpu
        names = pd.unique(g["name"])
        ok = {n for n in names if isinstance(n, str) and narrow(n) is None
              and (element_bytes(n) is not None or n.startswith(NVJET))}
        return (g["kind"] == "kernel").to_numpy() & g["name"].isin(ok).to_numpy()
    return model.memo("gemm_aligned", compute)


def product_op(model: TraceModel, launcher: int) -> int:
    """The cpu row of the op a launch call was made in (its nearest aten:: ancestor: aten::mm, addmm, bmm, or a
    convolution cuDNN ran as a GEMM), or -1."""
    cpu = model.cpu
    parent = cpu["parent"].to_numpy()
    r = int(parent[launcher]) if launcher >= 0 else -1
    for _ in range(4):          # (the launch sits in the op, at most under a cuBLAS or profiler range or two)
        if r < 0:
            return -1
        if str(cpu["name"].iat[r]).startswith("aten::"):
            return r
        r = int(parent[r])
    return -1


def flops(op: str, raw) -> tuple[float, tuple] | None:
    """(FLOPs, (M, N, K[, batch])) of a GEMM op from its Input Dims; None where they are missing or odd."""
    dims = parsed(raw)
    if dims is None:
        return None
    kind = GEMM_OPS.get(op)
    shapes = [d for d in dims if isinstance(d, list) and len(d) >= 2]
    try:
        if kind in ("mm", "addmm") and len(shapes) >= 2:
            (m, k), (k2, n) = shapes[-2][-2:], shapes[-1][-2:]
            batch = 1
        elif kind in ("bmm", "baddbmm") and len(shapes) >= 2 and len(shapes[-2]) == 3 and len(shapes[-1]) == 3:
            (batch, m, k), (_, k2, n) = shapes[-2], shapes[-1]
        else:
            return None
    except ValueError:
        return None
    if k != k2 or min(m, n, k, batch) <= 0:
        return None
    return 2.0 * m * n * k * batch, (m, n, k) + ((batch,) if kind in ("bmm", "baddbmm") else ())
