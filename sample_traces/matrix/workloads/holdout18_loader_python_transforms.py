"""holdout18_loader_python_transforms: per-element Python transform functions in DataLoader(num_workers=0) -> 4 workers.

Eighteenth held-out set (see holdout18_loader_json_records; pre-registered before it was recorded): loading
whose Python time is mostly Python frames, not C built-ins: a sample of 192 values goes through a chain of
small transform objects (__call__) that call small helper functions per value (clip, scale, a piecewise
curve), as hand-written augmentation code often does. A bf16 MLP classifier trains on batches of 128
(128 x 192 fp32: 96 KB a batch), fused AdamW.
before: DataLoader(num_workers=0): the transforms run on the training loop's thread.
after:  DataLoader(num_workers=4, persistent_workers=True, pin_memory=True, prefetch_factor=4).
"""

import torch
import torch.nn as nn

from ._util import Step, autocast, is_cuda

NAME = "holdout18_loader_python_transforms"
EXPECTED_KIND = "host_bound"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "DataLoader(num_workers=4, persistent_workers=True, pin_memory=True, prefetch_factor=4)"
DESCRIPTION = {
    "before": ("192 values per sample through three Python transform objects calling per-value helper "
               "functions, num_workers=0, batch 128, bf16 MLP classifier, fused AdamW"),
    "after": "same transforms in DataLoader(num_workers=4, persistent_workers=True, pin_memory=True, prefetch_factor=4)",
}
WARMUP_STEPS = 12
N = 192


def clip(v, lo, hi):
    return lo if v < lo else hi if v > hi else v


def curve(v):
    return v * 0.5 if v < 0.25 else 0.125 + (v - 0.25) * 1.5 if v < 0.75 else 0.875 + (v - 0.75) * 0.5


class Scale:
    def __init__(self, a, b):
        self.a, self.b = a, b

    def __call__(self, xs):
        out = []
        for v in xs:
            out.append(self.scale(v))
        return out

    def scale(self, v):
        return v * self.a + self.b


class Clip:
    def __call__(self, xs):
        out = []
        for v in xs:
            out.append(clip(v, 0.0, 1.0))
        return out


class Curve:
    def __call__(self, xs):
        out = []
        for v in xs:
            out.append(curve(v))
        return out


class Values(torch.utils.data.Dataset):
    def __init__(self):
        self.chain = (Scale(1 / 997, 0.01), Clip(), Curve())

    def __len__(self):
        return 1_000_000

    def __getitem__(self, i):
        xs = [float((i * 131 + k * 71) % 1009) for k in range(N)]
        for t in self.chain:
            xs = t(xs)
        return torch.tensor(xs, dtype=torch.float32), int(i % 10)


def make(variant, device):
    cuda = is_cuda(device)
    torch.manual_seed(0)
    d = 1024 if cuda else 16
    model = nn.Sequential(nn.Linear(N, d), nn.GELU(), nn.Linear(d, d), nn.GELU(), nn.Linear(d, 10)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True if cuda else None)
    workers = (4 if variant == "after" else 0) if cuda else (1 if variant != "before" else 0)
    kw = dict(num_workers=workers, persistent_workers=True, pin_memory=cuda, prefetch_factor=4) if workers else {}
    loader = torch.utils.data.DataLoader(Values(), batch_size=128 if cuda else 2, shuffle=False, **kw)
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
