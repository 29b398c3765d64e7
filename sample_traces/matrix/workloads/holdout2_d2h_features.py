"""holdout2_d2h_features: embeddings copied to pageable host memory each step -> pinned double buffer.

Second held-out set: a feature-extraction loop with a different model and size than blocking_pageable_d2h.

before: a 6-layer bf16 MLP (768 wide) embeds a batch of 8192 rows; the fp32 embeddings (8192x1024,
        32 MiB) are copied with host_buf.copy_(emb) into a PAGEABLE CPU tensor every step.
after:  two pinned host buffers; the copy runs non_blocking on a side stream after an event, and the
        host only waits for the previous step's copy. It waits for it *before* launching the step's
        model, so on the GPU each copy still runs between two steps' compute: pinned, not overlapped
        (found on 2026-11-26: measured after = compute + the copy at 55 GB/s).
after_overlap: the same buffers, the wait for the previous copy moved after the step's model and copy
        are launched: the copy of step i runs while step i+1 computes (what the docstring above meant).
"""

import torch

from ._util import Step, autocast, is_cuda, mlp

NAME = "holdout2_d2h_features"
EXPECTED_KIND = "pageable_memcpy"
ROLE = "pair"
VARIANTS = ("before", "after", "after_overlap")
FIX = "pinned host buffers, copy_(non_blocking=True) on a side stream + event; wait only for the previous copy"
DESCRIPTION = {
    "before": "6-layer MLP 768 -> 1024, batch 8192, bf16 no_grad; fp32 embeddings (32 MiB) copied to pageable memory",
    "after": "same, two pinned buffers filled on a side stream; the host waits for the previous copy before "
             "launching the model (no overlap)",
    "after_overlap": "same, the wait for the previous copy after the step's launches (copy overlaps compute)",
}


def make(variant, device, pool=2):
    cuda = is_cuda(device)
    rows, din, dim, dout = (8192, 768, 768, 1024) if cuda else (16, 8, 8, 8)
    torch.manual_seed(0)
    model = mlp(din, dim, 4, dout).to(device).eval()
    xs = [torch.randn(rows, din, device=device) for _ in range(pool)]
    st = {"i": 0}
    pin = variant in ("after", "after_overlap") and cuda
    overlap = variant == "after_overlap"

    def embed(i):
        with torch.no_grad(), autocast(device):
            return model(xs[i % pool]).float()

    if not pin:
        host = torch.empty(rows, dout)

        def step():
            i = st["i"] = st["i"] + 1
            host.copy_(embed(i))
        return Step(step, info={"MiB_per_step": rows * dout * 4 / 2**20, "pinned": False})
    hosts = [torch.empty(rows, dout, pin_memory=True) for _ in range(2)]
    side = torch.cuda.Stream()
    ev = [torch.cuda.Event() for _ in range(2)]
    outs = [None, None]

    def step():
        i = st["i"] = st["i"] + 1
        b = i % 2
        if not overlap:
            ev[1 - b].synchronize()         # the previous step's copy is done: its buffer may be read
        outs[b] = embed(i)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            hosts[b].copy_(outs[b], non_blocking=True)
            ev[b].record(side)
        if overlap:
            ev[1 - b].synchronize()         # read the previous step's buffer while this step runs
    return Step(step, info={"MiB_per_step": rows * dout * 4 / 2**20, "pinned": True})
