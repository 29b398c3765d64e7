"""holdout48_per_sample_forward_infer: a small conv classifier in bf16 inference called once per image of its batch
(`torch.cat([model(x.unsqueeze(0)) for x in batch])`, code written for one image and looped over the batch), -> the
model called once on the whole batch.

Forty-eighth held-out set (registered before it was recorded; see the matrix README). Model: four conv-BN-ReLU stages
(32/64/128/256 channels, stride 2 after the first), global average pool, a linear head of 100 classes; eval, bf16
weights, channels_last, inference_mode; batch 32 of 3 x 64 x 64 already on the GPU (two batches in turn).
before: `for x in batch` (Tensor.__iter__: one aten::unbind, then each turn unsqueeze, the model's ops: about 14 ops
        and 10 kernels an image, no sync), torch.cat.
after:  model(batch).
"""

import torch
from torch import nn

from ._util import Step, is_cuda

NAME = "holdout48_per_sample_forward_infer"
EXPECTED_KIND = "launch_overhead"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "the model called once on the whole batch instead of once per image in a Python loop over the batch"
SIZE = {"batch": 32, "hw": 64, "widths": (32, 64, 128, 256), "classes": 100}
DESCRIPTION = {
    "before": ("small conv classifier (4 conv-BN-ReLU stages, 32-256 ch), bf16, channels_last, inference_mode, batch "
               "32 of 3 x 64 x 64; the model called once per image in a Python loop over the batch"),
    "after": "same, the model called once on the whole batch",
}


def sizes(device, size=SIZE):
    return size if is_cuda(device) else {**size, "batch": 3, "hw": 16, "widths": (8, 8, 16, 16)}


def make_model(widths, classes):
    layers, cin = [], 3
    for j, w in enumerate(widths):
        layers += [nn.Conv2d(cin, w, 3, 1 if j == 0 else 2, 1, bias=False), nn.BatchNorm2d(w), nn.ReLU(inplace=True)]
        cin = w
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes))


def make(variant, device, size=SIZE):
    s = sizes(device, size)
    torch.manual_seed(0)
    model = make_model(s["widths"], s["classes"]).to(device).eval()
    if is_cuda(device):
        model = model.to(torch.bfloat16).to(memory_format=torch.channels_last)
    dtype = next(model.parameters()).dtype
    g = torch.Generator().manual_seed(1)
    xs = [torch.randn(s["batch"], 3, s["hw"], s["hw"], generator=g).to(device, dtype)
          .contiguous(memory_format=torch.channels_last) for _ in range(2)]
    st = {"i": 0, "out": None}

    def step():
        i = st["i"] = st["i"] + 1
        with torch.inference_mode():
            if variant == "before":
                st["out"] = torch.cat([model(x.unsqueeze(0)) for x in xs[i % 2]])
            else:
                st["out"] = model(xs[i % 2])
    return Step(step, info={"batch": s["batch"], "calls": "per image" if variant == "before" else "batch"})
