"""holdout13_multilabel_f1_numpy: a multi-label training loop that scores F1 in numpy every step -> on the GPU.

Thirteenth held-out set (written after the rest of a step whose host work leaves the CPU was taken to run
warm, fixes.WARM_CPU, and the reads rule's slowest reader became 0.05 GB/s): a training step this time (the
eval loops before it had no backward), a different consumer (per-class true/false positives and F1 of 512
labels, thresholded in numpy) and a bf16 MLP with BCE loss.
before: MLP 1024->2048 (3 hidden)->512 labels, batch 4096, bf16 autocast, fused AdamW, BCE-with-logits; per
        step sigmoid(logits).float().cpu().numpy() (8 MB), thresholded at 0.5 against the numpy targets,
        per-class TP/FP/FN and a macro F1, accumulated in numpy.
after:  the same counts on the GPU (sums over the batch), accumulated in GPU tensors; one copy of the
        three 512-vectors per 50 steps.
"""

import numpy as np
import torch
import torch.nn.functional as F

from ._util import Step, autocast, is_cuda, mlp

NAME = "holdout13_multilabel_f1_numpy"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "per-class TP/FP/FN on the GPU, accumulated as tensors; one copy of the counts every 50 steps"
DESCRIPTION = {
    "before": ("multi-label training: MLP 1024->2048 (3 hidden)->512, batch 4096, bf16, fused AdamW, BCE; per step "
               "8 MB of sigmoid outputs to numpy, thresholded, per-class TP/FP/FN and macro F1 in numpy"),
    "after": "same step; TP/FP/FN summed on the GPU into tensors, copied once every 50 steps",
}
EVERY = 50


def make(variant, device, pool=4):
    cuda = is_cuda(device)
    batch, din, dim, labels = (4096, 1024, 2048, 512) if cuda else (16, 16, 32, 8)
    torch.manual_seed(0)
    model = mlp(din, dim, 3, labels).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    xs = [torch.randn(batch, din, device=device) for _ in range(pool)]
    ys = [(torch.rand(batch, labels, device=device) < 0.05).float() for _ in range(pool)]
    ys_np = [y.cpu().numpy().astype(bool) for y in ys]
    st = {"i": 0, "tp": np.zeros(labels), "fp": np.zeros(labels), "fn": np.zeros(labels), "f1": []}
    counts = torch.zeros(3, labels, device=device)

    def step():
        i = st["i"] = st["i"] + 1
        x, y = xs[i % pool], ys[i % pool]
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            logits = model(x)
        F.binary_cross_entropy_with_logits(logits.float(), y).backward()
        opt.step()
        if variant == "before":
            p = torch.sigmoid(logits.detach()).float().cpu().numpy() > 0.5      # 8 MB, blocking
            t = ys_np[i % pool]
            st["tp"] += (p & t).sum(0)
            st["fp"] += (p & ~t).sum(0)
            st["fn"] += (~p & t).sum(0)
            st["f1"].append(float(np.mean(2 * st["tp"] / np.maximum(2 * st["tp"] + st["fp"] + st["fn"], 1))))
        else:
            with torch.no_grad():
                p = logits.detach() > 0                                         # sigmoid > 0.5
                t = y.bool()
                counts[0] += (p & t).sum(0)
                counts[1] += (p & ~t).sum(0)
                counts[2] += (~p & t).sum(0)
            if i % EVERY == 0:
                c = counts.cpu().numpy()
                st["f1"].append(float(np.mean(2 * c[0] / np.maximum(2 * c[0] + c[1] + c[2], 1))))
        if len(st["f1"]) > 400:
            st["f1"].clear()
    return Step(step, info={"batch": batch, "labels": labels})
