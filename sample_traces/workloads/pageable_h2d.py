"""Pageable host-to-device copies on the critical path.

before: every step copies a ~50 MB fp32 host batch from PAGEABLE memory with
        ``.to('cuda')`` (Memcpy HtoD (Pageable -> Device)); the copy is staged by the
        driver, blocks the CPU and cannot overlap the compute, so step = copy + compute.
after:  host batches live in pinned (page-locked) memory, as a DataLoader with
        pin_memory=True delivers them; the next batch is prefetched with
        ``copy_(non_blocking=True)`` on a side CUDA stream into a second device buffer
        (double buffering, ordered with CUDA events), so the copy overlaps the compute.
"""

import torch
import torch.nn as nn

from .common import Step, is_cuda

NAME = "pageable_h2d"
EXPECTED_KIND = "pageable_memcpy"
WITH_STACK = False
VARIANTS = ("before", "after")
FIX = "pinned host buffers + non_blocking copies prefetched on a side stream (double buffering)"
DESCRIPTION = {
    "before": ("each step: x = pageable_cpu_batch.to('cuda') (2048x6144 fp32, 50 MB), then a training step of a "
               "7-layer 4096-wide MLP (bf16 autocast, fused Adam)"),
    "after": ("same batches held in pinned memory; batch i+1 is copied with non_blocking=True on a side stream "
              "into a second device buffer while step i computes (events order copy/compute)"),
}


def _sizes(device):
    if is_cuda(device):
        return dict(rows=2048, din=6144, dim=4096, layers=6)
    return dict(rows=32, din=64, dim=32, layers=2)


def make(variant, device, pool=4):
    sz = _sizes(device)
    torch.manual_seed(0)
    mods = [nn.Linear(sz["din"], sz["dim"]), nn.GELU()]
    for _ in range(sz["layers"]):
        mods += [nn.Linear(sz["dim"], sz["dim"]), nn.GELU()]
    mods.append(nn.Linear(sz["dim"], 1))
    model = nn.Sequential(*mods).to(device)
    cuda = is_cuda(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, fused=cuda or None)
    pin = variant == "after" and cuda
    host = [torch.randn(sz["rows"], sz["din"]) for _ in range(pool)]
    if pin:
        host = [h.pin_memory() for h in host]
    mb = host[0].numel() * host[0].element_size() / 2**20
    info = {"sizes": sz, "batch_MiB": round(mb, 1), "host_pool": pool, "pinned": pin}

    def compute(x):
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16):
            out = model(x)
        loss = out.float().pow(2).mean()
        loss.backward()
        opt.step()

    state = {"i": 0}
    if variant == "before" or not cuda:
        def step():
            i = state["i"] = state["i"] + 1
            x = host[i % pool].to(device)      # pageable H2D copy, synchronous w.r.t. the host
            compute(x)
        return Step(step, info=info)

    main = torch.cuda.current_stream()
    copy_stream = torch.cuda.Stream()
    bufs = [torch.empty_like(host[0], device=device) for _ in range(2)]
    ready = [torch.cuda.Event() for _ in range(2)]
    consumed = [torch.cuda.Event() for _ in range(2)]

    def issue_copy(slot, batch_idx):
        with torch.cuda.stream(copy_stream):
            copy_stream.wait_event(consumed[slot])       # previous compute on this buffer done
            bufs[slot].copy_(host[batch_idx % pool], non_blocking=True)
            ready[slot].record(copy_stream)

    issue_copy(0, 0)

    def step():
        i = state["i"]
        slot = i % 2
        main.wait_event(ready[slot])                     # batch i is on the device
        issue_copy(1 - slot, i + 1)                      # prefetch batch i+1 while computing
        compute(bufs[slot])
        consumed[slot].record(main)
        state["i"] = i + 1

    return Step(step, info=info)
