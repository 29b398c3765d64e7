"""holdout11_healthy_fed_convnet: a GPU-bound conv net fed by a DataLoader that keeps up: healthy.

Eleventh held-out set, a trap for the loader rules: the training loop calls a multi-process DataLoader's
__next__ every step, but eight workers with a light transform (a random flip of a uint8 3 x 64 x 64
image, converted to float) have the batch ready, so the GPU stays busy. The tool must call it healthy
(judged, as every healthy row, by the measured un-profiled idle). The healthy_convnet model (basic
blocks 64/128 ch) at batch 192, 64 x 64, bf16, channels_last, fused SGD(momentum).
"""

import numpy as np
import torch
import torch.nn.functional as F

from workloads.layout_nchw_fp16 import make_model

from ._util import Step, autocast, is_cuda

NAME = "holdout11_healthy_fed_convnet"
EXPECTED_KIND = "healthy"
ROLE = "healthy"
VARIANTS = ("before",)
FIX = None
DESCRIPTION = {"before": ("ResNet-ish conv net (basic blocks 64/128 ch), batch 192, 64x64, bf16, channels_last, "
                          "fused SGD(momentum), fed by DataLoader(num_workers=8, pin_memory) with a random flip")}
WARMUP_STEPS = 12


class Flips(torch.utils.data.Dataset):
    def __init__(self, bank=256, hw=64, length=1_000_000):
        rng = np.random.default_rng(0)
        self.bank = rng.integers(0, 255, size=(bank, 3, hw, hw), dtype=np.uint8)
        self.length = length

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        img = self.bank[i % len(self.bank)]
        if i % 2:
            img = img[:, :, ::-1]
        return torch.from_numpy(np.ascontiguousarray(img, dtype=np.float32) / 255.0), int(i % 100)


def make(variant, device):
    cuda = is_cuda(device)
    batch, hw = (192, 64) if cuda else (2, 16)
    torch.manual_seed(0)
    model = make_model(64).to(device).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, fused=True if cuda else None)
    loader = torch.utils.data.DataLoader(Flips(256 if cuda else 4, hw), batch_size=batch, shuffle=False,
                                         num_workers=8 if cuda else 1, persistent_workers=True, pin_memory=cuda)
    st = {"it": iter(loader)}

    def step():
        x, y = next(st["it"])
        x = x.to(device, non_blocking=True).contiguous(memory_format=torch.channels_last)
        y = y.to(device, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            out = model(x)
        F.cross_entropy(out.float(), y).backward()
        opt.step()
    return Step(step, close=lambda: st.clear(), info={"batch": batch, "hw": hw, "num_workers": 8})
