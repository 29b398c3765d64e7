"""holdout4_numpy_dataset_workers0: per-sample numpy augmentation in a DataLoader with num_workers=0 -> 4 workers.

Fourth held-out set: a Dataset that decodes a uint8 image (3x96x96), random-crops to 80x80, flips,
jitters and normalizes it in numpy per sample; a small conv net trains on batches of 64 (bf16,
channels_last, fused SGD).
before: DataLoader(num_workers=0): the augmentation runs on the training loop's thread.
after:  DataLoader(num_workers=4, persistent_workers=True, pin_memory=True, prefetch_factor=4),
        non_blocking copies.
after_12_workers: the same with num_workers=12 (added 2026-11-26, h100_clean6: the tool's estimate assumes
        workers that keep up, and 4 ran 1.0-2.6x slower per batch than the loop did: 4 did not).
"""

import numpy as np
import torch
import torch.nn as nn

from ._util import Step, autocast, is_cuda

NAME = "holdout4_numpy_dataset_workers0"
EXPECTED_KIND = "host_bound"
ROLE = "pair"
VARIANTS = ("before", "after", "after_12_workers")
FIX = "DataLoader(num_workers=4, persistent_workers=True, pin_memory=True, prefetch_factor=4)"
DESCRIPTION = {
    "before": "numpy crop/flip/jitter/normalize of 3x96x96 uint8 per sample, num_workers=0, batch 64, conv net",
    "after": "same dataset in 4 workers, pinned batches, non_blocking copies",
    "after_12_workers": "same dataset in 12 workers, pinned batches, non_blocking copies",
}
WARMUP_STEPS = 10


class Images(torch.utils.data.Dataset):
    def __init__(self, n=1024, hw=96):
        rng = np.random.default_rng(0)
        self.bank = rng.integers(0, 255, size=(n, 3, hw, hw), dtype=np.uint8)

    def __len__(self):
        return len(self.bank)

    def __getitem__(self, i):
        rng = np.random.default_rng(i)
        img = self.bank[i].astype(np.float32) / 255.0
        y0, x0 = rng.integers(0, 16, size=2)
        img = img[:, y0:y0 + 80, x0:x0 + 80]
        if rng.random() < 0.5:
            img = img[:, :, ::-1]
        img = img * rng.uniform(0.8, 1.2) + rng.uniform(-0.1, 0.1)
        img = (img - img.mean(axis=(1, 2), keepdims=True)) / (img.std(axis=(1, 2), keepdims=True) + 1e-5)
        return torch.from_numpy(np.ascontiguousarray(img)), int(i % 10)


def make(variant, device):
    cuda = is_cuda(device)
    torch.manual_seed(0)
    c = 32 if cuda else 4
    model = nn.Sequential(nn.Conv2d(3, c, 3, stride=2, padding=1), nn.ReLU(),
                          nn.Conv2d(c, 2 * c, 3, stride=2, padding=1), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2 * c, 10)).to(device)
    model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, fused=True if cuda else None)
    data = Images(1024 if cuda else 64)
    workers = {"after": 4, "after_12_workers": 12 if cuda else 1}.get(variant, 0)
    kw = dict(num_workers=workers, persistent_workers=True, pin_memory=cuda, prefetch_factor=4) if workers else {}
    loader = torch.utils.data.DataLoader(data, batch_size=64 if cuda else 4, shuffle=False, drop_last=True, **kw)
    st = {"it": iter(loader)}

    def step():
        try:
            x, y = next(st["it"])
        except StopIteration:
            st["it"] = iter(loader)
            x, y = next(st["it"])
        x = x.to(device, non_blocking=True).contiguous(memory_format=torch.channels_last)
        y = y.to(device, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            out = model(x)
        nn.functional.cross_entropy(out.float(), y).backward()
        opt.step()
    return Step(step, close=lambda: st.clear(), info={"num_workers": workers})
