"""holdout2_graph_infer: eager small-batch inference of a residual MLP -> the forward in a CUDA graph.

Second held-out set: the launch fix by hand (torch.cuda.graph), a different model than small_batch_infer.

before: 10 residual blocks [LayerNorm(384), Linear(384,1536), GELU, Linear(1536,384)], batch 4, fp16
        autocast, no_grad, eager.
after:  the same forward captured once in torch.cuda.graph; each step copies the input into the static
        buffer and replays.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._util import Step, capture_graph, is_cuda, replay_step

NAME = "holdout2_graph_infer"
EXPECTED_KIND = "launch_overhead"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "capture the forward in torch.cuda.graph and replay it"
DESCRIPTION = {
    "before": "10 residual MLP blocks (384 -> 1536 -> 384, LayerNorm, GELU), batch 4, fp16 no_grad, eager",
    "after": "same forward in one CUDA graph (static input, copy then replay)",
}


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.up = nn.Linear(d, 4 * d)
        self.down = nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.ln(x))))


def make(variant, device):
    cuda = is_cuda(device)
    d, n = (384, 4) if cuda else (16, 2)
    torch.manual_seed(0)
    model = nn.Sequential(*[Block(d) for _ in range(10)]).to(device).eval()
    if cuda:
        model = model.half()
    dt = torch.float16 if cuda else torch.float32
    xs = [torch.randn(n, d, device=device, dtype=dt) for _ in range(4)]
    if variant == "after" and cuda:
        sx = xs[0].clone()

        def body():
            with torch.no_grad():
                model(sx)
        return Step(replay_step(capture_graph(body, warmup=3), [(sx, xs)]), info={"cuda_graph": True})
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        with torch.no_grad():
            model(xs[i % 4])
    return Step(step, info={"cuda_graph": False})
