"""fp32_matmul: fp32 GEMM-heavy MLP trained with fp32 (SIMT) matmuls -> TF32.

Same recipe as sample_traces/workloads/fp32_matmul.py, at half the width (2048 instead of 4096)
so the step stays a few ms.
before: set_float32_matmul_precision("highest") (allow_tf32=False): plain fp32 GEMMs.
after:  set_float32_matmul_precision("high"): TF32 tensor-core GEMMs; model and data stay fp32.
"""

import torch
import torch.nn as nn

from ._util import Step, is_cuda

NAME = "fp32_matmul"
EXPECTED_KIND = "fp32_matmul"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = 'torch.set_float32_matmul_precision("high") (TF32 tensor cores); model and data remain fp32'
DESCRIPTION = {
    "before": ('fp32 MLP 4x Linear(2048,2048)+ReLU, batch 2048, SGD training step, '
               'set_float32_matmul_precision("highest") (allow_tf32=False)'),
    "after": 'same, with set_float32_matmul_precision("high") (TF32)',
}
SOURCE = "recipe of sample_traces/workloads/fp32_matmul.py, dim/batch 2048"


def make(variant, device):
    dim, batch, layers = (2048, 2048, 4) if is_cuda(device) else (64, 32, 2)
    prev = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest" if variant == "before" else "high")
    torch.manual_seed(0)
    mods = []
    for _ in range(layers):
        mods += [nn.Linear(dim, dim), nn.ReLU()]
    model = nn.Sequential(*mods).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    xs = [torch.randn(batch, dim, device=device) for _ in range(2)]
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        loss = model(xs[i % 2]).pow(2).mean()
        loss.backward()
        opt.step()

    def close():
        torch.set_float32_matmul_precision(prev)

    return Step(step, close=close, info={"matmul_precision": torch.get_float32_matmul_precision(),
                                         "allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
                                         "dim": dim, "batch": batch, "layers": layers})
