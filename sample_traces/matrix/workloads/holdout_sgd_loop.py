"""holdout_sgd_loop: SGD(momentum, foreach=False) -> foreach SGD, or the whole step in one CUDA graph.

Held out (see holdout_adamw_loop): SGD keeps no step count, so it is captured as it is: a graph
estimate must not charge it the capturable cost an Adam-family optimizer pays.

before: the model of holdout_adamw_loop, SGD(lr=1e-3, momentum=0.9, foreach=False).
after:  SGD(momentum=0.9, foreach=True).
after_graph_only: SGD(momentum=0.9, foreach=False), the whole step in one CUDA graph.
"""

import torch

from .holdout_adamw_loop import build, eager_step, graph_step
from ._util import is_cuda

NAME = "holdout_sgd_loop"
EXPECTED_KIND = "unfused_optimizer"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph_only")
FIX = "SGD(foreach=True)"
DESCRIPTION = {
    "before": "5 blocks of 640 + head (22 tensors), batch 1024, bf16, SGD(momentum=0.9, foreach=False)",
    "after": "same, SGD(momentum=0.9, foreach=True)",
    "after_graph_only": "same, SGD(momentum=0.9, foreach=False), whole step in one CUDA graph",
}


def make(variant, device):
    model, xs = build(device)
    params = list(model.parameters())
    info = {"param_tensors": len(params), "variant": variant}
    if variant == "after_graph_only" and is_cuda(device):
        return graph_step(model, xs, torch.optim.SGD(params, lr=1e-3, momentum=0.9, foreach=False), info)
    opt = torch.optim.SGD(params, lr=1e-3, momentum=0.9, foreach=variant == "after")
    return eager_step(model, xs, opt, device, info)
