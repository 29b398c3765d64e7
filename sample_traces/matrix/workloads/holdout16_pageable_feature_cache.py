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
after_graph_only / after_graph (added 2026-11-27, committed before they were recorded: the tool ranked
        launch_overhead first on 3 of the 6 *_clean10 rows, a fix nobody had measured): the MLP's forward
        replayed as one CUDA graph into a static output, copied as before (pageable, blocking) / as "after"
        (through a device buffer per ring slot, pinned, on the side stream).
"""

import torch

from ._util import Step, autocast, capture_graph, is_cuda, mlp

NAME = "holdout16_pageable_feature_cache"
EXPECTED_KIND = "pageable_memcpy"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph_only", "after_graph")
FIX = "pinned host ring, copy_(non_blocking=True) on a side stream + event; wait for the previous copy after the launches"
DESCRIPTION = {
    "before": ("10-layer MLP with LayerNorm 512 -> 1024 -> 1536, batch 2048, bf16 no_grad; fp32 features (12 MiB) "
               "copied into a ring of pageable host tensors every batch"),
    "after": "same, the ring pinned, copies on a side stream, the previous copy waited for after the launches",
    "after_graph_only": "before's pageable copy, the forward replayed as one CUDA graph",
    "after_graph": "after's pinned ring and side-stream copies, the forward replayed as one CUDA graph",
}
RING = 4


def make(variant, device, pool=2):
    cuda = is_cuda(device)
    rows, din, dim, dout = (2048, 512, 1024, 1536) if cuda else (16, 8, 8, 8)
    torch.manual_seed(0)
    model = mlp(din, dim, 10, dout, norm=True).to(device).eval()
    xs = [torch.randn(rows, din, device=device) for _ in range(pool)]
    pin = variant in ("after", "after_graph") and cuda
    graph = variant in ("after_graph_only", "after_graph") and cuda
    ring = [torch.empty(rows, dout, pin_memory=pin) for _ in range(RING)]
    st = {"i": 0}
    info = {"MiB_per_step": rows * dout * 4 / 2**20, "pinned": pin, "cuda_graph": graph}

    def feats(i):
        with torch.no_grad(), autocast(device):
            return model(xs[i % pool]).float()

    if graph:
        sx, sout = xs[0].clone(), torch.empty(rows, dout, device=device)

        def body():
            with torch.no_grad(), torch.autocast(device_type="cuda", dtype=torch.bfloat16, cache_enabled=False):
                sout.copy_(model(sx).float())
        cg = capture_graph(body, warmup=3)
        slots = [torch.empty(rows, dout, device=device) for _ in range(RING)] if pin else None

        def feats(i):                                   # noqa: F811  (the graph's version)
            sx.copy_(xs[i % pool])
            cg.replay()
            if slots is None:
                return sout
            # The next replay overwrites sout: the side stream copies a slot of its own.
            slots[i % RING].copy_(sout)
            return slots[i % RING]

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
