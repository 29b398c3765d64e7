"""holdout16_pageable_h2d_train: a small training step fed from pageable host memory -> pinned, prefetched.

Sixteenth held-out set (written 2026-11-27 after the staged copy's dispatch point moved to 1.25x, the middle
of its range, on rows it was then scored on; committed before it was recorded): a copy to the device whose
fixed step stays launch-bound, so how fast the rest of the step dispatches once the CPU no longer stages the
copy decides the speed-up.
before: each step x = pageable_cpu_batch.to('cuda') (4096 x 768 fp32, 12 MiB), then a training step of a
        6-hidden-layer MLP (768 -> 512 -> 10, bf16 autocast, fused AdamW).
after:  the batches live in pinned memory; batch i+1 is copied with non_blocking=True on a side stream into a
        second device buffer while step i computes (events order copy and compute).
after_graph_only / after_graph (added 2026-11-27, committed before they were recorded: the tool ranked
        launch_overhead first on all six *_clean10 rows, a fix nobody had measured): the training step in one
        CUDA graph (capturable fused AdamW), fed by the pageable copy as before / by the pinned prefetch of
        "after" (plus a device-to-device copy into the graph's static input).
"""

import torch
import torch.nn as nn

from ._util import Step, autocast, capture_graph, is_cuda, mlp

NAME = "holdout16_pageable_h2d_train"
EXPECTED_KIND = "pageable_memcpy"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph_only", "after_graph")
FIX = "pinned host batches + non_blocking copies prefetched on a side stream (double buffering)"
DESCRIPTION = {
    "before": "MLP 768 -> 512 (6 hidden) -> 10, batch 4096 fp32 from pageable memory (12 MiB), bf16, fused AdamW",
    "after": "same, pinned batches prefetched with non_blocking=True on a side stream",
    "after_graph_only": "before's pageable copy, then the training step replayed as one CUDA graph",
    "after_graph": "after's pinned prefetch, then the training step replayed as one CUDA graph",
}


def make(variant, device, pool=3):
    cuda = is_cuda(device)
    n, din, dim = (4096, 768, 512) if cuda else (16, 8, 8)
    torch.manual_seed(0)
    model = mlp(din, dim, 6, 10).to(device)
    graph = variant in ("after_graph_only", "after_graph") and cuda
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None,
                            **({"capturable": True} if graph else {}))
    host = [torch.randn(n, din) for _ in range(pool)]
    pin = variant in ("after", "after_graph") and cuda
    if pin:
        host = [h.pin_memory() for h in host]
    ys = torch.randint(0, 10, (n,), device=device)

    def compute(x):
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            out = model(x)
        nn.functional.cross_entropy(out.float(), ys).backward()
        opt.step()

    st = {"i": 0}
    info = {"batch_MiB": round(host[0].numel() * 4 / 2**20, 1), "pinned": pin, "cuda_graph": graph}
    if graph:
        sx = torch.zeros(n, din, device=device)

        def body():
            opt.zero_grad(set_to_none=False)
            # The autocast weight cache must be off inside a graph (torch.cuda.graph docs).
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16, cache_enabled=False):
                out = model(sx)
            nn.functional.cross_entropy(out.float(), ys).backward()
            opt.step()
        cg = capture_graph(body, warmup=3)
        compute = lambda x: (sx.copy_(x), cg.replay())      # noqa: E731  (the graph reads sx)
    if not pin:
        def step():
            i = st["i"] = st["i"] + 1
            compute(host[i % pool].to(device))
        return Step(step, info=info)
    side = torch.cuda.Stream()
    bufs = [torch.empty_like(host[0], device=device) for _ in range(2)]
    ready = [torch.cuda.Event() for _ in range(2)]
    done = [torch.cuda.Event() for _ in range(2)]

    def prefetch(i):
        b = i % 2
        side.wait_event(done[b])
        with torch.cuda.stream(side):
            bufs[b].copy_(host[i % pool], non_blocking=True)
            ready[b].record(side)

    prefetch(1)

    def step():
        i = st["i"] = st["i"] + 1
        b = i % 2
        torch.cuda.current_stream().wait_event(ready[b])
        x = bufs[b]
        prefetch(i + 1)
        compute(x)
        # The buffer may be refilled once this step's work that reads it has run.
        done[b].record(torch.cuda.current_stream())
    return Step(step, info=info)
