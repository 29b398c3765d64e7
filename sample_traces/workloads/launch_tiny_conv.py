"""Launch overhead: a ~20K-parameter conv net trained at batch 1.

before: eager training step (forward, loss, backward, SGD step) -> a few hundred
        tiny kernels per step, each shorter than its launch; the GPU idles between them.
after:  whole-network CUDA graph capture (forward + backward + optimizer.step), the
        pattern from the PyTorch CUDA-graphs docs; one cudaGraphLaunch per step.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from .common import Step, is_cuda

NAME = "launch_tiny_conv"
EXPECTED_KIND = "launch_overhead"
WITH_STACK = False
VARIANTS = ("before", "after")
FIX = "capture the whole training step (fwd+bwd+SGD step) in one CUDA graph and replay it"
DESCRIPTION = {
    "before": "~19K-param conv net (5x conv3x3+BN+ReLU, 32x32 input), batch 1, eager SGD training step",
    "after": "same model/optimizer, whole step captured with torch.cuda.graph and replayed (static input/target)",
}


def make_model(width=(16, 16, 16, 32, 32)):
    layers = []
    cin = 3
    for i, c in enumerate(width):
        layers += [nn.Conv2d(cin, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU(inplace=True)]
        if i in (1, 3):
            layers.append(nn.MaxPool2d(2))
        cin = c
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, 10)]
    return nn.Sequential(*layers)


def make(variant, device, batch=1, hw=32, pool=8):
    torch.manual_seed(0)
    model = make_model().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    xs = [torch.randn(batch, 3, hw, hw, device=device) for _ in range(pool)]
    ys = [torch.randint(0, 10, (batch,), device=device) for _ in range(pool)]
    nparams = sum(p.numel() for p in model.parameters())
    state = {"i": 0}
    info = {"params": nparams, "param_tensors": len(list(model.parameters())), "batch": batch}

    def eager_step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    if variant == "before" or not is_cuda(device):
        def step():
            i = state["i"] = state["i"] + 1
            eager_step(xs[i % pool], ys[i % pool])
        info["cuda_graph"] = False
        return Step(step, info=info)

    # ---- after: whole-network capture (torch.cuda.graph docs pattern)
    static_x = xs[0].clone()
    static_y = ys[0].clone()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            eager_step(static_x, static_y)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        static_loss = F.cross_entropy(model(static_x), static_y)
        static_loss.backward()
        opt.step()
    torch.cuda.synchronize()

    def step():
        i = state["i"] = state["i"] + 1
        static_x.copy_(xs[i % pool])
        static_y.copy_(ys[i % pool])
        g.replay()

    info["cuda_graph"] = True
    return Step(step, info=info)
