"""host_preprocess: numpy preprocessing of each batch on the main thread (no DataLoader).

before: each step takes 32 uint8 images (3x128x128) from a host bank and, in numpy on the
        main thread, converts to float, crops 112x112, flips half of them, runs 3 separable
        blur passes, jitters brightness and normalises; then torch.from_numpy(...).to(device)
        (pageable H2D) and a small conv-net training step (bf16, channels_last).
after:  the uint8 bank is uploaded to the GPU once; the same preprocessing runs as torch ops
        on the GPU.  Same crops / flips / jitter values per step index.
"""

import numpy as np
import torch
import torch.nn.functional as F

from workloads.host_preprocess import MEAN, STD, small_convnet

from ._util import Step, autocast, is_cuda

NAME = "host_preprocess"
EXPECTED_KIND = "host_bound"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "do the preprocessing on the GPU (uint8 bank uploaded once, torch ops on device)"
DESCRIPTION = {
    "before": ("batch 32 of uint8 3x128x128 -> numpy float/crop 112/flip/3 blur passes/jitter/normalise on the main "
               "thread, pageable .to(device), small conv net training step (bf16 autocast, channels_last)"),
    "after": "same preprocessing as torch ops on the GPU from a uint8 bank uploaded once",
}
WARMUP_STEPS = 5


def _params(i, batch, src, out):
    """Deterministic per-step augmentation parameters (cheap, host side)."""
    rng = np.random.default_rng(i % 64)
    oy, ox = rng.integers(0, src - out + 1, size=2)
    flip = rng.random(batch) < 0.5
    bright = rng.uniform(0.8, 1.2, size=(batch, 1, 1, 1)).astype(np.float32)
    labels = rng.integers(0, 100, size=batch)
    return int(oy), int(ox), flip, bright, labels


def make(variant, device, batch=32):
    cuda = is_cuda(device)
    src, out, passes, nbank = (128, 112, 3, 64) if cuda else (40, 32, 2, 8)
    rng = np.random.default_rng(0)
    bank = rng.integers(0, 256, size=(nbank, 3, src, src), dtype=np.uint8)
    torch.manual_seed(0)
    model = small_convnet().to(device).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    st = {"i": 0}
    mean, std = MEAN[None], STD[None]

    def train(x, y):
        x = x.contiguous(memory_format=torch.channels_last)
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    if variant == "before":
        def step():
            i = st["i"] = st["i"] + 1
            oy, ox, flip, bright, labels = _params(i, batch, src, out)
            idx = (np.arange(batch) + i * batch) % nbank
            img = bank[idx].astype(np.float32) / 255.0
            img = np.ascontiguousarray(img[:, :, oy:oy + out, ox:ox + out])
            img[flip] = img[flip][..., ::-1]
            for _ in range(passes):
                img[:, :, 1:-1, :] = 0.25 * img[:, :, :-2, :] + 0.5 * img[:, :, 1:-1, :] + 0.25 * img[:, :, 2:, :]
                img[:, :, :, 1:-1] = 0.25 * img[:, :, :, :-2] + 0.5 * img[:, :, :, 1:-1] + 0.25 * img[:, :, :, 2:]
            img = np.clip(img * bright, 0.0, 1.0)
            img = ((img - mean) / std).astype(np.float16)
            x = torch.from_numpy(img).to(device)
            y = torch.from_numpy(labels).to(device)
            train(x, y)
        return Step(step, info={"batch": batch, "src": src, "out": out, "blur_passes": passes,
                                "preprocess": "numpy, main thread"})

    gbank = torch.from_numpy(bank).to(device)
    gmean = torch.from_numpy(MEAN).to(device)[None]
    gstd = torch.from_numpy(STD).to(device)[None]
    # per-step parameters for the 64 distinct step indices, uploaded once
    P = [_params(i, batch, src, out) for i in range(64)]
    gflip = torch.tensor(np.stack([p[2] for p in P]), device=device)
    gbright = torch.tensor(np.stack([p[3] for p in P]), device=device)
    glab = torch.tensor(np.stack([p[4] for p in P]), device=device)
    ar = torch.arange(batch, device=device)

    def step():
        i = st["i"] = st["i"] + 1
        k = i % 64
        oy, ox = P[k][0], P[k][1]
        idx = (ar + i * batch) % nbank
        img = gbank[idx].float() / 255.0
        img = img[:, :, oy:oy + out, ox:ox + out].contiguous()
        img = torch.where(gflip[k].view(-1, 1, 1, 1), img.flip(-1), img)
        for _ in range(passes):
            img[:, :, 1:-1, :] = 0.25 * img[:, :, :-2, :] + 0.5 * img[:, :, 1:-1, :] + 0.25 * img[:, :, 2:, :]
            img[:, :, :, 1:-1] = 0.25 * img[:, :, :, :-2] + 0.5 * img[:, :, :, 1:-1] + 0.25 * img[:, :, :, 2:]
        img = (img * gbright[k]).clamp_(0.0, 1.0)
        x = ((img - gmean) / gstd).half()
        train(x, glab[k])
    return Step(step, info={"batch": batch, "src": src, "out": out, "blur_passes": passes,
                            "preprocess": "torch ops on the GPU"})
