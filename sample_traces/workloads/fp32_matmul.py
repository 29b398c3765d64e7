"""Full-precision fp32 matmuls on a tensor-core GPU.

before: an fp32 MLP (4x Linear(4096,4096), batch 4096) trained with
        torch.set_float32_matmul_precision("highest") / allow_tf32=False, so cuBLAS runs
        plain fp32 (SIMT sgemm) kernels, several times slower than tensor cores.
after:  torch.set_float32_matmul_precision("high") -> TF32 tensor-core kernels (the
        model and data stay fp32; only the matmul precision changes).
"""

import torch
import torch.nn as nn

from .common import Step, is_cuda

NAME = "fp32_matmul"
EXPECTED_KIND = "fp32_matmul"
WITH_STACK = False
VARIANTS = ("before", "after")
FIX = 'torch.set_float32_matmul_precision("high") (TF32 tensor cores); model and data remain fp32'
DESCRIPTION = {
    "before": ('fp32 MLP 4x Linear(4096,4096)+ReLU, batch 4096, SGD training step, '
               'set_float32_matmul_precision("highest"), allow_tf32=False'),
    "after": 'same, with set_float32_matmul_precision("high") (allow_tf32=True -> TF32)',
}


def make(variant, device):
    cuda = is_cuda(device)
    dim, batch, layers = (4096, 4096, 4) if cuda else (64, 32, 2)
    prev = torch.get_float32_matmul_precision()
    if variant == "before":
        torch.set_float32_matmul_precision("highest")
        torch.backends.cuda.matmul.allow_tf32 = False
    else:
        torch.set_float32_matmul_precision("high")
    torch.manual_seed(0)
    mods = []
    for _ in range(layers):
        mods += [nn.Linear(dim, dim), nn.ReLU()]
    model = nn.Sequential(*mods).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    xs = [torch.randn(batch, dim, device=device) for _ in range(2)]
    state = {"i": 0}

    def step():
        i = state["i"] = state["i"] + 1
        opt.zero_grad(set_to_none=True)
        loss = model(xs[i % 2]).pow(2).mean()
        loss.backward()
        opt.step()

    def close():
        torch.set_float32_matmul_precision(prev)

    info = {"matmul_precision": torch.get_float32_matmul_precision(),
            "allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
            "dim": dim, "batch": batch, "layers": layers}
    return Step(step, close=close, info=info)
