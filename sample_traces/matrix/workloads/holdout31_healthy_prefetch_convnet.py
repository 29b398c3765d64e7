"""holdout31_healthy_prefetch_convnet: a GPU-bound conv net fed by a side-stream prefetcher: healthy.

Thirty-first held-out set (written with the tool at the commit that registers it, before any GPU trace of the
program existed): the input pipeline many training scripts copy from NVIDIA's examples. Batches of uint8 images
sit in pinned host memory; each step the next batch is copied to the GPU on a side stream (non_blocking), the
main stream waits for that stream (cudaStreamWaitEvent) before using it, the tensor is recorded on the main
stream (record_stream), and it is converted and normalised on the GPU. Copies, stream waits and events are all
there and all overlapped: nothing to fix. It must be called healthy with and without with_stack.
before: healthy_convnet's model (basic blocks 64/128 ch), batch 256 of 56x56, bf16 autocast, channels_last,
        fused SGD(momentum), fed by the prefetcher from a pool of 4 pinned uint8 batches.
"""

import torch
import torch.nn.functional as F

from workloads.layout_nchw_fp16 import make_model

from ._util import Step, autocast, is_cuda

NAME = "holdout31_healthy_prefetch_convnet"
EXPECTED_KIND = "healthy"
ROLE = "healthy"
VARIANTS = ("before",)
FIX = None
DESCRIPTION = {"before": ("ResNet-ish conv net (basic blocks 64/128 ch), batch 256, 56x56, bf16 autocast, "
                          "channels_last, fused SGD(momentum); uint8 batches from pinned memory copied a step ahead "
                          "on a side stream (wait_stream, record_stream), normalised on the GPU")}
WARMUP_STEPS = 8


def make(variant, device, pool=4, batch=256):
    cuda = is_cuda(device)
    batch, hw = (batch, 56) if cuda else (2, 16)
    torch.manual_seed(0)
    model = make_model(64).to(device).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, fused=True if cuda else None)
    host = [torch.randint(0, 256, (batch, 3, hw, hw), dtype=torch.uint8) for _ in range(pool)]
    labels = [torch.randint(0, 100, (batch,)) for _ in range(pool)]
    if cuda:
        host = [x.pin_memory() for x in host]
        labels = [y.pin_memory() for y in labels]
    mean = torch.tensor([0.485, 0.456, 0.406], device=device).view(1, 3, 1, 1) * 255
    std = torch.tensor([0.229, 0.224, 0.225], device=device).view(1, 3, 1, 1) * 255
    side = torch.cuda.Stream() if cuda else None
    st = {"i": 0, "next": None}

    def fetch(i):
        """The batch i, started on the side stream (on CPU: a plain copy)."""
        if not cuda:
            return host[i % pool].to(device), labels[i % pool].to(device)
        with torch.cuda.stream(side):
            x = host[i % pool].to(device, non_blocking=True)
            y = labels[i % pool].to(device, non_blocking=True)
        return x, y

    def step():
        i = st["i"] = st["i"] + 1
        if st["next"] is None:
            st["next"] = fetch(i)
        x, y = st["next"]
        if cuda:
            torch.cuda.current_stream().wait_stream(side)
            x.record_stream(torch.cuda.current_stream())
            y.record_stream(torch.cuda.current_stream())
        st["next"] = fetch(i + 1)                 # the next batch copies while this one trains
        x = ((x.float() - mean) / std).contiguous(memory_format=torch.channels_last)
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            out = model(x)
        F.cross_entropy(out.float(), y).backward()
        opt.step()
    return Step(step, info={"batch": batch, "hw": hw, "memory_format": "channels_last", "amp": "bf16",
                            "input": "pinned uint8, side-stream prefetch"})
