"""holdout55_fp64_signal_conv_train: a 1-D convolutional regressor over sensor signals trained in float64 (numpy
signals, model.double()) -> float32 signals and model (cuDNN's TF32 convolutions are on by default), TF32 matmuls.

Fifty-fifth held-out set (registered before it was recorded; see the matrix README). Model: 8 channels in, 4 blocks of
Conv1d(k=7, 64 wide; stride 2 after the first), BatchNorm1d, GELU, a mean over time, a linear head; MSE, Adam; batch 64
signals of 4096 samples (four batches in turn, already on the GPU).
"""

import torch
import torch.nn.functional as F

from ._fp64 import Conv1dNet, allow_tf32, dtype_of, numpy_pool
from ._util import Step, is_cuda

NAME = "holdout55_fp64_signal_conv_train"
EXPECTED_KIND = "float64_compute"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "float32 signals (astype(np.float32)) and model (no .double()), TF32 matmuls allowed; nothing else"
SIZE = {"batch": 64, "channels": 8, "length": 4096, "width": 64, "blocks": 4, "k": 7}
DESCRIPTION = {
    "before": "1-D conv regressor (8 -> 64 x 4 blocks, k=7) over 64 x 4096-sample signals in float64, Adam",
    "after": "same in float32",
}


def make(variant, device, size=SIZE):
    cuda = is_cuda(device)
    s = size if cuda else {**size, "batch": 4, "length": 64, "width": 8}
    torch.manual_seed(0)
    allow_tf32(variant, cuda)
    model = Conv1dNet(s["channels"], s["width"], s["blocks"], s["k"]).to(device=device, dtype=dtype_of(variant))
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    pool = numpy_pool([(s["batch"], s["channels"], s["length"]), (s["batch"],)], 4, variant, device)
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        x, y = pool[i % len(pool)]
        opt.zero_grad(set_to_none=True)
        F.mse_loss(model(x), y).backward()
        opt.step()
    return Step(step, info={"batch": s["batch"], "length": s["length"], "dtype": str(dtype_of(variant)).replace("torch.", "")})
