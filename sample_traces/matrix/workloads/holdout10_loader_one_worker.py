"""holdout10_loader_one_worker: a DataLoader with one worker that cannot keep up -> 8 workers.

Tenth held-out set (the loader finding had only num_workers=0 pairs: there the transform runs on the
training thread; here it runs in a worker process and the training thread waits in the DataLoader's
__next__). Per sample: a uint8 3x128x128 image is cropped to 112x112 at random, flipped, blurred
(3x3 box, in numpy), jittered and normalised; batches of 32 train a small conv net (bf16,
channels_last, fused SGD) whose GPU step is a few ms.
before: DataLoader(num_workers=1, persistent_workers=True, pin_memory=True), non_blocking copies.
after:  the same with num_workers=8.
"""

import numpy as np
import torch
import torch.nn as nn

from ._util import Step, autocast, is_cuda

NAME = "holdout10_loader_one_worker"
EXPECTED_KIND = "host_bound"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "DataLoader(num_workers=8) instead of num_workers=1 (the one worker is the bottleneck)"
DESCRIPTION = {
    "before": ("numpy crop/flip/3x3 blur/jitter/normalize of 3x128x128 uint8 per sample in 1 DataLoader worker, "
               "batch 32, small conv net, bf16, channels_last, fused SGD"),
    "after": "same, 8 workers",
}
WARMUP_STEPS = 12


class Images(torch.utils.data.Dataset):
    """A long virtual dataset over a small bank of images, so no epoch ends while steps are timed."""

    def __init__(self, bank=256, hw=128, length=1_000_000):
        rng = np.random.default_rng(0)
        self.bank = rng.integers(0, 255, size=(bank, 3, hw, hw), dtype=np.uint8)
        self.length = length

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        rng = np.random.default_rng(i)
        img = self.bank[i % len(self.bank)].astype(np.float32) / 255.0
        y0, x0 = rng.integers(0, 16, size=2)
        img = img[:, y0:y0 + 112, x0:x0 + 112]
        if rng.random() < 0.5:
            img = img[:, :, ::-1]
        pad = np.pad(img, ((0, 0), (1, 1), (1, 1)), mode="edge")
        img = sum(pad[:, dy:dy + 112, dx:dx + 112] for dy in range(3) for dx in range(3)) / 9.0
        img = img * rng.uniform(0.8, 1.2) + rng.uniform(-0.1, 0.1)
        img = (img - img.mean(axis=(1, 2), keepdims=True)) / (img.std(axis=(1, 2), keepdims=True) + 1e-5)
        return torch.from_numpy(np.ascontiguousarray(img, dtype=np.float32)), int(i % 10)


def make(variant, device):
    cuda = is_cuda(device)
    torch.manual_seed(0)
    c = 64 if cuda else 4
    model = nn.Sequential(nn.Conv2d(3, c, 3, stride=2, padding=1), nn.BatchNorm2d(c), nn.ReLU(),
                          nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU(),
                          nn.Conv2d(c, 2 * c, 3, stride=2, padding=1), nn.BatchNorm2d(2 * c), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2 * c, 10)).to(device)
    model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, fused=True if cuda else None)
    data = Images(256 if cuda else 8, 128 if cuda else 24)
    if not cuda:
        data.__class__ = _Small
    workers = 8 if variant == "after" else 1
    loader = torch.utils.data.DataLoader(data, batch_size=32 if cuda else 2, shuffle=False, num_workers=workers,
                                         persistent_workers=True, pin_memory=cuda)
    st = {"it": iter(loader)}

    def step():
        x, y = next(st["it"])
        x = x.to(device, non_blocking=True).contiguous(memory_format=torch.channels_last)
        y = y.to(device, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            out = model(x)
        nn.functional.cross_entropy(out.float(), y).backward()
        opt.step()
    return Step(step, close=lambda: st.clear(), info={"num_workers": workers})


class _Small(Images):
    """CPU smoke test only: 24x24 images cropped to 16x16."""

    def __getitem__(self, i):
        img = self.bank[i % len(self.bank)].astype(np.float32)[:, :16, :16] / 255.0
        return torch.from_numpy(np.ascontiguousarray(img)), int(i % 10)
