"""holdout23_layout_resnet_bf16: a ResNet-style bottleneck net trained in bf16, NCHW -> channels_last.

Twenty-third held-out set (pre-registered 2026-11-29 before it was recorded, right after layout_permute learnt
that channels_last also moves cuDNN's half-precision batch norm from its NCHW kernels to NHWC ones, a share
fitted on the fp16 layout programs only): the first layout program in bf16 (every earlier one was fp16) and
the first with bottleneck blocks (1x1 / 3x3 / 1x1 convs, BN after each, a projection shortcut per stage).
before: stem conv7x7/2 + BN + ReLU + maxpool, three stages of two bottleneck blocks (widths 64/128/256,
        expansion 4), global pool, linear head (100 classes); batch 64 of 3x160x160, bf16 autocast,
        cudnn.benchmark off, SGD(momentum=0.9, foreach); model and input NCHW (contiguous).
after:  model and input in torch.channels_last.
after_graph_only: NCHW as before, the whole step captured in one CUDA graph (so that a launch_overhead ranked
        above the layout fix is checked against a measurement).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._util import Step, capture_graph, is_cuda, replay_step

NAME = "holdout23_layout_resnet_bf16"
EXPECTED_KIND = "layout_permute"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph_only")
FIX = "convert model and input to torch.channels_last (NHWC)"
DESCRIPTION = {
    "before": ("ResNet-style bottleneck net (stem 7x7/2 + maxpool, 3 stages x 2 bottlenecks, widths 64/128/256 x4), "
               "batch 64, 160x160, bf16 autocast, NCHW, SGD momentum"),
    "after": "same, model and input in torch.channels_last",
    "after_graph_only": "same as before (NCHW), the whole step in one CUDA graph",
}


class Bottleneck(nn.Module):
    def __init__(self, cin, width, stride):
        super().__init__()
        cout = 4 * width
        self.c1, self.b1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
        self.c2, self.b2 = nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)
        self.c3, self.b3 = nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout)
        self.short = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                      if stride != 1 or cin != cout else nn.Identity())

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        y = F.relu(self.b2(self.c2(y)))
        return F.relu(self.b3(self.c3(y)) + self.short(x))


def resnet(widths=(64, 128, 256), blocks=2, classes=100):
    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for i, w in enumerate(widths):
        for b in range(blocks):
            layers.append(Bottleneck(cin, w, 2 if (b == 0 and i > 0) else 1))
            cin = 4 * w
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*layers)


def make(variant, device, pool=4):
    cuda = is_cuda(device)
    batch, hw = (64, 160) if cuda else (2, 32)
    prev_bench = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = False
    torch.manual_seed(0)
    fmt = torch.channels_last if variant == "after" else torch.contiguous_format
    model = resnet().to(device).to(memory_format=fmt)
    xs = [torch.randn(batch, 3, hw, hw, device=device).to(memory_format=fmt) for _ in range(pool)]
    ys = [torch.randint(0, 100, (batch,), device=device) for _ in range(pool)]
    graph = variant == "after_graph_only" and cuda
    # (SGD keeps no step count on the host: it needs no capturable flag to be graphed.)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    st = {"i": 0}

    def close():
        torch.backends.cudnn.benchmark = prev_bench
    if graph:
        sx, sy = xs[0].clone(), ys[0].clone()

        def body():
            opt.zero_grad(set_to_none=False)
            # The autocast weight cache must be off inside a graph (torch.cuda.graph docs).
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16, cache_enabled=False):
                out = model(sx)
            F.cross_entropy(out.float(), sy).backward()
            opt.step()
        g = capture_graph(body, warmup=3)
        return Step(replay_step(g, [(sx, xs), (sy, ys)]), close=close,
                    info={"batch": batch, "memory_format": str(fmt), "cuda_graph": True})

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16):
            out = model(xs[i % pool])
        F.cross_entropy(out.float(), ys[i % pool]).backward()
        opt.step()
    return Step(step, close=close, info={"batch": batch, "memory_format": str(fmt)})
