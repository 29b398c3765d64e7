"""holdout47_postproc_loop_infer: a small single-stage detector in bf16 inference whose outputs are decoded one image
at a time (per image: class scores, best class, top 50 anchors, their boxes decoded and scaled; results kept on the GPU,
no sync), -> the same decode on the whole batch (topk over dim 1, one gather).

Forty-seventh held-out set (registered before it was recorded; see the matrix README). Model: five stride-2 3 x 3
conv + BatchNorm + ReLU stages (32-256 channels) on 3 x 256 x 256 images, a 1 x 1 head of 20 classes + 4 box terms
for each of 4 anchors per cell of the last 8 x 8 map (256 anchors an image); bf16, channels_last, eval,
inference_mode; batch 16 (two batches in turn).
before: for each image: sigmoid, max over classes, topk(50), box gather, sigmoid, anchor offset, scale; the
        results a list (about 12 ops an image, no sync).
after:  the same decode on the batch (about 12 ops, no sync).
"""

import torch
import torch.nn as nn

from ._util import Step, is_cuda

NAME = "holdout47_postproc_loop_infer"
EXPECTED_KIND = "launch_overhead"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "the detector's decode done on the whole batch (topk over dim 1, one gather) instead of a loop over its images"
SIZE = {"batch": 16, "hw": 256, "classes": 20, "anchors": 4, "top": 50, "widths": (32, 64, 128, 192, 256)}
DESCRIPTION = {
    "before": ("small single-stage detector (five stride-2 conv stages, 256 anchors an image), bf16, inference_mode, "
               "batch 16 of 3 x 256 x 256; the decode (scores, top 50, boxes) in a Python loop over the images"),
    "after": "same, the decode done on the whole batch",
}


def sizes(device, size=SIZE):
    return size if is_cuda(device) else {**size, "batch": 2, "hw": 64, "widths": (8, 8, 16, 16, 16), "top": 5}


class Detector(nn.Module):
    def __init__(self, widths, classes, anchors):
        super().__init__()
        layers, cin = [], 3
        for w in widths:
            layers += [nn.Conv2d(cin, w, 3, 2, 1, bias=False), nn.BatchNorm2d(w), nn.ReLU(inplace=True)]
            cin = w
        self.body = nn.Sequential(*layers)
        self.head = nn.Conv2d(cin, anchors * (classes + 4), 1)
        self.a, self.c = anchors, classes

    def forward(self, x):
        f = self.head(self.body(x))                              # [b, a * (c + 4), h, w]
        b, _, h, w = f.shape
        f = f.view(b, self.a, self.c + 4, h, w).permute(0, 3, 4, 1, 2).reshape(b, h * w * self.a, self.c + 4)
        return f[..., :self.c], f[..., self.c:]


def anchor_centres(n_side, anchors, hw, device):
    """Each anchor's centre (x, y) in pixels, in the head's order (row, column, anchor)."""
    step = hw / n_side
    ys, xs = torch.meshgrid(torch.arange(n_side, device=device), torch.arange(n_side, device=device), indexing="ij")
    c = torch.stack([xs, ys], -1).float().add(0.5).mul(step).reshape(-1, 1, 2)
    return c.expand(-1, anchors, 2).reshape(-1, 2)


def decode_loop(scores, boxes, centres, scale, top):
    out = []
    for i in range(scores.shape[0]):
        best, label = scores[i].float().sigmoid().max(-1)
        val, idx = best.topk(top)
        b = boxes[i][idx].float().sigmoid()
        c = centres[idx]
        xy, wh = c + (b[:, :2] - 0.5) * scale, b[:, 2:] * 4 * scale
        out.append((torch.cat([xy - wh / 2, xy + wh / 2], -1), val, label[idx]))
    return out


def decode_batch(scores, boxes, centres, scale, top):
    best, label = scores.float().sigmoid().max(-1)
    val, idx = best.topk(top, dim=1)
    b = boxes.gather(1, idx[..., None].expand(-1, -1, 4)).float().sigmoid()
    c = centres[idx]
    xy, wh = c + (b[..., :2] - 0.5) * scale, b[..., 2:] * 4 * scale
    return torch.cat([xy - wh / 2, xy + wh / 2], -1), val, label.gather(1, idx)


def make(variant, device, size=SIZE):
    s = sizes(device, size)
    torch.manual_seed(0)
    model = Detector(s["widths"], s["classes"], s["anchors"]).to(device).eval()
    if is_cuda(device):
        model = model.to(torch.bfloat16).to(memory_format=torch.channels_last)
    dtype = next(model.parameters()).dtype
    g = torch.Generator().manual_seed(1)
    xs = [torch.randn(s["batch"], 3, s["hw"], s["hw"], generator=g).to(device, dtype)
          .contiguous(memory_format=torch.channels_last) for _ in range(2)]
    n_side = s["hw"] // 2 ** len(s["widths"])
    centres = anchor_centres(n_side, s["anchors"], s["hw"], device)
    scale = s["hw"] / n_side
    decode = decode_loop if variant == "before" else decode_batch
    st = {"i": 0, "out": None}

    def step():
        i = st["i"] = st["i"] + 1
        with torch.inference_mode():
            scores, boxes = model(xs[i % 2])
            st["out"] = decode(scores, boxes, centres, scale, s["top"])
    return Step(step, info={"batch": s["batch"], "decode": "loop" if variant == "before" else "batch"})
