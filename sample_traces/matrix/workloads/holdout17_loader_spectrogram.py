"""holdout17_loader_spectrogram: per-sample numpy STFT in DataLoader(num_workers=0) -> 4 / 2 workers.

Seventeenth held-out set (see holdout17_loader_text_python; pre-registered before it was recorded): a
1-D signal per sample (a chirp plus noise, 16,000 float32 samples) framed into 98 windows of 400 with a
Hann window, np.fft.rfft, log-magnitude and per-frequency normalisation (1 x 201 x 98 float32: 79 KB a
sample, 2.5 MB a batch of 32); a small bf16 conv net trains on it, fused SGD.
before: DataLoader(num_workers=0): the STFT runs on the training loop's thread.
after:  DataLoader(num_workers=4, persistent_workers=True, pin_memory=True, prefetch_factor=4).
after_2_workers: the same with num_workers=2.
"""

import numpy as np
import torch
import torch.nn as nn

from ._util import Step, autocast, is_cuda

NAME = "holdout17_loader_spectrogram"
EXPECTED_KIND = "host_bound"
ROLE = "pair"
VARIANTS = ("before", "after", "after_2_workers")
FIX = "DataLoader(num_workers=4, persistent_workers=True, pin_memory=True, prefetch_factor=4)"
DESCRIPTION = {
    "before": ("numpy STFT (98 Hann windows of 400, rfft, log-magnitude, normalisation) of a 16k-sample "
               "signal per sample, num_workers=0, batch 32, small bf16 conv net, fused SGD"),
    "after": "same STFT in DataLoader(num_workers=4, persistent_workers=True, pin_memory=True, prefetch_factor=4)",
    "after_2_workers": "the same with num_workers=2",
}
WARMUP_STEPS = 12


class Signals(torch.utils.data.Dataset):
    def __init__(self, n=16000, win=400, hop=160):
        self.n, self.win, self.hop = n, win, hop
        self.window = np.hanning(win).astype(np.float32)
        self.t = np.arange(n, dtype=np.float32) / n

    def __len__(self):
        return 1_000_000

    def __getitem__(self, i):
        rng = np.random.default_rng(i)
        f0 = 100.0 + (i % 50) * 20.0
        x = np.sin(2 * np.pi * (f0 + 400.0 * self.t) * self.t * 50).astype(np.float32)
        x += 0.1 * rng.standard_normal(self.n).astype(np.float32)
        frames = np.lib.stride_tricks.sliding_window_view(x, self.win)[::self.hop][:98] * self.window
        spec = np.log1p(np.abs(np.fft.rfft(frames, axis=1))).T.astype(np.float32)
        spec = (spec - spec.mean(axis=1, keepdims=True)) / (spec.std(axis=1, keepdims=True) + 1e-5)
        return torch.from_numpy(np.ascontiguousarray(spec[None])), int(i % 8)


def make(variant, device):
    cuda = is_cuda(device)
    torch.manual_seed(0)
    c = 32 if cuda else 4
    model = nn.Sequential(nn.Conv2d(1, c, 3, stride=2, padding=1), nn.ReLU(),
                          nn.Conv2d(c, 2 * c, 3, stride=2, padding=1), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2 * c, 8)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, fused=True if cuda else None)
    workers = {"after": 4, "after_2_workers": 2}.get(variant, 0) if cuda else (1 if variant != "before" else 0)
    kw = dict(num_workers=workers, persistent_workers=True, pin_memory=cuda, prefetch_factor=4) if workers else {}
    loader = torch.utils.data.DataLoader(Signals(), batch_size=32 if cuda else 2, shuffle=False, **kw)
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
