"""Host-bound input pipeline: CPU augmentation on the training process's main thread.

before: DataLoader(num_workers=0): every sample's numpy augmentation (random crop,
        flip, normalisation, a few blur passes, colour jitter) runs inside
        ``_SingleProcessDataLoaderIter.__next__`` on the main thread, ~10-20 ms per batch,
        while the GPU step itself takes a few ms -> the GPU idles most of the step.
after:  the same dataset and per-sample work in DataLoader(num_workers=4,
        persistent_workers=True, pin_memory=True), batches copied with non_blocking=True.
"""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

from .common import Step, is_cuda

NAME = "host_preprocess"
EXPECTED_KIND = "host_bound"
WITH_STACK = False
VARIANTS = ("before", "after")
FIX = "move the per-sample CPU work into DataLoader worker processes (num_workers=4, persistent, pin_memory)"
DESCRIPTION = {
    "before": ("DataLoader(num_workers=0), batch 32, per-sample numpy augmentation (crop/flip/normalise/blur/jitter "
               "of a 3x128x128 image -> 3x112x112 fp16) on the main thread; small conv net step (bf16, channels_last)"),
    "after": "same dataset / per-sample work with DataLoader(num_workers=4, persistent_workers=True, pin_memory=True)",
}

WARMUP_STEPS = 10
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32).reshape(3, 1, 1)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32).reshape(3, 1, 1)


class AugmentDataset(Dataset):
    """Synthetic images; __getitem__ does realistic-ish CPU augmentation in numpy."""

    def __init__(self, n=1_000_000, src=128, out=112, blur_passes=4, classes=100):
        self.n, self.src, self.out, self.blur_passes, self.classes = n, src, out, blur_passes, classes
        rng = np.random.default_rng(0)
        self.bank = rng.integers(0, 256, size=(16, 3, src, src), dtype=np.uint8)

    def __len__(self):
        return self.n

    def __getitem__(self, idx):
        rng = np.random.default_rng(idx)
        img = self.bank[idx % len(self.bank)].astype(np.float32) / 255.0
        oy, ox = rng.integers(0, self.src - self.out + 1, size=2)
        img = img[:, oy:oy + self.out, ox:ox + self.out]
        if rng.random() < 0.5:
            img = img[:, :, ::-1]
        img = np.ascontiguousarray(img)
        for _ in range(self.blur_passes):                       # separable [1 2 1]/4 blur
            img[:, 1:-1, :] = 0.25 * img[:, :-2, :] + 0.5 * img[:, 1:-1, :] + 0.25 * img[:, 2:, :]
            img[:, :, 1:-1] = 0.25 * img[:, :, :-2] + 0.5 * img[:, :, 1:-1] + 0.25 * img[:, :, 2:]
        b, c, s = rng.uniform(0.8, 1.2, size=3).astype(np.float32)
        gray = img.mean(axis=0, keepdims=True)
        img = (img * b - gray) * c + gray                        # brightness / contrast
        img = gray + (img - gray) * s                            # saturation
        img = np.clip(img, 0.0, 1.0)
        img = (img - MEAN) / STD
        return torch.from_numpy(img.astype(np.float16)), int(idx % self.classes)


def small_convnet(classes=100):
    def block(cin, cout, stride):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))
    return nn.Sequential(block(3, 32, 2), block(32, 64, 1), block(64, 64, 2), block(64, 128, 1),
                         block(128, 128, 2), block(128, 256, 2), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(256, classes))


def make(variant, device, batch=32):
    cuda = is_cuda(device)
    torch.manual_seed(0)
    ds = AugmentDataset() if cuda else AugmentDataset(src=40, out=32, blur_passes=2)
    if variant == "before":
        dl = DataLoader(ds, batch_size=batch, shuffle=False, num_workers=0)
    else:
        dl = DataLoader(ds, batch_size=batch, shuffle=False, num_workers=4, persistent_workers=True,
                        pin_memory=cuda, prefetch_factor=4)
    model = small_convnet().to(device).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, fused=cuda or None)
    it = iter(dl)
    nb = variant != "before"

    def step():
        x, y = next(it)
        x = x.to(device, non_blocking=nb).to(memory_format=torch.channels_last)
        y = y.to(device, non_blocking=nb)
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    def close():
        nonlocal it
        it._shutdown_workers() if hasattr(it, "_shutdown_workers") else None
        it = None

    return Step(step, close=close, info={"batch": batch, "num_workers": dl.num_workers,
                                         "pin_memory": dl.pin_memory, "blur_passes": ds.blur_passes})
