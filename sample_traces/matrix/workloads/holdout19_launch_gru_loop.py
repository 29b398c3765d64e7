"""holdout19_launch_gru_loop: a GRU cell unrolled over 24 timesteps in Python, small batch -> one CUDA graph.

Nineteenth held-out set (written after every estimate got a likely range from our measured fixes,
estimate/likely.py; pre-registered before it was recorded, to check that range on programs it was not
fitted on): a recurrent decoder-style inference step whose many small kernels the CPU launches one by one.
before: nn.GRUCell(256, 512) stepped 24 times over a (24, 64, 256) input, a Linear(512, 128) head per
        timestep, bf16 autocast, torch.no_grad (about 10 kernels a timestep).
after:  the same step captured once in a CUDA graph (torch.cuda.graph) and replayed; the next batch is
        copied into its static input.
"""

import torch
import torch.nn as nn

from ._util import Step, autocast, capture_graph, is_cuda, replay_step

NAME = "holdout19_launch_gru_loop"
EXPECTED_KIND = "launch_overhead"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "capture the unrolled step in a CUDA graph (torch.cuda.graph) and replay it"
DESCRIPTION = {
    "before": "GRUCell(256, 512) unrolled over 24 timesteps, batch 64, Linear head per step, bf16, no_grad",
    "after": "same step captured once in a CUDA graph and replayed",
}
T = 24


def make(variant, device):
    cuda = is_cuda(device)
    batch, din, hid = (64, 256, 512) if cuda else (4, 8, 16)
    torch.manual_seed(0)
    cell = nn.GRUCell(din, hid).to(device)
    head = nn.Linear(hid, 128 if cuda else 4).to(device)
    xs = [torch.randn(T, batch, din, device=device) for _ in range(2)]

    def run(x):
        h = torch.zeros(batch, hid, device=device)
        outs = []
        with torch.no_grad(), autocast(device):
            for t in range(T):
                h = cell(x[t], h)
                outs.append(head(h))
        return torch.stack(outs)

    if variant == "after" and cuda:
        sx = xs[0].clone()
        res = {}

        def body():
            res["out"] = run(sx)
        return Step(replay_step(capture_graph(body, warmup=3), [(sx, xs)]), info={"cuda_graph": True})
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        run(xs[i % 2])
    return Step(step, info={"timesteps": T})
