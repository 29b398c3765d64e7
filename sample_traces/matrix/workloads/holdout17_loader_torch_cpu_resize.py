"""holdout17_loader_torch_cpu_resize: per-sample torch CPU ops (antialiased resize, normalise) in
DataLoader(num_workers=0) -> 4 / 8 workers.

Seventeenth held-out set (see holdout17_loader_text_python), added after the first two were recorded and the
hand-off model replaced the serial share (pre-registered before it was recorded): the transform is torch on
CPU tensors (F.interpolate with antialias from 3 x 256 x 256 to 3 x 160 x 160, a per-channel normalisation),
as torchvision's tensor transforms do. In the loop's process those ops use every intra-op thread; in a
DataLoader worker torch runs them on one: what the trace shows of the loading is not what a worker pays.
Batch 32 (9.8 MB of float32), a small bf16 conv net, fused SGD.
before: DataLoader(num_workers=0): the transform runs in the training loop's process.
after:  DataLoader(num_workers=4, persistent_workers=True, pin_memory=True, prefetch_factor=4).
after_8_workers: the same with num_workers=8.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._util import Step, autocast, is_cuda

NAME = "holdout17_loader_torch_cpu_resize"
EXPECTED_KIND = "host_bound"
ROLE = "pair"
VARIANTS = ("before", "after", "after_8_workers")
FIX = "DataLoader(num_workers=4, persistent_workers=True, pin_memory=True, prefetch_factor=4)"
DESCRIPTION = {
    "before": ("torch CPU ops per sample (antialiased bilinear resize 256->160, normalisation), num_workers=0, "
               "batch 32, small bf16 conv net, fused SGD"),
    "after": "same transform in DataLoader(num_workers=4, persistent_workers=True, pin_memory=True, prefetch_factor=4)",
    "after_8_workers": "the same with num_workers=8",
}
WARMUP_STEPS = 12


class Images(torch.utils.data.Dataset):
    def __init__(self, n=256, hw=256, out=160):
        g = torch.Generator().manual_seed(0)
        self.bank = torch.randint(0, 255, (n, 3, hw, hw), dtype=torch.uint8, generator=g)
        self.out = out
        self.mean = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
        self.std = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)

    def __len__(self):
        return 1_000_000

    def __getitem__(self, i):
        img = self.bank[i % len(self.bank)].float().div_(255.0)
        img = F.interpolate(img[None], size=(self.out, self.out), mode="bilinear", antialias=True,
                            align_corners=False)[0]
        return (img - self.mean) / self.std, int(i % 10)


def make(variant, device):
    cuda = is_cuda(device)
    torch.manual_seed(0)
    c = 32 if cuda else 4
    model = nn.Sequential(nn.Conv2d(3, c, 3, stride=2, padding=1), nn.ReLU(),
                          nn.Conv2d(c, 2 * c, 3, stride=2, padding=1), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2 * c, 10)).to(device)
    model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, fused=True if cuda else None)
    workers = {"after": 4, "after_8_workers": 8}.get(variant, 0) if cuda else (1 if variant != "before" else 0)
    kw = dict(num_workers=workers, persistent_workers=True, pin_memory=cuda, prefetch_factor=4) if workers else {}
    data = Images() if cuda else Images(8, 32, 16)
    loader = torch.utils.data.DataLoader(data, batch_size=32 if cuda else 2, shuffle=False, **kw)
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
