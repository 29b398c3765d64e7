"""eval_to_numpy: an evaluation loop that moves every batch's outputs to numpy.

before: per batch ``probs.cpu().numpy()``, argmax and accuracy in numpy: a blocking D2H copy,
        so the host waits for the forward of every batch before it can launch the next.
after:  argmax / correct-count on the GPU, predictions written into a preallocated GPU buffer;
        one transfer per 64 batches ("end of the eval pass"), amortised in the step time.
"""

import numpy as np
import torch

from ._util import Step, autocast, is_cuda, mlp

NAME = "eval_to_numpy"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "keep predictions/metrics on the GPU; one .cpu() at the end of the eval pass (here every 64 batches)"
DESCRIPTION = {
    "before": ("eval: MLP 1024->2048 (6 hidden)->100, batch 512, bf16 autocast, no_grad; per batch "
               "softmax(...).cpu().numpy() + numpy argmax/accuracy"),
    "after": "same model; argmax/accuracy on the GPU into a preallocated buffer, one D2H per 64 batches",
}
EPOCH = 64


def make(variant, device, pool=8, batch=512):
    cuda = is_cuda(device)
    din, dim, classes = (1024, 2048, 100) if cuda else (32, 64, 10)
    if not cuda:
        batch = 16
    torch.manual_seed(0)
    model = mlp(din, dim, 6, classes).to(device).eval()
    xs = [torch.randn(batch, din, device=device) for _ in range(pool)]
    ys = [torch.randint(0, classes, (batch,), device=device) for _ in range(pool)]
    ys_np = [y.cpu().numpy() for y in ys]
    st = {"i": 0, "correct": 0, "seen": 0, "preds": []}

    def forward(i):
        with torch.no_grad(), autocast(device):
            return model(xs[i % pool]).float()

    if variant == "before":
        def step():
            i = st["i"] = st["i"] + 1
            probs = forward(i).softmax(-1).cpu().numpy()    # blocking D2H every batch
            pred = probs.argmax(1)
            st["correct"] += int((pred == ys_np[i % pool]).sum())
            st["seen"] += len(pred)
            if len(st["preds"]) >= EPOCH:
                st["preds"].clear()
            st["preds"].append(pred)
        return Step(step, info={"batch": batch, "transfers_per_step": 1})

    buf = torch.empty(EPOCH, batch, dtype=torch.long, device=device)
    correct = torch.zeros((), dtype=torch.long, device=device)

    def step():
        i = st["i"] = st["i"] + 1
        k = i % EPOCH
        pred = forward(i).argmax(-1)
        buf[k].copy_(pred)
        correct.add_((pred == ys[i % pool]).sum())
        if k == EPOCH - 1:                                   # end of the eval pass: one transfer
            st["preds"] = buf.cpu().numpy()
            st["correct"] += int(correct.item())
            correct.zero_()
    return Step(step, info={"batch": batch, "transfers_per_step": 1 / EPOCH})
