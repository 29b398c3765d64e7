"""holdout15_confusion_cpu_torch: an eval loop scoring a confusion matrix with torch ops on CPU tensors -> on the GPU.

Fifteenth held-out set (written after the host's reading of a copy by torch ops was named and costed by
its op trees, a rise in step times had to hold, and moved kernels added their GPU time to the floor):
the segmentation eval of holdout11_seg_eval_numpy with torch on CPU tensors instead of numpy.
before: the same small conv net (21 classes, 16 x 96 x 96, bf16, channels_last, no_grad); per batch the
        logits go to the CPU (12 MB), argmax(1), torch.bincount of target * 21 + prediction into a 21 x 21
        confusion matrix, per-class IoU, all with torch ops on CPU tensors; the mean IoU read with float().
after:  argmax and a scatter_add_ confusion matrix on the GPU (bincount would size its output with a
        sync), accumulated; the matrix copied once per 64 batches.
"""

import torch
import torch.nn as nn

from ._util import Step, autocast, is_cuda

NAME = "holdout15_confusion_cpu_torch"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "argmax and a scatter_add_ confusion matrix on the GPU; one copy of the 21x21 matrix per 64 batches"
DESCRIPTION = {
    "before": ("segmentation eval: conv net, 21 classes, 16 x 96 x 96, bf16, channels_last, no_grad; per batch "
               "12 MB of logits to the CPU, argmax, bincount confusion matrix and IoU with torch on CPU tensors"),
    "after": "same model; argmax and a scatter_add_ confusion matrix on the GPU, one copy per 64 batches",
}
EPOCH = 64


def make(variant, device, pool=4):
    cuda = is_cuda(device)
    n, hw, c, k = (16, 96, 48, 21) if cuda else (1, 8, 4, 3)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU(),
                          nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU(),
                          nn.Conv2d(c, k, 1)).to(device).eval().to(memory_format=torch.channels_last)
    xs = [torch.randn(n, 3, hw, hw, device=device).contiguous(memory_format=torch.channels_last) for _ in range(pool)]
    ys = [torch.randint(0, k, (n, hw, hw), device=device) for _ in range(pool)]
    ys_cpu = [y.cpu().view(-1) for y in ys]
    st = {"i": 0, "miou": 0.0}
    conf = torch.zeros(k * k, dtype=torch.long, device=device)

    def logits(i):
        with torch.no_grad(), autocast(device):
            return model(xs[i % pool]).float()

    def before():
        i = st["i"] = st["i"] + 1
        z = logits(i).cpu()                                            # 12 MB, blocking, every batch
        pred = z.argmax(1).view(-1)
        m = torch.bincount(ys_cpu[i % pool] * k + pred, minlength=k * k).view(k, k)
        inter = m.diagonal().float()
        iou = inter / (m.sum(0) + m.sum(1) - m.diagonal()).clamp_min(1).float()
        st["miou"] += float(iou.mean())

    def after():
        i = st["i"] = st["i"] + 1
        with torch.no_grad():
            pred = logits(i).argmax(1).view(-1)
            idx = ys[i % pool].view(-1) * k + pred
            conf.scatter_add_(0, idx, torch.ones_like(idx))
        if i % EPOCH == 0:
            m = conf.view(k, k).cpu()
            st["miou"] += float((m.diagonal() / (m.sum(0) + m.sum(1) - m.diagonal()).clamp_min(1)).mean())
            conf.zero_()
    return Step(before if variant == "before" else after, info={"batch": n, "classes": k})
