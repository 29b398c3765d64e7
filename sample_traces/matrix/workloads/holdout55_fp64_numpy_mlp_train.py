"""holdout55_fp64_numpy_mlp_train: a tabular regression MLP trained in float64 because its data came from numpy and the
model was made .double() to match -> float32 data and model, TF32 matmuls allowed.

Fifty-fifth held-out set (registered before it was recorded; see the matrix README). Model: 256 features -> 2048 x 3
(GELU) -> 1, MSE, Adam (foreach, the default); batch 8192 rows (four batches in turn, already on the GPU).
"""

import torch
import torch.nn.functional as F

from ._fp64 import allow_tf32, dtype_of, numpy_pool
from ._util import Step, is_cuda, mlp

NAME = "holdout55_fp64_numpy_mlp_train"
EXPECTED_KIND = "float64_compute"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "float32 data (astype(np.float32)) and model (no .double()), TF32 matmuls allowed; nothing else"
SIZE = {"batch": 8192, "features": 256, "dim": 2048, "layers": 2}
DESCRIPTION = {
    "before": "regression MLP 256 -> 2048 x 3 -> 1 in float64 (numpy data, model.double()), batch 8192, Adam",
    "after": "same in float32 with TF32 matmuls",
}


def make(variant, device, size=SIZE):
    cuda = is_cuda(device)
    s = size if cuda else {**size, "batch": 64, "features": 16, "dim": 32}
    torch.manual_seed(0)
    allow_tf32(variant, cuda)
    model = mlp(s["features"], s["dim"], s["layers"], 1).to(device=device, dtype=dtype_of(variant))
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    pool = numpy_pool([(s["batch"], s["features"]), (s["batch"], 1)], 4, variant, device)
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        x, y = pool[i % len(pool)]
        opt.zero_grad(set_to_none=True)
        F.mse_loss(model(x), y).backward()
        opt.step()
    return Step(step, info={"batch": s["batch"], "dtype": str(dtype_of(variant)).replace("torch.", "")})
