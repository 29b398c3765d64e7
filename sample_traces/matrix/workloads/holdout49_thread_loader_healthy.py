"""holdout49_thread_loader_healthy: a GPU-bound conv net fed by a background thread that assembles batches with torch
CPU ops (index_select from a uint8 image bank, a flip of every other image, pin_memory: ops that release the GIL,
little Python): a second thread busy on the CPU, and nothing to fix.

Forty-ninth held-out set (registered before it was recorded; see the matrix README). Expected healthy. Model:
holdout31's (basic blocks 64/128 ch), batch 256 of 3 x 56 x 56, bf16 autocast, channels_last, fused SGD(momentum);
the uint8 batch is copied non_blocking from pinned memory and normalised on the GPU.
"""

import torch
import torch.nn.functional as F

from workloads.layout_nchw_fp16 import make_model

from ._threads import source
from ._util import Step, autocast, is_cuda

NAME = "holdout49_thread_loader_healthy"
EXPECTED_KIND = "healthy"
ROLE = "healthy"
VARIANTS = ("before",)
FIX = None
DESCRIPTION = {"before": ("ResNet-ish conv net (basic blocks 64/128 ch), batch 256, 56x56, bf16 autocast, "
                          "channels_last, fused SGD(momentum); uint8 batches assembled by torch CPU ops (index_select, "
                          "flip, pin_memory) on a background threading.Thread (queue depth 2), normalised on the GPU")}
WARMUP_STEPS = 8


class Assembled:
    """Batch j: images picked from a uint8 bank by a seeded permutation, every other one flipped; labels."""

    def __init__(self, batch, hw, bank=1024):
        g = torch.Generator().manual_seed(0)
        self.bank = torch.randint(0, 256, (bank, 3, hw, hw), dtype=torch.uint8, generator=g)
        self.labels = torch.randint(0, 100, (bank,), generator=g)
        self.batch = batch

    def __call__(self, j):
        idx = torch.randperm(len(self.bank), generator=torch.Generator().manual_seed(j))[:self.batch]
        x = self.bank.index_select(0, idx)
        x[::2] = x[::2].flip(-1)
        return x, self.labels.index_select(0, idx)


def make(variant, device, batch=256):
    cuda = is_cuda(device)
    batch, hw = (batch, 56) if cuda else (2, 16)
    torch.manual_seed(0)
    model = make_model(64).to(device).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, fused=True if cuda else None)
    mean = torch.tensor([0.485, 0.456, 0.406], device=device).view(1, 3, 1, 1) * 255
    std = torch.tensor([0.229, 0.224, 0.225], device=device).view(1, 3, 1, 1) * 255
    get, close = source("before", Assembled(batch, hw), cuda, 0)

    def step():
        x, y = get()
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        x = ((x.float() - mean) / std).contiguous(memory_format=torch.channels_last)
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            out = model(x)
        F.cross_entropy(out.float(), y).backward()
        opt.step()
    return Step(step, close=close, info={"batch": batch, "hw": hw, "memory_format": "channels_last", "amp": "bf16",
                                         "input": "uint8 batches assembled on a background thread, pinned"})
