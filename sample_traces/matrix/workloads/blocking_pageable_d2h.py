"""blocking_pageable_d2h: every step copies a big GPU output into pageable host memory.

An inference / feature-extraction loop: the model's 4096x1024 fp32 output (16 MiB) goes to
the host each step.
before: ``host_buf.copy_(out)`` into a PAGEABLE CPU tensor: Memcpy DtoH (Device -> Pageable),
        staged by the driver and blocking the CPU (the GPU idles while the CPU waits and then
        launches the next forward).
after:  two PINNED host buffers; the copy is issued with non_blocking=True on a side stream
        after an event, and the host only waits (event.synchronize) for the previous step's
        copy, so the copy overlaps the next forward.
"""

import torch

from ._util import Step, autocast, is_cuda, mlp

NAME = "blocking_pageable_d2h"
EXPECTED_KIND = "pageable_memcpy"
EXPECTED_ALSO = ["sync_stall"]
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "pinned host buffers, copy_(non_blocking=True) on a side stream + CUDA event; wait only for the previous step's copy"
DESCRIPTION = {
    "before": ("MLP 1024->2048 (3 hidden layers)->1024, batch 4096, bf16 autocast inference; each step the fp32 output "
               "(16 MiB) is copied into a pageable CPU tensor with copy_ (blocking)"),
    "after": ("same model; output copied non_blocking into one of two pinned buffers on a side stream (event "
              "ordered); the host reads the previous step's buffer after event.synchronize()"),
}


def make(variant, device, pool=4):
    cuda = is_cuda(device)
    rows, din, dim, dout = (4096, 1024, 2048, 1024) if cuda else (64, 32, 64, 32)
    torch.manual_seed(0)
    model = mlp(din, dim, 3, dout).to(device).eval()
    xs = [torch.randn(rows, din, device=device) for _ in range(pool)]
    st = {"i": 0, "acc": 0.0}
    info = {"rows": rows, "out_MiB": rows * dout * 4 / 2**20}

    def forward(i):
        with torch.no_grad(), autocast(device):
            return model(xs[i % pool]).float()

    if variant == "before" or not cuda:
        host = torch.empty(rows, dout)                     # pageable
        info["host_buffer"] = "pageable"

        def step():
            i = st["i"] = st["i"] + 1
            out = forward(i)
            host.copy_(out)                                # blocking pageable D2H
            st["acc"] += float(host[0, 0])                 # consume on the host
        return Step(step, info=info)

    main = torch.cuda.current_stream()
    side = torch.cuda.Stream()
    host = [torch.empty(rows, dout).pin_memory() for _ in range(2)]
    fwd_done = [torch.cuda.Event() for _ in range(2)]
    copied = [torch.cuda.Event() for _ in range(2)]
    info["host_buffer"] = "2x pinned, side-stream copy"

    def step():
        i = st["i"] = st["i"] + 1
        slot = i % 2
        out = forward(i)
        fwd_done[slot].record(main)
        with torch.cuda.stream(side):
            side.wait_event(fwd_done[slot])
            host[slot].copy_(out, non_blocking=True)
            copied[slot].record(side)
        out.record_stream(side)
        prev = 1 - slot
        copied[prev].synchronize()                         # previous step's copy (overlapped)
        st["acc"] += float(host[prev][0, 0])
    return Step(step, info=info)
