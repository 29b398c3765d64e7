"""holdout38_patch_loader_host: a host-bound loader in front of an fp32 patch MLP -> more workers, TF32, both.

Thirty-eighth held-out set (pre-registered 2026-12-01 before it was recorded): two faults that hide each other.
The loader does per-sample numpy augmentation (crop, flip, uint8 -> float32, normalise, HWC -> CHW) in the
training loop's process (DataLoader num_workers=0, pinned batches); the model is a patch MLP (16 x 16 patches
embedded to d=1024, pre-LayerNorm residual MLP blocks 1024 -> 4096 -> 1024, mean-pooled, a 100-way head) trained
in fp32 with set_float32_matmul_precision("highest"), fused AdamW. The GPU idles while the CPU loads (the
step is the loader's), and every matmul runs without TF32. Which fix pays depends on which side is longer: TF32
alone should save ~nothing here, where the loader is the step; the workers fix should save the loader's time
until the fp32 GPU work is the step; both should save the most. holdout38_patch_loader_gpu is the same program
with more blocks, where the GPU is the step and the workers alone should save ~nothing.
Host: images 176 x 176 cropped to 160 x 160, batch 64 (100 patches an image), 1 block.
before:       num_workers=0, matmul precision "highest".
after:        DataLoader(num_workers=8, persistent_workers=True, pin_memory=True, prefetch_factor=4).
after_tf32:   num_workers=0 kept; set_float32_matmul_precision("high").
after_both:   8 workers and TF32 (the plan).
"""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ._util import Step, is_cuda

NAME = "holdout38_patch_loader_host"
EXPECTED_KIND = "host_bound"
ROLE = "pair"
VARIANTS = ("before", "after", "after_tf32", "after_both")
FIX = "DataLoader(num_workers=8, persistent_workers=True, pin_memory=True, prefetch_factor=4)"
SIZE = {"image": 160, "batch": 64, "d": 1024, "blocks": 1}
WARMUP_STEPS = 12


def describe(size):
    shape = (f"numpy crop/flip/normalise of {size['image'] + 16}px uint8 images to {size['image']}px, batch "
             f"{size['batch']}, fp32 patch MLP d={size['d']}, {size['blocks']} MLP block(s), fused AdamW")
    return {
        "before": f"{shape}; num_workers=0, matmul precision highest",
        "after": "same; DataLoader(num_workers=8, persistent_workers=True, pin_memory=True, prefetch_factor=4)",
        "after_tf32": 'same; num_workers=0, set_float32_matmul_precision("high") (TF32)',
        "after_both": "8 workers and TF32",
    }


DESCRIPTION = describe(SIZE)
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32) * 255
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32) * 255


class Images(torch.utils.data.Dataset):
    """Random-crop, flip and normalise a uint8 HWC image in numpy, as hand-written augmentation does."""

    def __init__(self, n, out):
        rng = np.random.default_rng(0)
        self.bank = rng.integers(0, 255, (n, out + 16, out + 16, 3), dtype=np.uint8)
        self.out = out

    def __len__(self):
        return 1_000_000

    def __getitem__(self, i):
        img = self.bank[i % len(self.bank)]
        y, x = (i * 7) % 16, (i * 13) % 16
        img = img[y:y + self.out, x:x + self.out]
        if i % 2:
            img = img[:, ::-1]
        img = (img.astype(np.float32) - MEAN) / STD
        return torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1))), int(i % 100)


class PatchMLP(nn.Module):
    def __init__(self, d, blocks, patch=16):
        super().__init__()
        self.patch = patch
        self.embed = nn.Linear(3 * patch * patch, d)
        self.blocks = nn.ModuleList(nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.GELU(),
                                                  nn.Linear(4 * d, d)) for _ in range(blocks))
        self.head = nn.Linear(d, 100)

    def forward(self, x):
        p = self.patch
        x = F.unfold(x, p, stride=p).transpose(1, 2)      # (batch, patches, 3 p p)
        x = self.embed(x)
        for blk in self.blocks:
            x = x + blk(x)
        return self.head(x.mean(1))


def build(variant, device, size):
    cuda = is_cuda(device)
    s = size if cuda else {"image": 32, "batch": 2, "d": 16, "blocks": 1}
    prev = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high" if variant in ("after_tf32", "after_both") else "highest")
    torch.manual_seed(0)
    model = PatchMLP(s["d"], s["blocks"]).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    workers = (8 if variant in ("after", "after_both") else 0) if cuda else (1 if variant in ("after", "after_both") else 0)
    kw = dict(num_workers=workers, persistent_workers=True, prefetch_factor=4) if workers else {}
    loader = torch.utils.data.DataLoader(Images(64 if cuda else 4, s["image"]), batch_size=s["batch"],
                                         shuffle=False, pin_memory=cuda, **kw)
    st = {"it": iter(loader)}

    def step():
        x, y = next(st["it"])
        x = x.to(device, non_blocking=True)
        y = y.to(device, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()

    def close():
        st.clear()
        torch.set_float32_matmul_precision(prev)
    return Step(step, close=close, info={"num_workers": workers, **s,
                                         "matmul_precision": torch.get_float32_matmul_precision()})


def make(variant, device):
    return build(variant, device, SIZE)
