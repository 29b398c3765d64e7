"""holdout15_pageable_logits_slice: an eval loop copies all its logits to the host to read a few columns -> a scalar.

Fifteenth held-out set (written after a result's pageable copy counted as host work that leaves the CPU
for the warm rule): 32 MB of logits copied every batch into pageable memory, then a cheap numpy read of a
slice of them (well under the warm rule's 2 ms on its own).
before: MLP 512->1024 (2 hidden)->4096 classes (bf16, no_grad), batch 2048; per batch
        logits.float().cpu().numpy() (32 MB), and the mean of the first 8 columns' softmax-free scores
        summed with numpy.
after:  the same statistic computed on the GPU (a slice and a sum), accumulated in a GPU tensor; one
        .item() per 64 batches.
"""

import torch

from ._util import Step, autocast, is_cuda, mlp

NAME = "holdout15_pageable_logits_slice"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "the slice's sum on the GPU, accumulated as a tensor; one .item() per 64 batches"
DESCRIPTION = {
    "before": ("eval: MLP 512->1024 (2 hidden)->4096, batch 2048, bf16, no_grad; per batch 32 MB of logits to "
               "pageable host memory (.cpu().numpy()), numpy sums 8 of the 4096 columns"),
    "after": "same model; the 8 columns summed on the GPU, one .item() per 64 batches",
}
EPOCH = 64


def make(variant, device, pool=4):
    cuda = is_cuda(device)
    din, dim, classes, batch = (512, 1024, 4096, 2048) if cuda else (16, 32, 64, 16)
    torch.manual_seed(0)
    model = mlp(din, dim, 2, classes).to(device).eval()
    xs = [torch.randn(batch, din, device=device) for _ in range(pool)]
    st = {"i": 0, "s": 0.0}
    total = torch.zeros((), device=device)

    def logits(i):
        with torch.no_grad(), autocast(device):
            return model(xs[i % pool]).float()

    def before():
        i = st["i"] = st["i"] + 1
        z = logits(i).cpu().numpy()                                    # 32 MB, pageable, every batch
        st["s"] += float(z[:, :8].sum())

    def after():
        i = st["i"] = st["i"] + 1
        with torch.no_grad():
            total.add_(logits(i)[:, :8].sum())
        if i % EPOCH == 0:
            st["s"] += float(total.item())
            total.zero_()
    return Step(before if variant == "before" else after, info={"batch": batch, "classes": classes})
