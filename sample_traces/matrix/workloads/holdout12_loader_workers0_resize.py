"""holdout12_loader_workers0_resize: per-sample numpy resizing in DataLoader(num_workers=0) -> 8 workers.

Twelfth held-out set (written after the host_bound fix said how many workers keep up): a different
transform (a nearest-neighbour resize by index arrays and a per-channel normalisation of a uint8
3 x 160 x 160 image to 3 x 112 x 112) feeding a small bf16 conv net, batch 48.
before: DataLoader(num_workers=0): the transform runs on the training loop's thread.
after:  DataLoader(num_workers=8, persistent_workers=True, pin_memory=True, prefetch_factor=4),
        non_blocking copies.
after_12_workers: the same with num_workers=12 (added 2026-11-26, h100_clean6: the tool's estimate assumes
        workers that keep up, and 8 ran 1.0-2.6x slower per batch than the loop did: 8 did not).
"""

import numpy as np
import torch
import torch.nn as nn

from ._util import Step, autocast, is_cuda

NAME = "holdout12_loader_workers0_resize"
EXPECTED_KIND = "host_bound"
ROLE = "pair"
VARIANTS = ("before", "after", "after_12_workers")
FIX = "DataLoader(num_workers=8, persistent_workers=True, pin_memory=True, prefetch_factor=4)"
DESCRIPTION = {
    "before": ("numpy nearest-neighbour resize 160->112 and per-channel normalisation of a uint8 image per "
               "sample, num_workers=0, batch 48, small bf16 conv net, fused AdamW"),
    "after": "same transform in DataLoader(num_workers=8, persistent_workers=True, pin_memory=True, prefetch_factor=4)",
    "after_12_workers": "the same with num_workers=12",
}
WARMUP_STEPS = 12


class Resized(torch.utils.data.Dataset):
    def __init__(self, n=512, hw=160, out=112):
        rng = np.random.default_rng(0)
        self.bank = rng.integers(0, 255, size=(n, 3, hw, hw), dtype=np.uint8)
        self.idx = (np.arange(out) * hw / out).astype(np.int64)
        self.mean = np.array([0.485, 0.456, 0.406], dtype=np.float32)[:, None, None]
        self.std = np.array([0.229, 0.224, 0.225], dtype=np.float32)[:, None, None]

    def __len__(self):
        return 1_000_000

    def __getitem__(self, i):
        img = self.bank[i % len(self.bank)][:, self.idx][:, :, self.idx].astype(np.float32) / 255.0
        img = (img - self.mean) / self.std
        return torch.from_numpy(np.ascontiguousarray(img)), int(i % 10)


def make(variant, device):
    cuda = is_cuda(device)
    torch.manual_seed(0)
    c = 32 if cuda else 4
    model = nn.Sequential(nn.Conv2d(3, c, 3, stride=2, padding=1), nn.ReLU(),
                          nn.Conv2d(c, 2 * c, 3, stride=2, padding=1), nn.ReLU(),
                          nn.Conv2d(2 * c, 2 * c, 3, stride=2, padding=1), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2 * c, 10)).to(device)
    model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True if cuda else None)
    data = Resized(512 if cuda else 8, 160 if cuda else 24, 112 if cuda else 16)
    workers = {"after": 8, "after_12_workers": 12}.get(variant, 0) if cuda else (1 if variant != "before" else 0)
    kw = dict(num_workers=workers, persistent_workers=True, pin_memory=cuda, prefetch_factor=4) if workers else {}
    loader = torch.utils.data.DataLoader(data, batch_size=48 if cuda else 2, shuffle=False, **kw)
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
