"""Shared by the fifty-fifth held-out set: programs that run in float64 by accident. numpy makes float64 arrays by
default, torch.from_numpy keeps the dtype, and a model that then fails with "expected scalar type Double but found
Float" is often "fixed" with model.double(): every GEMM, convolution and elementwise kernel then runs on doubles. A
data-centre GPU does float64 at a fraction of its tensor-core rate (an H100: 67 TFLOP/s dense float64 against 495
TF32), and each element moves twice the bytes of float32. The fix: float32 data and model (np.float32, or .float()),
with TF32 matmuls allowed (torch.set_float32_matmul_precision("high")). The float64 arrays are built on the host with
numpy once; the batches in the pool are already on the GPU."""

import numpy as np
import torch
import torch.nn as nn


def dtype_of(variant):
    return torch.float64 if variant == "before" else torch.float32


def allow_tf32(variant, cuda):
    """The fix turns TF32 matmuls on for float32; before, the setting stays at its default ("highest")."""
    if cuda:
        torch.set_float32_matmul_precision("high" if variant != "before" else "highest")


def numpy_pool(shapes, n, variant, device, seed=1):
    """n batches of float arrays from numpy (float64 as numpy makes them; the fix casts with astype(np.float32))."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        arrs = [rng.standard_normal(s) for s in shapes]
        if variant != "before":
            arrs = [a.astype(np.float32) for a in arrs]
        out.append(tuple(torch.from_numpy(a).to(device) for a in arrs))
    return out


class Conv1dNet(nn.Module):
    """A 1-D convolutional regressor over multichannel signals (conv, BatchNorm, GELU, stride-2 downsampling)."""

    def __init__(self, cin, width, blocks, k):
        super().__init__()
        layers, c = [], cin
        for i in range(blocks):
            layers += [nn.Conv1d(c, width, k, stride=2 if i else 1, padding=k // 2), nn.BatchNorm1d(width), nn.GELU()]
            c = width
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(width, 1)

    def forward(self, x):
        return self.head(self.body(x).mean(-1)).squeeze(1)
