"""holdout47_aug_loop_train: a conv net trained on CIFAR-sized images augmented on the GPU one image at a time
(random crop from a 4-pixel padding, random horizontal flip, normalisation: per-sample transforms written as a Python
loop over the batch, the offsets and coins from Python's random), -> the same augmentation done on the whole batch
(offsets and coins drawn on the GPU, the crop and flip as two gathers, one normalisation).

Forty-seventh held-out set (registered before it was recorded; see the matrix README). Model: the ResNet-ish net of
sample_traces/workloads/layout_nchw_fp16.py (basic blocks, 64/128 channels), channels_last, bf16 autocast,
SGD(momentum, fused); batch 128 of 3 x 32 x 32 uint8 images already on the GPU (two batches in turn), 100 classes.
before: for each image: a crop slice at Python-random offsets, img.flip(2) on a coin, (img.float() / 255 - mean) / std;
        torch.stack (about 9 ops and 4-5 kernels an image, no sync).
after:  the same transforms on the batch: offsets and coins from torch.randint on the GPU, the crop and flip as two
        torch.gather, one normalisation (about 20 ops, no sync).
"""

import random

import torch
import torch.nn.functional as F

from workloads.layout_nchw_fp16 import make_model

from ._util import Step, autocast, is_cuda

NAME = "holdout47_aug_loop_train"
EXPECTED_KIND = "launch_overhead"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = ("the random crop, flip and normalisation done on the whole batch (offsets and coins from torch.randint, two "
       "torch.gather) instead of a Python loop over the batch's images")
SIZE = {"batch": 128, "hw": 32, "pad": 4, "classes": 100, "ch": 64}
DESCRIPTION = {
    "before": ("ResNet-ish conv net (64/128 ch), batch 128 of 3 x 32 x 32, bf16 autocast, channels_last, fused "
               "SGD; GPU augmentation (random crop, flip, normalise) in a Python loop over the batch's images"),
    "after": "same, the augmentation done on the whole batch (two gathers, one normalisation)",
}
MEAN = (0.49, 0.48, 0.45)
STD = (0.25, 0.24, 0.26)


def sizes(device, size=SIZE):
    return size if is_cuda(device) else {**size, "batch": 4, "hw": 16, "ch": 8}


def stats(device):
    return (torch.tensor(MEAN, device=device).view(3, 1, 1), torch.tensor(STD, device=device).view(3, 1, 1))


def augment_loop(padded, hw, pad, mean, std, rng):
    """Per image, as torchvision-style per-sample transforms are written: Python-random offsets and coin."""
    out = []
    for i in range(padded.shape[0]):
        dy, dx = rng.randint(0, 2 * pad), rng.randint(0, 2 * pad)
        img = padded[i, :, dy:dy + hw, dx:dx + hw]
        if rng.random() < 0.5:
            img = img.flip(2)
        out.append((img.float() / 255 - mean) / std)
    return torch.stack(out)


def augment_batch(padded, hw, pad, mean, std, gen):
    """The same on the whole batch: each image's rows and (possibly flipped) columns gathered at once."""
    b, c = padded.shape[:2]
    dev = padded.device
    dy = torch.randint(0, 2 * pad + 1, (b,), device=dev, generator=gen)
    dx = torch.randint(0, 2 * pad + 1, (b,), device=dev, generator=gen)
    flip = torch.randint(0, 2, (b,), device=dev, generator=gen).bool()
    ar = torch.arange(hw, device=dev)
    rows = (dy[:, None] + ar)[:, None, :, None].expand(b, c, hw, padded.shape[3])
    cols = torch.where(flip[:, None], dx[:, None] + hw - 1 - ar, dx[:, None] + ar)
    img = padded.gather(2, rows).gather(3, cols[:, None, None, :].expand(b, c, hw, hw))
    return (img.float() / 255 - mean) / std


def make(variant, device, size=SIZE):
    s = sizes(device, size)
    cuda = is_cuda(device)
    torch.manual_seed(0)
    model = make_model(s["ch"]).to(device).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, fused=True if cuda else None)
    g = torch.Generator().manual_seed(1)
    hw, pad = s["hw"], s["pad"]
    raw = [torch.randint(0, 256, (s["batch"], 3, hw, hw), generator=g, dtype=torch.uint8).to(device)
           for _ in range(2)]
    ys = [torch.randint(0, s["classes"], (s["batch"],), generator=g).to(device) for _ in range(2)]
    mean, std = stats(device)
    rng, gen = random.Random(2), torch.Generator(device=device).manual_seed(2)
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        padded = F.pad(raw[i % 2], (pad, pad, pad, pad))
        if variant == "before":
            x = augment_loop(padded, hw, pad, mean, std, rng)
        else:
            x = augment_batch(padded, hw, pad, mean, std, gen)
        x = x.contiguous(memory_format=torch.channels_last)
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            out = model(x)
        F.cross_entropy(out.float(), ys[i % 2]).backward()
        opt.step()
    return Step(step, info={"batch": s["batch"], "hw": hw, "augment": "loop" if variant == "before" else "batch"})
