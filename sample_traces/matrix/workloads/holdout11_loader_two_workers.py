"""holdout11_loader_two_workers: a DataLoader whose two workers cannot keep up -> 12 workers.

Eleventh held-out set (written after a loop waiting for DataLoader workers kept its profiled step as the
un-profiled estimate): a different transform, model and worker count than holdout10_loader_one_worker.
Per sample: a float32 1 x 96 x 96 spectrogram-like array is time-masked and frequency-masked at random,
smoothed along time (a 5-tap moving average in numpy), log-compressed and standardised; batches of 64
train a small 1-D conv + MLP classifier (bf16, fused AdamW) whose GPU step is a few ms at most.
before: DataLoader(num_workers=2, persistent_workers=True, pin_memory=True), non_blocking copies.
after:  the same with num_workers=12.
"""

import numpy as np
import torch
import torch.nn as nn

from ._util import Step, autocast, is_cuda

NAME = "holdout11_loader_two_workers"
EXPECTED_KIND = "host_bound"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "DataLoader(num_workers=12) instead of num_workers=2 (the two workers are the bottleneck)"
DESCRIPTION = {
    "before": ("numpy time/frequency masking, 5-tap smoothing, log and standardisation of 96x96 float32 per sample "
               "in 2 DataLoader workers, batch 64, 1-D conv + MLP, bf16, fused AdamW"),
    "after": "same, 12 workers",
}
WARMUP_STEPS = 12


class Spectra(torch.utils.data.Dataset):
    """A long virtual dataset over a small bank, so no epoch ends while steps are timed."""

    def __init__(self, bank=128, f=96, t=96, length=1_000_000):
        rng = np.random.default_rng(0)
        self.bank = rng.random((bank, f, t), dtype=np.float32) * 10.0
        self.length = length

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        rng = np.random.default_rng(i)
        x = self.bank[i % len(self.bank)].copy()
        f, t = x.shape
        for _ in range(2):
            t0 = rng.integers(0, t - 12)
            x[:, t0:t0 + rng.integers(1, 12)] = 0.0
            f0 = rng.integers(0, f - 8)
            x[f0:f0 + rng.integers(1, 8), :] = 0.0
        pad = np.pad(x, ((0, 0), (2, 2)), mode="edge")
        x = sum(pad[:, k:k + t] for k in range(5)) / 5.0
        x = np.log1p(x)
        x = (x - x.mean()) / (x.std() + 1e-5)
        return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)), int(i % 12)


def make(variant, device):
    cuda = is_cuda(device)
    torch.manual_seed(0)
    f, c = (96, 128) if cuda else (12, 4)
    model = nn.Sequential(nn.Conv1d(f, c, 5, padding=2), nn.GELU(), nn.Conv1d(c, c, 5, stride=2, padding=2), nn.GELU(),
                          nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(c, c), nn.GELU(), nn.Linear(c, 12)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True if cuda else None)
    data = Spectra(128, f, 96) if cuda else Spectra(4, f, 16)
    workers = 12 if variant == "after" else 2
    loader = torch.utils.data.DataLoader(data, batch_size=64 if cuda else 2, shuffle=False, num_workers=workers,
                                         persistent_workers=True, pin_memory=cuda)
    st = {"it": iter(loader)}

    def step():
        x, y = next(st["it"])
        x = x.to(device, non_blocking=True)
        y = y.to(device, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            out = model(x)
        nn.functional.cross_entropy(out.float(), y).backward()
        opt.step()
    return Step(step, close=lambda: st.clear(), info={"num_workers": workers})
