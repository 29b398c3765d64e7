"""holdout2_pageable_conv: a conv net fed from pageable host memory -> pinned, prefetched on a side stream.

Second held-out set (written after the staged-copy dispatch factor was fitted on pageable_h2d and
blocking_pageable_d2h): a different model (convolutions, channels_last) and batch size (24 MiB).

before: each step x = pageable_cpu_batch.to('cuda') (32x3x256x256 fp32, 24 MiB), then a training step of a
        small 5-conv net (bf16 autocast, channels_last, fused SGD with momentum).
after:  the batches live in pinned memory; batch i+1 is copied with non_blocking=True on a side stream
        into a second device buffer while step i computes (events order copy and compute).
"""

import torch
import torch.nn as nn

from ._util import Step, is_cuda

NAME = "holdout2_pageable_conv"
EXPECTED_KIND = "pageable_memcpy"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "pinned host batches + non_blocking copies prefetched on a side stream (double buffering)"
DESCRIPTION = {
    "before": "5-conv net (64-256 ch), batch 32x3x256x256 fp32 from pageable memory (24 MiB), bf16, channels_last",
    "after": "same, pinned batches prefetched with non_blocking=True on a side stream",
}


def _net(c=64):
    return nn.Sequential(
        nn.Conv2d(3, c, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(c, 2 * c, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(2 * c, 4 * c, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(4 * c, 4 * c, 3, padding=1), nn.ReLU(),
        nn.Conv2d(4 * c, 4 * c, 3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4 * c, 10))


def make(variant, device, pool=3):
    cuda = is_cuda(device)
    n, hw = (32, 256) if cuda else (2, 16)
    torch.manual_seed(0)
    model = _net(64 if cuda else 4).to(device).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, fused=True if cuda else None)
    host = [torch.randn(n, 3, hw, hw) for _ in range(pool)]
    pin = variant == "after" and cuda
    if pin:
        host = [h.pin_memory() for h in host]
    ys = torch.randint(0, 10, (n,), device=device)

    def compute(x):
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16):
            out = model(x.contiguous(memory_format=torch.channels_last))
        nn.functional.cross_entropy(out.float(), ys).backward()
        opt.step()

    st = {"i": 0}
    info = {"batch_MiB": round(host[0].numel() * 4 / 2**20, 1), "pinned": pin}
    if not pin:
        def step():
            i = st["i"] = st["i"] + 1
            compute(host[i % pool].to(device))
        return Step(step, info=info)
    main = torch.cuda.current_stream()
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
        prefetch(i + 1)
        main.wait_event(ready[b])
        compute(bufs[b])
        done[b].record(main)
    return Step(step, info=info)
