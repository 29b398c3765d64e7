"""holdout53_host_grid_detect_infer: a YOLO-style detector whose head builds each level's cell and anchor grids on the
CPU and copies them to the GPU on every forward -> the grids made on the device once per feature-map size (as YOLOv5's
Detect caches them).

Fifty-third held-out set (registered before it was recorded; see the matrix README). Each forward, for its three levels
(80 x 80, 40 x 40, 20 x 20 cells, 3 anchors each): `torch.meshgrid(torch.arange(ny), torch.arange(nx))`, a stack, an
expand and the anchors' expand on the CPU, then two `.to(device)` copies from pageable memory (154 KB each at 80 x 80).
Model: a conv backbone (strides 2 to 32, 32-256 channels, SiLU), a 1 x 1 head per level for 80 classes, the decode in
the forward (sigmoid, grid offset, anchor scale, concatenation); bf16 autocast, channels_last, torch.no_grad(); batch 8
images of 640 x 640 already on the GPU (two in turn); the detections kept on the GPU.
"""

import torch

from ._host_consts import Detector
from ._util import Step, autocast, is_cuda

NAME = "holdout53_host_grid_detect_infer"
EXPECTED_KIND = "host_built_tensors"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "the grids made on the device once per feature-map size and reused (nothing else)"
SIZE = {"batch": 8, "image": 640, "classes": 80}
DESCRIPTION = {
    "before": ("YOLO-style detector (conv backbone, 3 levels, 80 classes), batch 8 x 640 x 640, bf16 autocast, "
               "channels_last, no_grad; the head builds its cell and anchor grids on the CPU and copies them every "
               "forward"),
    "after": "same, the grids made on the device once and reused",
}


def make(variant, device, size=SIZE):
    cuda = is_cuda(device)
    s = size if cuda else {**size, "batch": 2, "image": 64}
    torch.manual_seed(0)
    model = Detector(s["classes"], host=variant == "before").to(device).eval().to(memory_format=torch.channels_last)
    xs = [torch.randn(s["batch"], 3, s["image"], s["image"], device=device).to(memory_format=torch.channels_last)
          for _ in range(2)]
    kept = torch.zeros((), device=device)
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        with torch.no_grad(), autocast(device):
            det = model(xs[i % 2])
            kept.add_(det[..., 4].max())
    return Step(step, info={"batch": s["batch"], "image": s["image"], "amp": "bf16", "host_consts": variant == "before"})
