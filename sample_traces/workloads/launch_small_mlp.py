"""Launch overhead: small MLP inference (hidden 256, 8 layers, batch 16) under no_grad.

before: eager forward -> ~16 tiny kernels per step, each a few microseconds.
after:  the forward captured once in a CUDA graph; each step copies the input into the
        static buffer and replays the graph.
"""

import torch
import torch.nn as nn

from .common import Step, is_cuda

NAME = "launch_small_mlp"
EXPECTED_KIND = "launch_overhead"
WITH_STACK = False
VARIANTS = ("before", "after")
FIX = "capture the forward pass in a CUDA graph and replay it"
DESCRIPTION = {
    "before": "8x Linear(256,256)+ReLU MLP, batch 16, fp32, eager inference under torch.no_grad()",
    "after": "same MLP, forward captured with torch.cuda.graph and replayed (static input buffer)",
}

WARMUP_STEPS = 10


def make(variant, device, hidden=256, layers=8, batch=16, pool=8):
    torch.manual_seed(0)
    mods = []
    for _ in range(layers):
        mods += [nn.Linear(hidden, hidden), nn.ReLU()]
    model = nn.Sequential(*mods).to(device).eval()
    xs = [torch.randn(batch, hidden, device=device) for _ in range(pool)]
    state = {"i": 0}
    info = {"batch": batch, "hidden": hidden, "layers": layers}

    if variant == "before" or not is_cuda(device):
        @torch.no_grad()
        def step():
            i = state["i"] = state["i"] + 1
            model(xs[i % pool])
        info["cuda_graph"] = False
        return Step(step, info=info)

    static_x = xs[0].clone()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), torch.no_grad():
        for _ in range(3):
            model(static_x)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g), torch.no_grad():
        static_out = model(static_x)
    torch.cuda.synchronize()
    info["cuda_graph"] = True

    def step():
        i = state["i"] = state["i"] + 1
        static_x.copy_(xs[i % pool])
        g.replay()
        return static_out

    return Step(step, info=info)
