"""holdout41_timm_resnet18_pageable_batches: batches held in ordinary (pageable) host memory -> pinned, non_blocking.

Forty-first held-out set (pre-registered 2026-12-04 before it was recorded; see holdout41_hf_gpt2_eager_attention).
Model: timm's resnet18 built without weights, channels_last, bf16 autocast, SGD with momentum; batch 256 images
224 x 224 in fp32 (147 MiB) from a pool of 2 batches held in host memory, as a dataset cached in RAM; labels too.
before: the batch copied to the GPU each step with .to(device) from pageable memory (staged by the driver; the host
        waits for it).
after:  the pool pinned once (tensor.pin_memory(), what DataLoader(pin_memory=True) gives) and copied with
        .to(device, non_blocking=True).
"""

import torch
import torch.nn.functional as F

from ._util import Step, autocast, is_cuda

NAME = "holdout41_timm_resnet18_pageable_batches"
EXPECTED_KIND = "pageable_memcpy"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "pin the host batches (pin_memory) and copy them with .to(device, non_blocking=True)"
SIZE = {"model": "resnet18", "batch": 256, "img": 224}
DESCRIPTION = {
    "before": "timm resnet18 (no weights), channels_last, bf16 autocast, batch 256 fp32 images copied from "
              "pageable host memory with .to(device)",
    "after": "same, the host batches pinned and copied with .to(device, non_blocking=True)",
}
WARMUP_STEPS = 8


def make(variant, device, pool=2):
    import timm

    cuda = is_cuda(device)
    s = SIZE if cuda else {"model": "resnet18", "batch": 2, "img": 32}
    torch.manual_seed(0)
    model = timm.create_model(s["model"], pretrained=False, num_classes=1000).to(device)
    model = model.to(memory_format=torch.channels_last).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(s["batch"], 3, s["img"], s["img"], generator=g) for _ in range(pool)]
    ys = [torch.randint(0, 1000, (s["batch"],), generator=g) for _ in range(pool)]
    pinned = variant == "after" and cuda
    if pinned:
        xs, ys = [x.pin_memory() for x in xs], [y.pin_memory() for y in ys]
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        x = xs[i % pool].to(device, non_blocking=pinned)
        y = ys[i % pool].to(device, non_blocking=pinned)
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            out = model(x)
        F.cross_entropy(out.float(), y).backward()
        opt.step()
    mib = xs[0].numel() * xs[0].element_size() / 2**20
    return Step(step, info={**s, "batch_MiB": round(mib, 1), "pinned": pinned})
