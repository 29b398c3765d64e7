"""holdout53_pinned_feed_healthy: the fifty-third set's decoder LM with its mask and rotary tables as device buffers,
trained at a batch that keeps the GPU busy, each step's tokens and targets copied from pinned host memory with
non_blocking=True (what a DataLoader with pin_memory=True hands over).

Fifty-third held-out set (registered before it was recorded; see the matrix README): the control. Its only host-to-
device copies are from pinned memory and overlap the GPU's work; nothing is built on the host in the forward, so no
finding may claim a pageable copy, a host-built constant or a sync. Model: 6 x 512, 8 heads, vocabulary 8000; bf16
autocast, fused AdamW; batch 32 x 512 (four pinned batches in turn).
"""

import torch
import torch.nn.functional as F

from ._host_consts import LM
from ._util import Step, autocast, is_cuda

NAME = "holdout53_pinned_feed_healthy"
EXPECTED_KIND = "healthy"
ROLE = "healthy"
VARIANTS = ("before",)
FIX = None
SIZE = {"batch": 32, "seq": 512, "vocab": 8000, "dim": 512, "heads": 8, "layers": 6}
DESCRIPTION = {
    "before": ("decoder LM (6 x 512, 8 heads, rotary, vocabulary 8000), batch 32 x 512, bf16 autocast, fused AdamW; "
               "mask and tables as device buffers; tokens and targets copied each step from pinned memory, "
               "non_blocking"),
}


def make(variant, device, size=SIZE):
    cuda = is_cuda(device)
    s = size if cuda else {**size, "batch": 2, "seq": 16, "vocab": 50, "dim": 16, "heads": 2, "layers": 2}
    torch.manual_seed(0)
    model = LM(s["vocab"], s["dim"], s["heads"], s["layers"], s["seq"], host=False).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    g = torch.Generator().manual_seed(1)
    pool = [(torch.randint(0, s["vocab"], (s["batch"], s["seq"]), generator=g),
             torch.randint(0, s["vocab"], (s["batch"], s["seq"]), generator=g)) for _ in range(4)]
    if cuda:
        pool = [(x.pin_memory(), y.pin_memory()) for x, y in pool]
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        x, y = (t.to(device, non_blocking=True) for t in pool[i % len(pool)])
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            logits = model(x)
        F.cross_entropy(logits.float().flatten(0, 1), y.flatten()).backward()
        opt.step()
    return Step(step, info={"batch": s["batch"], "seq": s["seq"], "amp": "bf16", "pinned_feed": True})
