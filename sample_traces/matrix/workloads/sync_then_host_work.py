"""sync_then_host_work: a tiny sync (loss.item()) followed by several ms of host work each step.

before: after the training step the loss is read with ``loss.item()`` (a short sync), then the
        class weights for the next step are recomputed in numpy from the whole label array of the
        dataset (bincount over 4M labels + a few passes): ~5-10 ms of main-thread host work during
        which the GPU has nothing queued.
after:  the class weights (constant) are computed once at start-up and kept on the GPU;
        ``loss.item()`` is kept, to show that the sync itself was not the problem.

Expected: host_bound (the idle gap is the numpy work after the sync), NOT sync_stall.
"""

import numpy as np
import torch
import torch.nn.functional as F

from ._util import Step, autocast, is_cuda, mlp

NAME = "sync_then_host_work"
EXPECTED_KIND = "host_bound"
EXPECTED_NOT = ["sync_stall"]
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "compute the (constant) class weights once and keep them on the GPU; only the loss.item() remains"
DESCRIPTION = {
    "before": ("MLP 1024->1024 (3 hidden)->1000 training, batch 1024, bf16 autocast, fused Adam, weighted CE; "
               "per step loss.item() then numpy class-weight recomputation over 4M labels (~5-10 ms)"),
    "after": "same step and loss.item(); class weights computed once at start-up, cached on the GPU",
}


def class_weights(labels_np, classes, beta=0.9999):
    """Class-balanced weights (effective number of samples) over the labelled part of the dataset."""
    lab = labels_np[labels_np >= 0]                      # copy of the labelled entries
    counts = np.bincount(lab, minlength=classes).astype(np.float64)
    eff = (1.0 - np.power(beta, counts)) / (1.0 - beta)
    w = np.where(counts > 0, 1.0 / np.maximum(eff, 1e-12), 0.0)
    return (w / w[counts > 0].mean()).astype(np.float32)


def make(variant, device, pool=4):
    cuda = is_cuda(device)
    batch, din, dim, classes, nlabels = (1024, 1024, 1024, 1000, 4_000_000) if cuda else \
        (32, 32, 64, 20, 400_000)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    labels_np = (rng.zipf(1.3, size=nlabels) % (classes + 1)).astype(np.int64) - 1   # -1 = unlabelled
    model = mlp(din, dim, 3, classes).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, fused=True if cuda else None)
    xs = [torch.randn(batch, din, device=device) for _ in range(pool)]
    ys = [torch.randint(0, classes, (batch,), device=device) for _ in range(pool)]
    st = {"i": 0, "losses": []}
    w_gpu = {"w": torch.from_numpy(class_weights(labels_np, classes)).to(device)}

    def train(i):
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            logits = model(xs[i % pool])
        loss = F.cross_entropy(logits.float(), ys[i % pool], weight=w_gpu["w"])
        loss.backward()
        opt.step()
        return loss

    recompute = variant == "before"

    def step():
        i = st["i"] = st["i"] + 1
        loss = train(i)
        st["losses"].append(loss.item())                  # tiny sync, kept in both variants
        if len(st["losses"]) > 100:
            st["losses"].clear()
        if recompute:                                     # host work on the hot path
            w_gpu["w"] = torch.from_numpy(class_weights(labels_np, classes)).to(device)
    return Step(step, info={"batch": batch, "labels": nlabels,
                            "host_work": "per step" if recompute else "once at start-up"})
