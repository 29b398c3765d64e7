"""holdout16_pageable_feature_cache: features cached to pageable host memory every batch -> pinned, a step later.

Sixteenth held-out set (written 2026-11-27 after the staged copy's dispatch point moved to the middle of its
range, 1.25x, on rows it was then scored on; committed before it was recorded): a feature-extraction loop
whose fixed step stays CPU-bound, so how fast the rest of the step dispatches once the CPU no longer stages
the copy decides the speed-up. The host keeps every batch's features (it needs all of them).
before: a 10-layer MLP with LayerNorm (512 -> 1024 -> 1536, bf16, no_grad) on a batch of 2048 rows; the fp32
        features (2048 x 1536, 12 MiB) copied into the next slot of a ring of PAGEABLE host tensors
        (slot.copy_(feats): blocking).
after:  the same ring in pinned memory; the copy runs non_blocking on a side stream after the step's work,
        recorded by an event; the host waits for the previous batch's copy only after this step's work is
        launched (the pageable_memcpy advice).
"""

import torch

from ._util import Step, autocast, is_cuda, mlp

NAME = "holdout16_pageable_feature_cache"
EXPECTED_KIND = "pageable_memcpy"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "pinned host ring, copy_(non_blocking=True) on a side stream + event; wait for the previous copy after the launches"
DESCRIPTION = {
    "before": ("10-layer MLP with LayerNorm 512 -> 1024 -> 1536, batch 2048, bf16 no_grad; fp32 features (12 MiB) "
               "copied into a ring of pageable host tensors every batch"),
    "after": "same, the ring pinned, copies on a side stream, the previous copy waited for after the launches",
}
RING = 4


def make(variant, device, pool=2):
    cuda = is_cuda(device)
    rows, din, dim, dout = (2048, 512, 1024, 1536) if cuda else (16, 8, 8, 8)
    torch.manual_seed(0)
    model = mlp(din, dim, 10, dout, norm=True).to(device).eval()
    xs = [torch.randn(rows, din, device=device) for _ in range(pool)]
    pin = variant == "after" and cuda
    ring = [torch.empty(rows, dout, pin_memory=pin) for _ in range(RING)]
    st = {"i": 0}
    info = {"MiB_per_step": rows * dout * 4 / 2**20, "pinned": pin}

    def feats(i):
        with torch.no_grad(), autocast(device):
            return model(xs[i % pool]).float()

    if not pin:
        def step():
            i = st["i"] = st["i"] + 1
            ring[i % RING].copy_(feats(i))
        return Step(step, info=info)
    side = torch.cuda.Stream()
    done = [torch.cuda.Event() for _ in range(RING)]
    outs = [None] * RING

    def step():
        i = st["i"] = st["i"] + 1
        k = i % RING
        outs[k] = feats(i)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            ring[k].copy_(outs[k], non_blocking=True)
            done[k].record(side)
        done[(i - 1) % RING].synchronize()     # the previous batch's features are on the host now
    return Step(step, info=info)
