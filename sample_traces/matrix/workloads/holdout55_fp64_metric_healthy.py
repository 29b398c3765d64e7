"""holdout55_fp64_metric_healthy: the fifty-fifth set's MLP in float32 with TF32 matmuls, which keeps a running sum of
its loss and squared error in float64 on the GPU (as careful metric code does, so that a long sum does not lose
digits; no sync, read after the run).

Fifty-fifth held-out set (registered before it was recorded; see the matrix README): the control. Its float64 work is
two scalar accumulations a step, next to nothing; no finding may claim float64 compute, and the step is GPU-bound.
"""

import torch
import torch.nn.functional as F

from ._fp64 import allow_tf32, numpy_pool
from ._util import Step, is_cuda, mlp

NAME = "holdout55_fp64_metric_healthy"
EXPECTED_KIND = "healthy"
ROLE = "healthy"
VARIANTS = ("before",)
FIX = None
SIZE = {"batch": 8192, "features": 256, "dim": 2048, "layers": 2}
DESCRIPTION = {
    "before": ("regression MLP 256 -> 2048 x 3 -> 1 in float32 with TF32, batch 8192, Adam; loss and squared error "
               "summed in float64 on the GPU each step"),
}


def make(variant, device, size=SIZE):
    cuda = is_cuda(device)
    s = size if cuda else {**size, "batch": 64, "features": 16, "dim": 32}
    torch.manual_seed(0)
    allow_tf32("after", cuda)
    model = mlp(s["features"], s["dim"], s["layers"], 1).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    pool = numpy_pool([(s["batch"], s["features"]), (s["batch"], 1)], 4, "after", device)
    sums = torch.zeros(2, dtype=torch.float64, device=device)
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        x, y = pool[i % len(pool)]
        opt.zero_grad(set_to_none=True)
        pred = model(x)
        loss = F.mse_loss(pred, y)
        loss.backward()
        opt.step()
        with torch.no_grad():
            sums[0] += loss.detach().double()
            sums[1] += (pred.detach() - y).double().pow(2).sum()
    return Step(step, info={"batch": s["batch"], "dtype": "float32", "metric_dtype": "float64"})
