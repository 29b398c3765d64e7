"""holdout11_seg_eval_numpy: a segmentation eval loop that scores every batch in numpy -> on the GPU.

Eleventh held-out set (written after a large copy to the host was told apart from a wait for queued
work, and host work on the copied result went with the sync's fix): a conv segmentation head, a
different consumer (a confusion matrix) and shape than the eval loops before it.
before: a small conv net (bf16, channels_last, no_grad) predicts 21 classes over 16 x 128 x 128 pixels;
        per batch logits.float().cpu().numpy() (22 MB), argmax over classes and a 21 x 21 confusion
        matrix with np.bincount, accumulated in numpy.
after:  argmax and the confusion matrix (scatter_add_ into 21 x 21) on the GPU, accumulated in a GPU tensor; one
        copy of the 21 x 21 matrix per 64 batches (the end of the eval pass).
"""

import numpy as np
import torch
import torch.nn as nn

from ._util import Step, autocast, is_cuda

NAME = "holdout11_seg_eval_numpy"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "argmax and the confusion matrix (scatter_add_) on the GPU; one copy of the 21x21 matrix per 64 batches"
DESCRIPTION = {
    "before": ("segmentation eval: conv net, 21 classes, 16 x 128 x 128, bf16, channels_last, no_grad; per batch "
               "22 MB of logits to numpy, argmax and np.bincount confusion matrix"),
    "after": "same model; argmax and a scatter_add_ confusion matrix on the GPU, one copy per 64 batches",
}
EPOCH = 64


def make(variant, device, pool=4):
    cuda = is_cuda(device)
    n, hw, c, k = (16, 128, 48, 21) if cuda else (1, 8, 4, 3)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU(),
                          nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU(),
                          nn.Conv2d(c, k, 1)).to(device).eval().to(memory_format=torch.channels_last)
    xs = [torch.randn(n, 3, hw, hw, device=device).contiguous(memory_format=torch.channels_last) for _ in range(pool)]
    ys = [torch.randint(0, k, (n, hw, hw), device=device) for _ in range(pool)]
    ys_np = [y.cpu().numpy().ravel() for y in ys]
    st = {"i": 0, "conf": np.zeros((k, k), dtype=np.int64)}
    conf = torch.zeros(k * k, dtype=torch.long, device=device)

    def logits(i):
        with torch.no_grad(), autocast(device):
            return model(xs[i % pool]).float()

    def before():
        i = st["i"] = st["i"] + 1
        z = logits(i).cpu().numpy()                                    # 22 MB, blocking, every batch
        pred = z.argmax(1).ravel()
        st["conf"] += np.bincount(ys_np[i % pool] * k + pred, minlength=k * k).reshape(k, k)

    def after():
        i = st["i"] = st["i"] + 1
        with torch.no_grad():
            pred = logits(i).argmax(1).view(-1)
            # scatter_add_ into the fixed-size matrix: torch.bincount would size its output with a sync.
            idx = ys[i % pool].view(-1) * k + pred
            conf.scatter_add_(0, idx, torch.ones_like(idx))
        if i % EPOCH == 0:                                             # end of the eval pass
            st["conf"] += conf.view(k, k).cpu().numpy()
            conf.zero_()
    return Step(before if variant == "before" else after, info={"batch": n, "pixels": hw * hw, "classes": k})
